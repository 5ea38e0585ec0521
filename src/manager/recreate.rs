//! Toolbx and Distrobox make their containers with their own `podman create` argv, which our
//! flags cannot reach intact (Toolbx drops what follows `--`; both add `--ulimit host`, which
//! podman lets win over our memlock). So: let the manager create its container, read back the
//! argv it used (`Config.CreateCommand`), remove the container, and run that argv again with our
//! flags added and `--ulimit host` gone. The manager's labels, mounts and entry point stay, so its
//! own `enter` keeps working.

use std::path::Path;

use crate::container_engine::ContainerEngine;
use crate::error::{Error, Result};
use crate::manager::process::{run_captured, ChildEnv};

/// The manager's create argv with `flags` inserted right after `create`. Where we set ulimits,
/// the manager's `--ulimit host` goes: podman lets `host` win over an explicit memlock.
pub fn merge_create_command(
    manager: &str,
    name: &str,
    create_command: &[String],
    podman: &str,
    flags: &[String],
) -> Result<Vec<String>> {
    let create_at = create_command.iter().position(|a| a == "create").ok_or_else(|| {
        Error::toolbox(
            name,
            format!(
                "{manager}'s container has no recognisable create command ({create_command:?}); cannot add the GPU \
                 flags"
            ),
            "use --manager native",
        )
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

/// Recreate the container `name` the manager just made, with `flags`; returns the new id.
/// Removes the container on any failure, so nothing half-made stays behind.
pub async fn recreate_with_flags(
    manager: &str,
    engine: &dyn ContainerEngine,
    name: &str,
    podman: &Path,
    flags: &[String],
    env: &ChildEnv,
) -> Result<String> {
    let result = async {
        let created = engine.container_inspect(name).await?.ok_or_else(|| {
            Error::toolbox(
                name,
                format!(
                    "{manager} said it created {name}, but {} has no such container: {manager} uses the local podman",
                    engine.endpoint(),
                ),
                "point CONTAINER_HOST at the local podman service, or unset it",
            )
        })?;
        let merged =
            merge_create_command(manager, name, &created.create_command, &podman.display().to_string(), flags)?;
        engine.container_remove(name, true).await?;
        let id = run_captured(&merged, env).await?;
        Ok(id.trim().to_string())
    }
    .await;
    if result.is_err() {
        let _ = engine.container_remove(name, true).await;
    }
    result
}

/// The steps `recreate_with_flags` runs, for `--dry-run`.
pub fn describe(manager: &str, podman: &Path, name: &str, flags: &[String]) -> Vec<Vec<String>> {
    let podman = podman.display().to_string();
    let mut recreate = vec![podman.clone(), "create".into()];
    recreate.extend(flags.iter().cloned());
    recreate.push(format!("<the rest of {manager}'s own create command, without --ulimit host>"));
    vec![
        vec![podman.clone(), "inspect".into(), "--format".into(), "{{.Config.CreateCommand}}".into(), name.into()],
        vec![podman, "rm".into(), name.into()],
        recreate,
    ]
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
        let merged = merge_create_command("Toolbx", "x", &toolbox, "/usr/bin/podman", &flags).unwrap();
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
        let merged =
            merge_create_command("Toolbx", "x", &toolbox, "podman", &strings(&["--device", "/dev/kfd:/dev/kfd"]))
                .unwrap();
        assert!(merged.windows(2).any(|w| w == ["--ulimit", "host"]));
    }

    #[test]
    fn drops_the_one_word_form_too() {
        let distrobox = strings(&["podman", "create", "--ulimit=host", "--name", "x", "img", "-v"]);
        let flags = strings(&["--ulimit", "memlock=-1:-1"]);
        let merged = merge_create_command("Distrobox", "x", &distrobox, "podman", &flags).unwrap();
        assert_eq!(merged, strings(&["podman", "create", "--ulimit", "memlock=-1:-1", "--name", "x", "img", "-v"]));
    }

    #[test]
    fn refuses_an_unrecognisable_command() {
        let error = merge_create_command("Distrobox", "x", &strings(&["podman", "run"]), "podman", &[]).unwrap_err();
        assert!(error.to_string().starts_with("Distrobox's container has no recognisable create command"), "{error}");
    }
}
