//! Toolbox managers (to be written).
