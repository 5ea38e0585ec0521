//! endpoint (to be written).
