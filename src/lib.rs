//! strix-toolbox: the toolbox on every Strix Halo node, and models served across the nodes.
//!
//! - A node: host facts → toolbox spec → plan → apply → verify. Facts are read only through
//!   [`host::HostRoot`], the spec and the plan are pure data, effects go through the
//!   [`container_engine::ContainerEngine`] and [`manager`] seams, and the new toolbox is verified from the inside
//!   before it is swapped in; until then the old one is untouched.
//! - Serving, on the toolboxes: [`serving`] (each engine a profile, a launch a plan of steps and
//!   proofs, a record per service) and [`model`] (fetched once), the [`router`] in front of what
//!   serves, and [`bench`], [`metrics`] and [`watch`] to measure it and keep it serving.
//! - The cluster on top: [`cluster`] runs the same operations on every [`node`] (this machine, or
//!   one over ssh), all or nothing.
//!
//! [`ops`] are the operations (settings in, typed reports out); [`commands`] parse, call one
//! operation and render. docs/architecture.md draws the refresh, the launch and the watch.
//!
//! Words: the *container engine* is podman or Docker ([`container_engine`]); an *engine* alone is
//! what serves a model, vLLM or llama.cpp ([`serving::engine`]). A *plan* is what a command will
//! carry out: a refresh's steps ([`plan`]), a launch's steps on every node ([`serving::plan`]); the
//! *fit* ([`serving::fit`]) is every layout a model could take on the nodes and the one a launch
//! plan takes, which the `plan` command prints.

pub(crate) mod apply;
pub mod bench;
pub(crate) mod check;
pub mod cli;
pub mod cluster;
pub mod commands;
pub(crate) mod container_engine;
pub(crate) mod doctor;
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
