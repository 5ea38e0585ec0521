//! Settings resolved once from flags and environment (ripgrep's `HiArgs`): everything
//! below `commands/` takes these, never the clap types.

use std::path::PathBuf;
use std::sync::Arc;

use crate::container_engine::endpoint::process_env;
use crate::container_engine::kind::EngineChoice;
use crate::container_engine::{self, Connection, EngineKind};
use crate::error::Result;
use crate::host::installed::Installed;
use crate::host::machine_id::machine_id;
use crate::host::HostRoot;
use crate::paths::Paths;
use crate::reporter::Reporter;

/// What every operation may need about how it was invoked.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the node's devices, sysfs, /etc and /proc are read from (`/`, or a test tree).
    pub host_root: PathBuf,
    /// The engine family, `--container-engine auto` already decided.
    pub engine: EngineKind,
    /// Engines and toolbox managers on PATH.
    pub installed: Installed,
    /// Where operations report their progress (the binary draws it; tests stay silent).
    pub reporter: Arc<dyn Reporter>,
    /// `STRIX_LIVE_INTERFACES=1`: under a copied --host-root, still ask this process's network
    /// interfaces (ethtool) as the node's. For tests that run inside their own network namespace.
    pub live_interfaces: bool,
    /// This user's directories (XDG, HOME, the private runtime directory), resolved once.
    pub paths: Paths,
    /// A unit test's in-memory engine, which [`Settings::connect`] returns instead.
    #[cfg(test)]
    pub test_engine: Option<TestEngine>,
}

impl Settings {
    /// Resolve the global flags against this process's environment and terminal.
    pub fn resolve(host_root: PathBuf, engine: EngineChoice, reporter: Arc<dyn Reporter>) -> Settings {
        let installed = Installed::find();
        // The node's own state is kept under its machine id: one home may serve many nodes.
        let machine_id = HostRoot::open(&host_root).ok().and_then(|root| machine_id(&root));
        Settings {
            host_root,
            engine: engine.resolve(&installed, &process_env),
            installed,
            reporter,
            live_interfaces: process_env("STRIX_LIVE_INTERFACES").is_some_and(|v| v == "1"),
            paths: Paths::of_this_process().for_node(machine_id.as_deref()),
            #[cfg(test)]
            test_engine: None,
        }
    }

    /// The node's files (and, where they are this machine's, its network interfaces).
    pub fn open_host_root(&self) -> Result<HostRoot> {
        Ok(HostRoot::open(&self.host_root)?.with_live_interfaces(self.live_interfaces))
    }

    /// A connection to this node's engine.
    pub async fn connect(&self) -> Result<Connection> {
        #[cfg(test)]
        if let Some(TestEngine(engine)) = &self.test_engine {
            return Ok(Connection::to(engine.clone()));
        }
        container_engine::connect(self.engine, &self.installed).await
    }
}

#[cfg(test)]
impl Settings {
    /// Settings for a unit test: `host_root` as the node (its directories under it too), podman,
    /// nothing found on PATH, silent.
    pub fn for_tests(host_root: &std::path::Path) -> Settings {
        Settings {
            host_root: host_root.to_path_buf(),
            engine: EngineKind::Podman,
            installed: Installed::default(),
            reporter: Arc::new(crate::reporter::Silent),
            live_interfaces: false,
            paths: Paths::under(host_root),
            test_engine: None,
        }
    }

    /// These settings, their engine `engine` (an in-memory one).
    pub fn with_engine(self, engine: Arc<dyn crate::container_engine::ContainerEngine>) -> Settings {
        Settings { test_engine: Some(TestEngine(engine)), ..self }
    }
}

/// A unit test's engine, in [`Settings`].
#[cfg(test)]
#[derive(Clone)]
pub struct TestEngine(pub Arc<dyn crate::container_engine::ContainerEngine>);

#[cfg(test)]
impl std::fmt::Debug for TestEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestEngine")
    }
}
