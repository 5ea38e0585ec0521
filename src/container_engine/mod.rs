//! The `ContainerEngine` seam: images and containers over an API (Podman's libpod API or Docker's).
//!
//! Everything above this module speaks in these engine-neutral types; `podman.rs` and
//! `docker.rs` translate them to podman-api and bollard calls.

pub mod absent;
pub mod archive;
pub mod argv;
pub mod auth;
pub mod compat_pull;
mod connect;
mod credential_helper;
pub mod docker;
pub mod endpoint;
#[cfg(test)]
pub mod fake;
pub mod find;
pub mod kind;
mod libpod_build;
mod libpod_inspect;
mod output;
pub mod podman;
pub mod probe;
pub mod service;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use connect::{connect, Connection};
pub use kind::EngineKind;

use crate::error::Result;
use crate::reporter::Reporter;

/// What the engine says about itself; the spec needs rootless and the OCI runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EngineInfo {
    pub kind: EngineKind,
    /// True when the engine runs without root (rootless podman).
    pub rootless: bool,
    /// The OCI runtime in use: "crun", "runc", ...
    pub runtime: String,
    /// Server version, for messages (empty when not asked for).
    pub version: String,
    /// The engine's server process as this host sees it (who listens on its socket): its limits
    /// are those its containers start under. None: not known (another pid namespace, a guess).
    pub pid: Option<u32>,
}

/// An image as the engine reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImageInfo {
    /// Full image id (sha256:...).
    pub id: String,
    /// `repo@sha256:...` digests, when the image came from a registry.
    pub repo_digests: Vec<String>,
    /// `repo:tag` names.
    pub repo_tags: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// Creation time as RFC 3339, when known.
    pub created: Option<String>,
}

/// A container as the engine reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ContainerInfo {
    pub id: String,
    pub name: String,
    /// Image id the container was created from.
    pub image_id: String,
    /// Image reference as given at create time.
    pub image: String,
    pub labels: BTreeMap<String, String>,
    pub running: bool,
    /// Podman only: the argv that created the container (`Config.CreateCommand`), which the
    /// Toolbx and Distrobox managers re-run with our flags.
    pub create_command: Vec<String>,
    /// Created time, RFC 3339.
    pub created: Option<String>,
}

/// One ulimit; `None` means unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ulimit {
    pub name: String,
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// A bind mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    pub source: PathBuf,
    pub target: PathBuf,
    pub read_only: bool,
}

/// Everything needed to create a container, engine-neutral.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CreateRequest {
    pub name: String,
    pub image: String,
    /// Host path → container path.
    pub devices: Vec<(PathBuf, PathBuf)>,
    /// Numeric gids or names, as given to --group-add.
    pub group_add: Vec<String>,
    pub ulimits: Vec<Ulimit>,
    pub security_opt: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub mounts: Vec<Mount>,
    /// "uid:gid" or a name; None → the image's default.
    pub user: Option<String>,
    pub host_network: bool,
    pub host_ipc: bool,
    /// Rootless podman: map our uid into the container as itself (`--userns keep-id`), so
    /// files written to the mounted home stay ours.
    pub keep_id: bool,
    pub workdir: Option<PathBuf>,
    pub hostname: Option<String>,
    /// Command to keep the container alive (e.g. ["sleep", "infinity"]).
    pub command: Vec<String>,
    /// An init as PID 1 (`--init`: podman's catatonit, docker's tini) that reaps what exits in the
    /// container: `sleep` as PID 1 never does, so every process a launch leaves stays a zombie.
    pub init: bool,
    pub entrypoint: Option<Vec<String>>,
}

/// An image build: a tar context holding `containerfile`, tagged with every one of `tags`
/// (at least one).
#[derive(Debug, Clone)]
pub struct BuildJob<'a> {
    pub context_tar: Vec<u8>,
    pub containerfile: &'a str,
    pub tags: &'a [String],
    pub labels: &'a BTreeMap<String, String>,
    pub build_args: &'a BTreeMap<String, String>,
}

