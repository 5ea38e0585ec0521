//! plan (to be written).
