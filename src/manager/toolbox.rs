//! Toolbx. `toolbox create NAME -i IMAGE -- <podman flags>` silently drops the flags, so instead:
//! let `toolbox create` make its container, read back the argv it used (`Config.CreateCommand`),
//! remove it, and run that argv again with our flags added. `toolbox enter NAME` keeps working
//! (labels, entry point and mounts are Toolbx's own), and the devices, groups and memlock are there.

use std::path::PathBuf;

use async_trait::async_trait;

use super::{spec_fields, Manager, ManagerKind};
use crate::engine::argv::create_flags;
use crate::engine::{CreateRequest, Engine, EngineInfo, EngineKind};
use crate::error::{Error, Result};
use crate::process::{run_captured, ChildEnv};

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

/// Toolbx's create argv with our flags inserted right after `create`. Where we set ulimits,
/// Toolbx's `--ulimit host` goes: podman lets `host` win over an explicit memlock.
pub fn merge_create_command(create_command: &[String], podman: &str, flags: &[String]) -> Result<Vec<String>> {
    let create_at = create_command.iter().position(|a| a == "create").ok_or_else(|| {
        Error::Failed(format!(
            "Toolbx's container has no recognisable create command ({create_command:?}); cannot add the GPU flags. \
             Fix: use --manager native"
        ))
    })?;
    let drop_ulimit_host = flags.iter().any(|f| f == "--ulimit");
    let mut merged = vec![podman.to_string()];
    merged.extend(create_command[1..=create_at].iter().cloned());
    merged.extend(flags.iter().cloned());
    let mut rest = create_command[create_at + 1..].iter().peekable();
    while let Some(arg) = rest.next() {
        if drop_ulimit_host && arg == "--ulimit" && rest.peek().is_some_and(|v| *v == "host") {
            rest.next();
            continue;
        }
        if drop_ulimit_host && arg == "--ulimit=host" {
            continue;
        }
        merged.push(arg.clone());
    }
    Ok(merged)
}

#[async_trait]
impl Manager for Toolbox {
    fn kind(&self) -> ManagerKind {
        ManagerKind::Toolbox
    }

    fn complete(&self, _request: &mut CreateRequest, _engine: &EngineInfo) {}

    fn describe_create(&self, _engine: EngineKind, request: &CreateRequest) -> Vec<Vec<String>> {
        let mut recreate = vec![self.podman.display().to_string(), "create".into()];
        recreate.extend(our_flags(request));
        recreate.push("<the rest of Toolbx's own create command>".into());
        vec![
            self.toolbox_create_argv(request),
            vec![
                "podman".into(),
                "inspect".into(),
                "--format".into(),
                "{{.Config.CreateCommand}}".into(),
                request.name.clone(),
            ],
            vec!["podman".into(), "rm".into(), request.name.clone()],
            recreate,
        ]
    }

    async fn create(&self, engine: &dyn Engine, request: &CreateRequest) -> Result<String> {
        run_captured(&self.toolbox_create_argv(request), &self.child_env(engine.kind())).await?;
        let result = async {
            let created = engine.container_inspect(&request.name).await?.ok_or_else(|| {
                Error::Failed(format!(
                    "toolbox create succeeded but {} has no container {}: Toolbx uses the local podman. Fix: point \
                     CONTAINER_HOST at the local podman service, or unset it",
                    engine.endpoint(),
                    request.name
                ))
            })?;
            let merged =
                merge_create_command(&created.create_command, &self.podman.display().to_string(), &our_flags(request))?;
            engine.container_remove(&request.name, true).await?;
            let id = run_captured(&merged, &self.child_env(engine.kind())).await?;
            Ok(id.trim().to_string())
        }
        .await;
        if result.is_err() {
            // Leave no half-made container behind.
            let _ = engine.container_remove(&request.name, true).await;
        }
        result
    }

    fn enter_argv(&self, _engine: EngineKind, name: &str, _shell: &str) -> Vec<String> {
        vec![self.program.display().to_string(), "enter".into(), name.to_string()]
    }

    fn child_env(&self, _engine: EngineKind) -> ChildEnv {
        ChildEnv::local_podman()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn inserts_flags_after_create_and_drops_ulimit_host_when_we_set_ulimits() {
        let toolbox = strings(&[
            "podman",
            "--log-level",
            "error",
            "create",
            "--name",
            "vllm-new",
            "--privileged",
            "--ulimit",
            "host",
            "--volume",
            "/:/run/host:rslave",
            "img:1",
            "toolbox",
            "init-container",
        ]);
        let flags = strings(&["--device", "/dev/kfd:/dev/kfd", "--ulimit", "memlock=-1:-1"]);
        let merged = merge_create_command(&toolbox, "/usr/bin/podman", &flags).unwrap();
        assert_eq!(
            merged,
            strings(&[
                "/usr/bin/podman",
                "--log-level",
                "error",
                "create",
                "--device",
                "/dev/kfd:/dev/kfd",
                "--ulimit",
                "memlock=-1:-1",
                "--name",
                "vllm-new",
                "--privileged",
                "--volume",
                "/:/run/host:rslave",
                "img:1",
                "toolbox",
                "init-container",
            ])
        );
    }

    #[test]
    fn keeps_ulimit_host_without_our_ulimits() {
        let toolbox = strings(&["podman", "create", "--ulimit", "host", "img"]);
        let merged = merge_create_command(&toolbox, "podman", &strings(&["--device", "/dev/kfd:/dev/kfd"])).unwrap();
        assert!(merged.windows(2).any(|w| w == ["--ulimit", "host"]));
    }

    #[test]
    fn refuses_an_unrecognisable_command() {
        assert!(merge_create_command(&strings(&["podman", "run"]), "podman", &[]).is_err());
    }
}
