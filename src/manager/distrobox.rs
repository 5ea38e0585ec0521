//! Distrobox. With podman it adds `--ulimit host`, which wins over our memlock, so, as with Toolbx,
//! distrobox makes its container and we recreate it from its own create command with our flags
//! (`recreate.rs`). With docker it adds no ulimit, and `--additional-flags` carries our flags.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::recreate::{describe, recreate_with_flags};
use super::{spec_fields, Manager, ManagerKind};
use crate::container_engine::argv::create_flags;
use crate::container_engine::{ContainerEngine, CreateRequest, EngineInfo, EngineKind};
use crate::error::{Error, Result};
use crate::manager::process::{run_captured, ChildEnv};

pub struct Distrobox {
    pub program: PathBuf,
    /// The podman CLI, to recreate podman containers (None where podman is not installed).
    pub podman: Option<PathBuf>,
}

impl Distrobox {
    /// `distrobox create`, with `additional_flags` passed on to the engine's create.
    fn create_argv(&self, request: &CreateRequest, additional_flags: &[String]) -> Vec<String> {
        let mut argv = vec![
            self.program.display().to_string(),
            "create".into(),
            "--yes".into(),
            "--name".into(),
            request.name.clone(),
            "--image".into(),
            request.image.clone(),
        ];
        for flag in additional_flags {
            argv.push("--additional-flags".into());
            argv.push(flag.clone());
        }
        argv
    }

    fn podman(&self) -> Result<&PathBuf> {
        self.podman.as_ref().ok_or_else(|| {
            super::not_installed(
                "podman",
                "Distrobox with podman needs the podman CLI, which is not installed",
                "install podman",
            )
        })
    }
}

/// Our flags as `--additional-flags` words. distrobox joins them with spaces and runs the result
/// through its shell (`eval`), so each flag travels as one `--flag=value` word, and a value the
/// shell would reinterpret (spaces, quotes, `$`...) is refused rather than mangled.
pub fn additional_flags(engine: EngineKind, request: &CreateRequest) -> Result<Vec<String>> {
    let shell_safe = |c: char| c.is_ascii_alphanumeric() || "_./:=,@%+-".contains(c);
    create_flags(engine, &spec_fields(request))
        .chunks(2)
        .map(|pair| {
            let word = pair.join("=");
            if word.chars().all(shell_safe) {
                Ok(word)
            } else {
                Err(Error::Usage(format!(
                    "{word:?} cannot go through distrobox's --additional-flags, which its shell re-reads: only \
                     letters, digits and _./:=,@%+- pass intact. Fix: drop the characters from the value, or use \
                     --manager native (or --container-engine podman, where distrobox's container is recreated directly)"
                )))
            }
        })
        .collect()
}

#[async_trait]
impl Manager for Distrobox {
    fn kind(&self) -> ManagerKind {
        ManagerKind::Distrobox
    }

    fn complete(&self, _request: &mut CreateRequest, _engine: &EngineInfo) {}

    fn describe_create(&self, engine: EngineKind, request: &CreateRequest) -> Vec<Vec<String>> {
        match engine {
            EngineKind::Podman => {
                let mut steps = vec![self.create_argv(request, &[])];
                let podman = self.podman.as_deref().unwrap_or(Path::new("podman"));
                steps.extend(describe(
                    "Distrobox",
                    podman,
                    &request.name,
                    &create_flags(engine, &spec_fields(request)),
                ));
                steps
            }
            EngineKind::Docker => {
                // (A flag distrobox's shell would mangle is shown as is; create refuses it.)
                let words = additional_flags(engine, request).unwrap_or_else(|_| {
                    create_flags(engine, &spec_fields(request)).chunks(2).map(|p| p.join("=")).collect()
                });
                vec![self.create_argv(request, &words)]
            }
        }
    }

    async fn create(&self, engine: &dyn ContainerEngine, request: &CreateRequest) -> Result<String> {
        let kind = engine.kind();
        let env = self.child_env(kind);
        let (argv, podman) = match kind {
            EngineKind::Podman => (self.create_argv(request, &[]), Some(self.podman()?)),
            EngineKind::Docker => (self.create_argv(request, &additional_flags(kind, request)?), None),
        };
        if let Err(error) = run_captured(&argv, &env).await {
            let _ = engine.container_remove(&request.name, true).await;
            return Err(error);
        }
        match podman {
            Some(podman) => {
                let flags = create_flags(kind, &spec_fields(request));
                recreate_with_flags("Distrobox", engine, &request.name, podman, &flags, &env).await
            }
            None => Ok(engine.container_inspect(&request.name).await?.map(|c| c.id).unwrap_or_default()),
        }
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

    fn distrobox() -> Distrobox {
        Distrobox { program: "/usr/bin/distrobox".into(), podman: Some("/usr/bin/podman".into()) }
    }

    fn request() -> CreateRequest {
        let mut request =
            CreateRequest { name: "vllm-strix-new".into(), image: "img:dev".into(), ..Default::default() };
        request.devices.push(("/dev/kfd".into(), "/dev/kfd".into()));
        request.group_add.push("105".into());
        request.user = Some("1000:1000".into()); // distrobox brings its own user: not passed
        request
    }

    #[test]
    fn with_docker_each_flag_travels_as_one_additional_flags_word() {
        let argv = distrobox().describe_create(EngineKind::Docker, &request());
        assert_eq!(
            argv,
            [[
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
            ]]
        );
    }

    #[test]
    fn with_podman_the_container_is_recreated_with_our_flags() {
        let steps = distrobox().describe_create(EngineKind::Podman, &request());
        assert_eq!(
            steps[0],
            ["/usr/bin/distrobox", "create", "--yes", "--name", "vllm-strix-new", "--image", "img:dev"]
        );
        assert_eq!(steps[2], ["/usr/bin/podman", "rm", "vllm-strix-new"]);
        assert_eq!(steps[3][..6], ["/usr/bin/podman", "create", "--device", "/dev/kfd:/dev/kfd", "--group-add", "105"]);
    }

    #[test]
    fn refuses_what_distrobox_shell_would_mangle() {
        let mut request = request();
        request.env.insert("NOTE".into(), "two words".into());
        let error = additional_flags(EngineKind::Docker, &request).unwrap_err().to_string();
        assert!(error.contains("\"--env=NOTE=two words\"") && error.contains("--manager native"), "{error}");
        request.env.clear();
        request.ulimits.push(crate::container_engine::Ulimit { name: "memlock".into(), soft: None, hard: None });
        assert!(additional_flags(EngineKind::Docker, &request).unwrap().contains(&"--ulimit=memlock=-1:-1".into()));
    }

    #[test]
    fn distrobox_is_told_which_engine_to_use() {
        for engine in [EngineKind::Podman, EngineKind::Docker] {
            let env = distrobox().child_env(engine);
            assert_eq!(env.set, [("DBX_CONTAINER_MANAGER", engine.program().to_string())]);
            assert_eq!(env.unset, ["CONTAINER_HOST"]);
        }
    }
}
