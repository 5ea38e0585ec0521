//! docker (to be written).
