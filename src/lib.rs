//! strix-toolbox: host facts → toolbox spec → plan → apply.
//!
//! Facts are read only through [`host::HostRoot`], the spec and the plan are pure data, and
//! effects go through the [`engine::Engine`] and [`manager`] seams. [`ops`] are the operations
//! (settings in, typed reports out); [`commands`] parse, call one operation and render.

pub mod apply;
pub mod build;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod doctor;
pub mod engine;
pub mod engine_kind;
pub mod engine_probe;
pub mod error;
pub mod host;
pub mod installed;
pub mod labels;
pub mod lock;
pub mod login_shell;
pub mod manager;
pub mod ops;
pub mod pin;
pub mod plan;
pub mod process;
pub mod rccl;
pub mod reference;
pub mod settings;
pub mod spec;
pub mod ui;
pub mod verify;

/// The image the cluster runs; channels are its tags.
pub const DEFAULT_IMAGE_REPO: &str = "docker.io/kyuz0/vllm-therock-gfx1151";
/// The base `build` overlays the custom RCCL onto.
pub const DEFAULT_BASE_IMAGE: &str = "docker.io/kyuz0/vllm-therock-gfx1151:latest";
/// What `build` tags its result as unless told otherwise.
pub const DEFAULT_BUILD_TAG: &str = "localhost/vllm-therock-gfx1151:local";
