//! Toolbx. `toolbox create NAME -i IMAGE -- <podman flags>` silently drops the flags, so Toolbx
//! makes its container and we recreate it from its own create command with our flags
//! (`recreate.rs`). `toolbox enter NAME` keeps working, and the devices, groups and memlock are there.

use std::path::PathBuf;

use async_trait::async_trait;

use super::recreate::{describe, recreate_with_flags};
use super::{spec_fields, Manager, ManagerKind};
use crate::container_engine::argv::create_flags;
use crate::container_engine::{ContainerEngine, CreateRequest, EngineInfo, EngineKind};
use crate::error::Result;
use crate::manager::process::{run_captured, ChildEnv};

pub struct Toolbox {
    pub program: PathBuf,
    pub podman: PathBuf,
}

impl Toolbox {
    fn toolbox_create_argv(&self, request: &CreateRequest) -> Vec<String> {
        vec![
            self.program.display().to_string(),
            "create".into(),
            "--container".into(),
            request.name.clone(),
            "--image".into(),
            request.image.clone(),
        ]
    }
}

/// Our flags for a Toolbx container.
fn our_flags(request: &CreateRequest) -> Vec<String> {
    create_flags(EngineKind::Podman, &spec_fields(request))
}

#[async_trait]
impl Manager for Toolbox {
    fn kind(&self) -> ManagerKind {
        ManagerKind::Toolbox
    }

    fn complete(&self, _request: &mut CreateRequest, _engine: &EngineInfo) {}

    fn describe_create(&self, _engine: EngineKind, request: &CreateRequest) -> Vec<Vec<String>> {
        let mut steps = vec![self.toolbox_create_argv(request)];
        steps.extend(describe("Toolbx", &self.podman, &request.name, &our_flags(request)));
        steps
    }

    async fn create(&self, engine: &dyn ContainerEngine, request: &CreateRequest) -> Result<String> {
        let env = self.child_env(engine.kind());
        if let Err(error) = run_captured(&self.toolbox_create_argv(request), &env).await {
            let _ = engine.container_remove(&request.name, true).await;
            return Err(error);
        }
        recreate_with_flags("Toolbx", engine, &request.name, &self.podman, &our_flags(request), &env).await
    }

    fn enter_argv(&self, _engine: EngineKind, name: &str, _shell: &str) -> Vec<String> {
        vec![self.program.display().to_string(), "enter".into(), name.to_string()]
    }

    fn child_env(&self, _engine: EngineKind) -> ChildEnv {
        ChildEnv::local_podman()
    }
}
