//! Native: the engine creates the container directly, with what a toolbox would give —
//! the invoking user, their home, and the host's network and IPC (Ray and RCCL need both).

use std::path::PathBuf;

use async_trait::async_trait;

use super::{Manager, ManagerKind};
use crate::container_engine::argv::create_argv;
use crate::container_engine::{ContainerEngine, CreateRequest, EngineInfo, EngineKind, Mount};
use crate::error::Result;

/// `home`: the user's home, mounted at the same path and the toolbox's `HOME` (none: no mount).
pub struct Native {
    pub home: Option<PathBuf>,
}

#[async_trait]
impl Manager for Native {
    fn kind(&self) -> ManagerKind {
        ManagerKind::Native
    }

    fn complete(&self, request: &mut CreateRequest, engine: &EngineInfo) {
        // SAFETY: getuid/getgid have no preconditions and cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        request.user = Some(format!("{uid}:{gid}"));
        request.host_network = true;
        request.host_ipc = true;
        request.keep_id = engine.kind == EngineKind::Podman && engine.rootless;
        if let Some(home) = self.home.clone() {
            request.mounts.push(Mount { source: home.clone(), target: home.clone(), read_only: false });
            request.env.insert("HOME".into(), home.display().to_string());
            request.workdir = Some(home);
        }
        // The image's own entrypoint would start a server; a toolbox just stays up, under an init
        // that reaps what Ray and vLLM leave (a node serves for weeks).
        request.entrypoint = Some(vec!["sleep".into()]);
        request.command = vec!["infinity".into()];
        request.init = true;
    }

    fn describe_create(&self, engine: EngineKind, request: &CreateRequest) -> Vec<Vec<String>> {
        vec![create_argv(engine, request)]
    }

    async fn create(&self, engine: &dyn ContainerEngine, request: &CreateRequest) -> Result<String> {
        engine.container_create(request).await
    }

    fn enter_argv(&self, engine: EngineKind, name: &str, shell: &str) -> Vec<String> {
        [engine.program(), "exec", "-it", name, shell, "-l"].map(String::from).to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toolbox_runs_an_init_that_reaps_on_either_engine() {
        for kind in [EngineKind::Podman, EngineKind::Docker] {
            let engine =
                EngineInfo { kind, rootless: false, runtime: "crun".into(), version: String::new(), pid: None };
            let mut request = CreateRequest { name: "vllm".into(), image: "img".into(), ..Default::default() };
            Native { home: None }.complete(&mut request, &engine);
            assert!(request.init, "{kind:?}");
            let argv = Native { home: None }.describe_create(kind, &request).remove(0);
            assert!(argv.contains(&"--init".to_string()), "{argv:?}");
        }
    }
}
