//! Podman over its libpod API (podman-api crate).

use std::collections::BTreeMap;
use std::path::Path;

use async_trait::async_trait;
use futures_util::StreamExt;
use podman_api::models::{ContainerMount, LinuxDevice, Namespace, PosixRlimit};
use podman_api::opts::{
    ContainerCreateOpts, ContainerDeleteOpts, ContainerListFilter, ContainerListOpts, ExecCreateOpts, ExecStartOpts,
    ImageListFilter, ImageListOpts, ImagePushOpts, ImageTagOpts, RegistryAuth,
};
use podman_api::Podman;

use super::auth::{login_for, registry_refused, Login};
use super::{
    BuildJob, ContainerEngine, ContainerInfo, CreateRequest, EngineInfo, EngineKind, ExecIo, ExecOutcome, ImageInfo,
};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::reporter::Reporter;

pub struct PodmanEngine {
    client: Podman,
    /// The same socket, for the request podman-api cannot make (`libpod_inspect`).
    transport: containers_api::conn::Transport,
    /// The Docker-compatible API podman serves on the same socket (used for pulls).
    compat: bollard::Docker,
    endpoint: String,
    socket: std::path::PathBuf,
}

impl PodmanEngine {
    pub fn new(socket: &Path) -> Result<Self> {
        let endpoint = format!("unix://{}", socket.display());
        let compat =
            bollard::Docker::connect_with_unix(&endpoint, 600, &super::compat_pull::COMPAT_API).map_err(|e| {
                EngineKind::Podman.unavailable(
                    format!("cannot use the podman socket {endpoint}: {e}"),
                    "point CONTAINER_HOST at podman's unix socket, or unset it",
                )
            })?;
        Ok(PodmanEngine {
            client: Podman::unix(socket),
            transport: super::libpod_inspect::transport(socket),
            compat,
            endpoint: format!("unix://{}", socket.display()),
            socket: socket.to_path_buf(),
        })
    }
}

/// An engine error with the server's own message (not a Debug dump).
fn failed(action: impl Into<String>, error: podman_api::Error) -> Error {
    Error::engine("podman", action, server_message(&error))
}

fn server_message(error: &podman_api::Error) -> String {
    let text = match error {
        podman_api::Error::Fault { message, .. } => message.clone(),
        podman_api::Error::Error(containers_api::conn::Error::Fault { message, .. }) => message.clone(),
        other => other.to_string(),
    };
    // libpod answers {"cause": ..., "message": ..., "response": N}; keep the message.
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
        .unwrap_or(text)
}

fn is_not_found(error: &podman_api::Error) -> bool {
    status_of(error) == Some(404)
}

/// The HTTP status libpod answered with, when the error is one.
fn status_of(error: &podman_api::Error) -> Option<u16> {
    match error {
        podman_api::Error::Fault { code, .. } => Some(code.as_u16()),
        podman_api::Error::Error(containers_api::conn::Error::Fault { code, .. }) => Some(code.as_u16()),
        _ => None,
    }
}

/// The login for `image`'s registry, as libpod takes it.
async fn registry_auth(image: &ImageRef) -> Result<Option<RegistryAuth>> {
    Ok(login_for("podman", image).await?.map(|login| match login.login {
        Login::Password { username, password } => {
            RegistryAuth::builder().username(username).password(password.expose()).server_address(login.server).build()
        }
        Login::IdentityToken(token) => RegistryAuth::token(token.expose()),
    }))
}

/// Image ids with their algorithm prefix, as docker reports them.
fn full_id(id: String) -> String {
    if id.starts_with("sha256:") {
        id
    } else {
        format!("sha256:{id}")
    }
}

fn sorted<K: Ord, V>(map: Option<std::collections::HashMap<K, V>>) -> BTreeMap<K, V> {
    map.unwrap_or_default().into_iter().collect()
}

