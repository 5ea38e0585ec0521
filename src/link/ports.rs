//! A port something listens on across the cluster link with no authentication of its own, named
//! for the operator: only the cluster's nodes may reach it (each serving engine says its own).

/// One such port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkPort {
    pub port: u16,
    /// What listens there, as messages name it ("llama.cpp's rpc-server").
    pub what: &'static str,
}
