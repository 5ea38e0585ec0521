//! lock (to be written).
