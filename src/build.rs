//! build (to be written).
