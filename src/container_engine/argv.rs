//! Render a create request as the `podman create` / `docker create` argv a user would type.
//! `detect`, `--dry-run` and the toolbox manager print or run exactly this.

use super::{CreateRequest, EngineKind, Ulimit};

/// The whole command: program, `create`, flags, image, command.
pub fn create_argv(engine: EngineKind, request: &CreateRequest) -> Vec<String> {
    let mut argv = vec![engine.program().to_string(), "create".to_string()];
    argv.extend(create_flags(engine, request));
    argv.push(request.image.clone());
    argv.extend(command_after_image(engine, request));
    argv
}

/// Only the flags.
pub fn create_flags(engine: EngineKind, request: &CreateRequest) -> Vec<String> {
    let mut flags: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: String| {
        flags.push(name.to_string());
        flags.push(value);
    };
    if !request.name.is_empty() {
        flag("--name", request.name.clone());
    }
    if let Some(hostname) = &request.hostname {
        flag("--hostname", hostname.clone());
    }
    if let Some(user) = &request.user {
        flag("--user", user.clone());
    }
    if request.host_network {
        flag("--network", "host".into());
    }
    if request.host_ipc {
        flag("--ipc", "host".into());
    }
    if request.keep_id {
        flag("--userns", "keep-id".into());
    }
    for (host, container) in &request.devices {
        flag("--device", format!("{}:{}", host.display(), container.display()));
    }
    for group in &request.group_add {
        flag("--group-add", group.clone());
    }
    for ulimit in &request.ulimits {
        flag("--ulimit", render_ulimit(ulimit));
    }
    for option in &request.security_opt {
        flag("--security-opt", option.clone());
    }
    for (key, value) in &request.annotations {
        flag("--annotation", format!("{key}={value}"));
    }
    for (key, value) in &request.env {
        flag("--env", format!("{key}={value}"));
    }
    for mount in &request.mounts {
        let suffix = if mount.read_only { ":ro" } else { "" };
        flag("--volume", format!("{}:{}{suffix}", mount.source.display(), mount.target.display()));
    }
    if let Some(workdir) = &request.workdir {
        flag("--workdir", workdir.display().to_string());
    }
    for (key, value) in &request.labels {
        flag("--label", format!("{key}={value}"));
    }
    if let Some(entrypoint) = &request.entrypoint {
        match engine {
            // podman takes the whole entrypoint as a JSON array.
            EngineKind::Podman => flag("--entrypoint", serde_json::to_string(entrypoint).unwrap_or_default()),
            // docker takes one program; the rest moves in front of the command.
            EngineKind::Docker => {
                if let Some(program) = entrypoint.first() {
                    flag("--entrypoint", program.clone());
                }
            }
        }
    }
    if request.init {
        flags.push("--init".into());
    }
    flags
}

fn command_after_image(engine: EngineKind, request: &CreateRequest) -> Vec<String> {
    let mut command = Vec::new();
    if engine == EngineKind::Docker {
        if let Some(entrypoint) = &request.entrypoint {
            command.extend(entrypoint.iter().skip(1).cloned());
        }
    }
    command.extend(request.command.iter().cloned());
    command
}

/// `memlock=-1:-1` for unlimited, `nofile=1024:2048` otherwise.
pub fn render_ulimit(ulimit: &Ulimit) -> String {
    let value = |limit: Option<u64>| limit.map_or("-1".to_string(), |v| v.to_string());
    format!("{}={}:{}", ulimit.name, value(ulimit.soft), value(ulimit.hard))
}
