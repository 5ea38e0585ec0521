//! Distrobox: `distrobox create --additional-flags` carries our flags, one per occurrence.

use std::path::PathBuf;

use async_trait::async_trait;

use super::{spec_fields, Manager, ManagerKind};
use crate::engine::argv::create_flags;
use crate::engine::{CreateRequest, Engine, EngineInfo, EngineKind};
use crate::error::Result;
use crate::process::{run_captured, ChildEnv};

pub struct Distrobox {
    pub program: PathBuf,
}

impl Distrobox {
    fn create_argv(&self, engine: EngineKind, request: &CreateRequest) -> Vec<String> {
        let mut argv = vec![
            self.program.display().to_string(),
            "create".into(),
            "--yes".into(),
            "--name".into(),
            request.name.clone(),
            "--image".into(),
            request.image.clone(),
        ];
        // distrobox joins these with spaces, so each flag travels as one `--flag=value` word.
        for pair in create_flags(engine, &spec_fields(request)).chunks(2) {
            argv.push("--additional-flags".into());
            argv.push(pair.join("="));
        }
        argv
    }
}

#[async_trait]
impl Manager for Distrobox {
    fn kind(&self) -> ManagerKind {
        ManagerKind::Distrobox
    }

    fn complete(&self, _request: &mut CreateRequest, _engine: &EngineInfo) {}

    fn describe_create(&self, engine: EngineKind, request: &CreateRequest) -> Vec<Vec<String>> {
        vec![self.create_argv(engine, request)]
    }

    async fn create(&self, engine: &dyn Engine, request: &CreateRequest) -> Result<String> {
        let created = run_captured(&self.create_argv(engine.kind(), request), &self.child_env(engine.kind())).await;
        if created.is_err() {
            let _ = engine.container_remove(&request.name, true).await;
        }
        created?;
        let info = engine.container_inspect(&request.name).await?;
        Ok(info.map(|c| c.id).unwrap_or_default())
    }

    fn enter_argv(&self, _engine: EngineKind, name: &str, _shell: &str) -> Vec<String> {
        vec![self.program.display().to_string(), "enter".into(), name.to_string()]
    }

    /// Distrobox picks podman when it finds it; the engine we use is the one it must use.
    fn child_env(&self, engine: EngineKind) -> ChildEnv {
        let mut env = ChildEnv::local_podman();
        env.set.push(("DBX_CONTAINER_MANAGER", engine.program().to_string()));
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flag_travels_as_one_additional_flags_word() {
        let distrobox = Distrobox { program: "/usr/bin/distrobox".into() };
        let mut request =
            CreateRequest { name: "vllm-strix-new".into(), image: "img:dev".into(), ..Default::default() };
        request.devices.push(("/dev/kfd".into(), "/dev/kfd".into()));
        request.group_add.push("105".into());
        request.user = Some("1000:1000".into()); // distrobox brings its own user: not passed
        let argv = distrobox.create_argv(EngineKind::Podman, &request);
        assert_eq!(
            argv,
            [
                "/usr/bin/distrobox",
                "create",
                "--yes",
                "--name",
                "vllm-strix-new",
                "--image",
                "img:dev",
                "--additional-flags",
                "--device=/dev/kfd:/dev/kfd",
                "--additional-flags",
                "--group-add=105",
            ]
        );
    }

    #[test]
    fn distrobox_is_told_which_engine_to_use() {
        let distrobox = Distrobox { program: "/usr/bin/distrobox".into() };
        for engine in [EngineKind::Podman, EngineKind::Docker] {
            let env = distrobox.child_env(engine);
            assert_eq!(env.set, [("DBX_CONTAINER_MANAGER", engine.program().to_string())]);
            assert_eq!(env.unset, ["CONTAINER_HOST"]);
        }
    }
}
