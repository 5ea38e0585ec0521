//! RCCL artifacts (to be written).
