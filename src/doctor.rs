//! doctor (to be written).
