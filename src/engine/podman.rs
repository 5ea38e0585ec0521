//! podman (to be written).
