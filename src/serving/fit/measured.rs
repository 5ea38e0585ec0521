//! The plan checked against the engine: what the plan put on each node (the launch records it)
//! beside what the engine itself said after loading, read from its logs by [`super::vllm_log`]
//! (each rank's weights and KV cache) and [`super::llama_log`] (each device's model and KV
//! buffers). Which log line is which node is the engine's to say (`ServingEngine::measured`).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::Fit;
use crate::serving::logs::LogTail;

/// What the plan put on one node, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    pub node: String,
    pub weights_bytes: u64,
    pub kv_cache_bytes: u64,
    pub context_tokens: u64,
}

impl Planned {
    /// Each node's load in the plan's chosen layout (none without one).
    pub fn of(fit: &Fit) -> Vec<Planned> {
        let Some(figures) = fit.chosen_layout().and_then(|layout| layout.fits()) else { return Vec::new() };
        figures
            .nodes
            .iter()
            .map(|load| Planned {
                node: load.node.clone(),
                weights_bytes: load.weights_bytes,
                kv_cache_bytes: load.kv_cache_bytes,
                context_tokens: figures.context_tokens,
            })
            .collect()
    }
}

/// One node's figures as planned, and as the engine said them (None: its log did not say).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    pub planned: Planned,
    pub said_weights_bytes: Option<u64>,
    pub said_kv_cache_bytes: Option<u64>,
    pub said_context_tokens: Option<u64>,
}

impl Measured {
    /// Nothing said yet for each of `planned`.
    pub fn unsaid(planned: &[Planned]) -> Vec<Measured> {
        planned.iter().map(|planned| Measured { planned: planned.clone(), ..Measured::default() }).collect()
    }

    /// `said` added to what is said of the node (an engine may say it in several lines).
    pub fn add(figure: &mut Option<u64>, said: Option<u64>) {
        if let Some(said) = said {
            *figure = Some(figure.unwrap_or(0).saturating_add(said));
        }
    }
}

/// One node's serving logs, and where it is on the cluster link (a line may name a node by it).
#[derive(Debug, Clone, Copy)]
pub struct NodeLog<'a> {
    pub node: &'a str,
    pub link_ip: Ipv4Addr,
    pub tails: &'a [LogTail],
}

impl NodeLog<'_> {
    /// The lines of its log `file`.
    pub fn lines_of(&self, file: &str) -> Option<String> {
        self.tails.iter().find(|tail| tail.file == file).map(|tail| tail.lines.join("\n"))
    }
}
