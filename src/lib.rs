//! strix-toolbox: host facts → toolbox spec → plan → apply.
//!
//! Facts are read only through [`host::HostRoot`], the spec and the plan are pure data, and
//! effects go through the [`engine::Engine`] and [`manager`] seams. [`ops`] are the operations
//! (settings in, typed reports out); [`commands`] parse, call one operation and render.

pub(crate) mod apply;
pub mod bench;
pub(crate) mod check;
pub mod cli;
pub mod cluster;
pub mod commands;
pub(crate) mod doctor;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod host;
pub(crate) mod image;
pub(crate) mod labels;
pub(crate) mod link;
pub(crate) mod manager;
pub mod metrics;
pub(crate) mod model;
pub mod node;
pub(crate) mod ops;
pub mod output;
pub(crate) mod paths;
pub(crate) mod plan;
pub(crate) mod rccl;
pub(crate) mod registry;
pub mod reporter;
pub mod router;
pub(crate) mod secret;
pub(crate) mod serving;
pub(crate) mod settings;
pub(crate) mod spec;
pub(crate) mod spread;
pub(crate) mod toolbox;
pub(crate) mod verify;
pub mod watch;

/// The image the cluster runs; channels are its tags.
pub(crate) const DEFAULT_IMAGE_REPO: &str = "docker.io/kyuz0/vllm-therock-gfx1151";
/// The base `build` overlays the custom RCCL onto.
pub(crate) const DEFAULT_BASE_IMAGE: &str = "docker.io/kyuz0/vllm-therock-gfx1151:latest";
/// What `build` tags its result as unless told otherwise.
pub(crate) const DEFAULT_BUILD_TAG: &str = "localhost/vllm-therock-gfx1151:local";