#[async_trait]
impl ContainerEngine for PodmanEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Podman
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Told without libpod's /info, which takes ~300 ms (it measures storage) and would
    /// dominate a no-op refresh: a service run by a non-root user is rootless, and the runtime
    /// comes from the same containers.conf chain podman reads.
    async fn info(&self) -> Result<EngineInfo> {
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::metadata(&self.socket)
            .map(|m| m.uid())
            .map_err(|e| Error::engine("podman", "info", format!("cannot stat {}: {e}", self.socket.display())))?;
        Ok(EngineInfo {
            kind: EngineKind::Podman,
            rootless: owner != 0,
            runtime: crate::container_engine::probe::podman_runtime(),
            version: String::new(),
            pid: super::endpoint::listener_pid(&self.socket),
        })
    }

    /// Through the compat endpoint on the same socket: it reports bytes per layer.
    async fn pull(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        super::compat_pull::pull(&self.compat, "podman", reference, reporter).await
    }

    async fn image_inspect(&self, reference: &str) -> Result<Option<ImageInfo>> {
        match self.client.images().get(reference).inspect().await {
            Ok(data) => Ok(Some(ImageInfo {
                id: data.id.map(full_id).unwrap_or_default(),
                repo_digests: data.repo_digests.unwrap_or_default(),
                repo_tags: data.repo_tags.unwrap_or_default(),
                labels: sorted(data.labels),
                created: data.created.map(|t| t.to_rfc3339()),
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(failed(format!("inspect image {reference}"), e)),
        }
    }

    async fn image_list(&self, repository: &str) -> Result<Vec<ImageInfo>> {
        let opts = ImageListOpts::builder().filter([ImageListFilter::Reference(repository.into(), None)]).build();
        let images =
            self.client.images().list(&opts).await.map_err(|e| failed(format!("list images of {repository}"), e))?;
        Ok(images
            .into_iter()
            .map(|i| ImageInfo {
                id: i.id.map(full_id).unwrap_or_default(),
                repo_digests: i.repo_digests.unwrap_or_default(),
                repo_tags: i.repo_tags.unwrap_or_default(),
                labels: sorted(i.labels),
                created: None,
            })
            .collect())
    }

    async fn image_tag(&self, id: &str, repository: &str, tag: &str) -> Result<()> {
        let opts = ImageTagOpts::builder().repo(repository).tag(tag).build();
        self.client.images().get(id).tag(&opts).await.map_err(|e| failed(format!("tag {id} as {repository}:{tag}"), e))
    }

    async fn image_remove(&self, reference: &str) -> Result<()> {
        self.client.images().get(reference).remove().await.map_err(|e| failed(format!("remove image {reference}"), e))
    }

    async fn image_push(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        let name = ImageRef::parse(reference)?;
        let mut builder = ImagePushOpts::builder().destination(reference);
        if let Some(auth) = registry_auth(&name).await? {
            builder = builder.auth(auth);
        }
        let opts = builder.build();
        let image = self.client.images().get(reference);
        let mut stream = image.push(&opts);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| registry_refused("podman", "push", &name, reference, &server_message(&e)))?;
            reporter.line(&chunk);
        }
        Ok(())
    }

    async fn build(&self, job: BuildJob<'_>, reporter: &dyn Reporter) -> Result<String> {
        super::libpod_build::build(&self.client, &self.endpoint, job, reporter).await
    }

    async fn container_inspect(&self, name_or_id: &str) -> Result<Option<ContainerInfo>> {
        let Some(data) = super::libpod_inspect::inspect(&self.transport, name_or_id).await? else { return Ok(None) };
        let mut info = ContainerInfo {
            id: data.id.unwrap_or_default(),
            name: data.name.unwrap_or_default(),
            image_id: data.image.map(full_id).unwrap_or_default(),
            image: data.image_name.unwrap_or_default(),
            running: data.state.and_then(|s| s.running).unwrap_or(false),
            created: data.created.map(|t| t.to_rfc3339()),
            ..Default::default()
        };
        if let Some(config) = data.config {
            info.labels = sorted(config.labels);
            info.create_command = config.create_command.unwrap_or_default();
        }
        Ok(Some(info))
    }

    async fn container_list(&self, label: &str) -> Result<Vec<ContainerInfo>> {
        let filter = match label.split_once('=') {
            Some((key, value)) => ContainerListFilter::LabelKeyVal(key.into(), value.into()),
            None => ContainerListFilter::LabelKey(label.into()),
        };
        let opts = ContainerListOpts::builder().all(true).filter([filter]).build();
        let containers = self.client.containers().list(&opts).await.map_err(|e| failed("list containers", e))?;
        Ok(containers
            .into_iter()
            .map(|c| ContainerInfo {
                id: c.id.unwrap_or_default(),
                name: c.names.and_then(|n| n.into_iter().next()).unwrap_or_default(),
                image_id: c.image_id.unwrap_or_default(),
                image: c.image.unwrap_or_default(),
                labels: sorted(c.labels),
                running: c.state.as_deref() == Some("running"),
                created: c.created.map(|t| t.to_rfc3339()),
                ..Default::default()
            })
            .collect())
    }

    async fn container_create(&self, request: &CreateRequest) -> Result<String> {
        let opts = create_opts(request);
        let created = self
            .client
            .containers()
            .create(&opts)
            .await
            .map_err(|e| failed(format!("create container {} from {}", request.name, request.image), e))?;
        Ok(created.id)
    }

    async fn container_rename(&self, name_or_id: &str, new_name: &str) -> Result<()> {
        self.client
            .containers()
            .get(name_or_id)
            .rename(new_name)
            .await
            .map_err(|e| failed(format!("rename {name_or_id} to {new_name}"), e))
    }

    /// A container already running answers 304 (another caller started it first: the plan's model
    /// read and its question to the engine open the same toolbox at once), which is fine, as
    /// bollard takes it for Docker; podman-api calls it a fault.
    async fn container_start(&self, name_or_id: &str) -> Result<()> {
        match self.client.containers().get(name_or_id).start(None).await {
            Err(e) if status_of(&e) != Some(304) => Err(failed(format!("start {name_or_id}"), e)),
            _ => Ok(()),
        }
    }

    /// Through the compat endpoint: podman-api sends libpod's timeout as `Timeout`, which libpod
    /// (4.3) ignores, so every stop waited the default 10 s for a `sleep infinity` that ignores
    /// SIGTERM. Docker's `t=0` is honoured; an already stopped container answers 304, which is fine.
    async fn container_stop(&self, name_or_id: &str) -> Result<()> {
        let options = bollard::query_parameters::StopContainerOptionsBuilder::new().t(0).build();
        self.compat
            .stop_container(name_or_id, Some(options))
            .await
            .map_err(|e| Error::engine("podman", format!("stop {name_or_id}"), super::compat_pull::server_message(e)))
    }

    async fn container_remove(&self, name_or_id: &str, force: bool) -> Result<()> {
        let opts = ContainerDeleteOpts::builder().force(force).build();
        match self.client.containers().get(name_or_id).delete(&opts).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(failed(format!("remove container {name_or_id}"), e)),
        }
    }

    async fn container_archive(&self, name_or_id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let container = self.client.containers().get(name_or_id);
        let stream = Box::pin(container.copy_from(path));
        let failed = |error| failed(format!("copy {path} out of {name_or_id}"), error);
        super::archive::collect(stream, "podman", name_or_id, path, is_not_found, failed).await
    }

    async fn exec(
        &self,
        name_or_id: &str,
        command: &[String],
        env: &[String],
        user: Option<&str>,
        io: ExecIo<'_>,
    ) -> Result<ExecOutcome> {
        let action = || format!("exec in {name_or_id}");
        let vars: Vec<(String, String)> =
            env.iter().filter_map(|pair| pair.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect();
        let mut builder = ExecCreateOpts::builder().command(command).attach_stdout(true).attach_stderr(true).env(vars);
        if let Some(user) = user {
            builder = builder.user(podman_api::opts::UserOpt::User(user.to_string()));
        }
        let opts = builder.build();
        let exec =
            self.client.containers().get(name_or_id).create_exec(&opts).await.map_err(|e| failed(action(), e))?;
        let start = ExecStartOpts::builder().build();
        let (stdout, stderr) = match exec.start(&start).await.map_err(|e| failed(action(), e))? {
            Some(mut output) => super::output::route_exec_output(&mut output, io).await,
            None => Default::default(),
        };
        let inspect = exec.inspect().await.map_err(|e| failed(action(), e))?;
        let exit_code = inspect.get("ExitCode").and_then(|c| c.as_i64()).unwrap_or(-1);
        Ok(ExecOutcome { exit_code, stdout, stderr })
    }
}