/// The largest archive [`Engine::container_archive`] reads into memory: librccl is ~150 MB, but
/// the ABI check also reads its consumers, and a multi-target libtorch_hip.so passes 1 GB. Bounded
/// all the same, so a wrong path cannot fill the memory.
pub const ARCHIVE_LIMIT: usize = 4 << 30;

/// Where an exec's output goes.
#[derive(Clone, Copy)]
pub enum ExecIo<'a> {
    /// Passed through as it arrives, to the command's own output (`enter NAME -- CMD`).
    PassThrough(&'a dyn ExecSink),
    /// Into [`ExecOutcome`], for the caller to read.
    Capture,
}

/// Who takes an exec's output as it arrives: the command's output (`crate::output::Output`),
/// which owns stdout and stderr, so a reader that goes away ends it quietly.
pub trait ExecSink: Send + Sync {
    fn stdout(&self, bytes: &[u8]);
    fn stderr(&self, bytes: &[u8]);
}

/// The result of a command run in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    pub exit_code: i64,
    /// What it printed, with [`ExecIo::Capture`] (else empty).
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Images and containers over an API.
#[async_trait::async_trait]
pub trait ContainerEngine: Send + Sync {
    fn kind(&self) -> EngineKind;
    /// Where the API was reached (socket path or URL), for messages.
    fn endpoint(&self) -> &str;
    async fn info(&self) -> Result<EngineInfo>;

    /// Pull `reference`, reporting layers and bytes through `reporter`.
    async fn pull(&self, reference: &str, reporter: &dyn Reporter) -> Result<()>;
    /// None when no such image exists locally.
    async fn image_inspect(&self, reference: &str) -> Result<Option<ImageInfo>>;
    /// Images whose name is in `repository` (without tag).
    async fn image_list(&self, repository: &str) -> Result<Vec<ImageInfo>>;
    /// Tag image `id` as `repository:tag`.
    async fn image_tag(&self, id: &str, repository: &str, tag: &str) -> Result<()>;
    /// Remove one reference or id; a still-used image is an error.
    async fn image_remove(&self, reference: &str) -> Result<()>;
    async fn image_push(&self, reference: &str, reporter: &dyn Reporter) -> Result<()>;
    /// Build `job`, streaming its log to `reporter`; returns the image id.
    async fn build(&self, job: BuildJob<'_>, reporter: &dyn Reporter) -> Result<String>;

    /// None when no such container exists.
    async fn container_inspect(&self, name_or_id: &str) -> Result<Option<ContainerInfo>>;
    /// Containers carrying `label` (key or key=value), running or not.
    async fn container_list(&self, label: &str) -> Result<Vec<ContainerInfo>>;
    /// Returns the new container's id.
    async fn container_create(&self, request: &CreateRequest) -> Result<String>;
    async fn container_rename(&self, name_or_id: &str, new_name: &str) -> Result<()>;
    async fn container_start(&self, name_or_id: &str) -> Result<()>;
    /// Stop at once (no grace period: its processes are ours, not a user's).
    async fn container_stop(&self, name_or_id: &str) -> Result<()>;
    async fn container_remove(&self, name_or_id: &str, force: bool) -> Result<()>;
    /// The tar archive of `path` in a container (created or running); None when it has no such
    /// path. Refuses archives over [`ARCHIVE_LIMIT`].
    async fn container_archive(&self, name_or_id: &str, path: &str) -> Result<Option<Vec<u8>>>;
    /// Run `command` in a running container as `user` (the container's user when None), its
    /// output passed through to ours or captured (`io`).
    async fn exec(
        &self,
        name_or_id: &str,
        command: &[String],
        env: &[String],
        user: Option<&str>,
        io: ExecIo<'_>,
    ) -> Result<ExecOutcome>;
}
