//! A port something listens on across the cluster link with no authentication of its own, named
//! for the operator: only the cluster's nodes may reach it (each serving engine says its own).

/// One such port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkPort {
    pub port: u16,
    /// What listens there, as messages name it ("llama.cpp's rpc-server").
    pub what: &'static str,
    /// Where every worker listens on it and the head connects (llama.cpp's RPC): the name of the
    /// `cluster doctor` row that proves each worker's port reachable from the head.
    pub from_head: Option<&'static str>,
}

impl LinkPort {
    /// A port only the head listens on.
    pub const fn on_head(port: u16, what: &'static str) -> LinkPort {
        LinkPort { port, what, from_head: None }
    }
}