/// The request's annotations, plus the one `podman create --security-opt seccomp=…` records so
/// that `podman inspect` reports the profile (libpod applies `seccomp_profile_path` either way).
fn annotations(request: &CreateRequest) -> BTreeMap<String, String> {
    let mut annotations = request.annotations.clone();
    for option in &request.security_opt {
        if let Some(profile) = option.strip_prefix("seccomp=") {
            annotations.insert("io.podman.annotations.seccomp".into(), profile.into());
        }
    }
    annotations
}

/// The libpod SpecGenerator for a create request.
fn create_opts(request: &CreateRequest) -> ContainerCreateOpts {
    let namespace = |mode: &str| Namespace { nsmode: Some(mode.into()), value: None };
    let mut builder = ContainerCreateOpts::builder()
        .name(&request.name)
        .image(&request.image)
        .devices(request.devices.iter().map(|(host, container)| LinuxDevice {
            path: Some(format!("{}:{}", host.display(), container.display())),
            file_mode: None,
            gid: None,
            major: None,
            minor: None,
            type_: None,
            uid: None,
        }))
        .groups(request.group_add.iter())
        .r_limits(request.ulimits.iter().map(|u| PosixRlimit {
            type_: Some(u.name.clone()),
            // libpod takes -1 as unlimited; the model is unsigned, so u64::MAX stands for it.
            soft: Some(u.soft.unwrap_or(u64::MAX)),
            hard: Some(u.hard.unwrap_or(u64::MAX)),
        }))
        .env(request.env.iter())
        .labels(request.labels.iter())
        .annotations(annotations(request))
        .mounts(request.mounts.iter().map(|m| ContainerMount {
            destination: Some(m.target.display().to_string()),
            source: Some(m.source.display().to_string()),
            _type: Some("bind".into()),
            options: Some(if m.read_only { vec!["ro".into()] } else { vec!["rw".into()] }),
            uid_mappings: None,
            gid_mappings: None,
        }));
    for option in &request.security_opt {
        if let Some(profile) = option.strip_prefix("seccomp=") {
            builder = builder.seccomp_profile_path(profile);
        }
    }
    // `--security-opt label=OPTION` is libpod's SELinux option OPTION (`disable`, `type:…`).
    let selinux: Vec<&str> = request.security_opt.iter().filter_map(|o| o.strip_prefix("label=")).collect();
    if !selinux.is_empty() {
        builder = builder.selinux_opts(selinux);
    }
    if let Some(user) = &request.user {
        builder = builder.user(user);
    }
    if request.host_network {
        builder = builder.net_namespace(namespace("host"));
    }
    if request.host_ipc {
        builder = builder.ipc_namespace(namespace("host"));
    }
    if request.keep_id {
        builder = builder.user_namespace(namespace("keep-id"));
    }
    if request.init {
        builder = builder.init(true);
    }
    if let Some(dir) = &request.workdir {
        builder = builder.work_dir(dir.display().to_string());
    }
    if let Some(hostname) = &request.hostname {
        builder = builder.hostname(hostname);
    }
    if let Some(entrypoint) = &request.entrypoint {
        builder = builder.entrypoint(entrypoint.iter());
    }
    if !request.command.is_empty() {
        builder = builder.command(request.command.iter());
    }
    // Recorded like `podman create` does, so `podman inspect` shows the equivalent command line.
    builder = builder.create_command(super::argv::create_argv(EngineKind::Podman, request));
    builder.build()
}
