//! Host facts (to be written).
