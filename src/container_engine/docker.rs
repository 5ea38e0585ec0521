//! Docker over its API (bollard).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use async_trait::async_trait;
use bollard::body_full;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, DeviceMapping, HostConfig, ResourcesUlimits};
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder, ListImagesOptionsBuilder,
    PushImageOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder, RenameContainerOptionsBuilder,
    TagImageOptionsBuilder,
};
use futures_util::StreamExt;

use super::auth::registry_refused;
use super::compat_pull::{docker_credentials, server_message};
use super::output::{route_chunks, Chunk};
use super::{
    BuildJob, ContainerEngine, ContainerInfo, CreateRequest, EngineInfo, EngineKind, ExecIo, ExecOutcome, ImageInfo,
};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::reporter::Reporter;

pub struct DockerEngine {
    client: bollard::Docker,
    endpoint: String,
    socket: std::path::PathBuf,
}

impl DockerEngine {
    pub fn connect(socket: &Path) -> Result<DockerEngine> {
        let endpoint = format!("unix://{}", socket.display());
        let client = bollard::Docker::connect_with_unix(&endpoint, 600, bollard::API_DEFAULT_VERSION).map_err(|e| {
            EngineKind::Docker.unavailable(
                format!("cannot use the docker socket {endpoint}: {e}"),
                "point DOCKER_HOST at docker's unix socket (unix:///run/docker.sock)",
            )
        })?;
        Ok(DockerEngine { client, endpoint, socket: socket.to_path_buf() })
    }
}

fn failed(action: impl Into<String>, error: bollard::errors::Error) -> Error {
    Error::engine("docker", action, server_message(error))
}

fn is_not_found(error: &bollard::errors::Error) -> bool {
    matches!(error, bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })
}

fn sorted(map: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    map.unwrap_or_default().into_iter().collect()
}

/// `-1` is docker's "unlimited".
fn limit(value: Option<u64>) -> i64 {
    value.map_or(-1, |v| i64::try_from(v).unwrap_or(i64::MAX))
}

#[async_trait]
impl ContainerEngine for DockerEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Docker
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn info(&self) -> Result<EngineInfo> {
        let info = self.client.info().await.map_err(|e| failed("info", e))?;
        let rootless = info.security_options.unwrap_or_default().iter().any(|o| o.contains("name=rootless"));
        Ok(EngineInfo {
            kind: EngineKind::Docker,
            rootless,
            runtime: info.default_runtime.unwrap_or_else(|| "runc".into()),
            version: info.server_version.unwrap_or_default(),
            pid: super::endpoint::listener_pid(&self.socket),
        })
    }

    async fn pull(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        super::compat_pull::pull(&self.client, "docker", reference, reporter).await
    }

    async fn image_inspect(&self, reference: &str) -> Result<Option<ImageInfo>> {
        match self.client.inspect_image(reference).await {
            Ok(image) => Ok(Some(ImageInfo {
                id: image.id.unwrap_or_default(),
                repo_digests: image.repo_digests.unwrap_or_default(),
                repo_tags: image.repo_tags.unwrap_or_default(),
                labels: sorted(image.config.and_then(|c| c.labels)),
                created: image.created,
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(failed(format!("inspect image {reference}"), e)),
        }
    }

    /// Docker trims each listed image's names to those the filter matches: a second, unfiltered
    /// list gives the images found their whole names (a spread image's digest is under the head
    /// registry's name).
    async fn image_list(&self, repository: &str) -> Result<Vec<ImageInfo>> {
        let filters = HashMap::from([("reference", vec![repository])]);
        let options = ListImagesOptionsBuilder::default().filters(&filters).build();
        let list = |options| async {
            self.client.list_images(Some(options)).await.map_err(|e| failed(format!("list images of {repository}"), e))
        };
        let found: std::collections::HashSet<String> = list(options).await?.into_iter().map(|i| i.id).collect();
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let images = list(ListImagesOptionsBuilder::default().build()).await?;
        Ok(images
            .into_iter()
            .filter(|image| found.contains(&image.id))
            .map(|i| ImageInfo {
                id: i.id,
                repo_digests: i.repo_digests,
                repo_tags: i.repo_tags,
                labels: i.labels.into_iter().collect(),
                created: None,
            })
            .collect())
    }

    async fn image_tag(&self, id: &str, repository: &str, tag: &str) -> Result<()> {
        let options = TagImageOptionsBuilder::default().repo(repository).tag(tag).build();
        self.client.tag_image(id, Some(options)).await.map_err(|e| failed(format!("tag {id} as {repository}:{tag}"), e))
    }

    async fn image_remove(&self, reference: &str) -> Result<()> {
        let options = RemoveImageOptionsBuilder::default().build();
        self.client
            .remove_image(reference, Some(options), None)
            .await
            .map(drop)
            .map_err(|e| failed(format!("remove image {reference}"), e))
    }

    async fn image_push(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        let image = ImageRef::parse(reference)?;
        let options = PushImageOptionsBuilder::default().tag(image.tag_or_digest()).build();
        let credentials = docker_credentials("docker", &image).await?;
        let mut stream = self.client.push_image(&image.repository, Some(options), credentials);
        while let Some(item) = stream.next().await {
            let refused = |message: String| registry_refused("docker", "push", &image, reference, &message);
            let info = item.map_err(|e| refused(server_message(e)))?;
            if let Some(detail) = info.error_detail {
                return Err(refused(detail.message.unwrap_or_else(|| "the registry refused the push".into())));
            }
            if let Some(status) = info.status {
                reporter.line(&status);
            }
        }
        Ok(())
    }

    async fn build(&self, job: BuildJob<'_>, reporter: &dyn Reporter) -> Result<String> {
        let BuildJob { context_tar, containerfile, tags, labels, build_args } = job;
        let failed_build = |message: String| Error::engine("docker", "build", message);
        let first_tag = tags.first().ok_or_else(|| failed_build("no tag given for the built image".into()))?;
        let labels: HashMap<&String, &String> = labels.iter().collect();
        let build_args: HashMap<&String, &String> = build_args.iter().collect();
        let options = BuildImageOptionsBuilder::default()
            .dockerfile(containerfile)
            .t(first_tag)
            .labels(&labels)
            .buildargs(&build_args)
            .rm(true)
            .build();
        let mut stream = self.client.build_image(options, None, Some(body_full(context_tar.into())));
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| failed_build(server_message(e)))?;
            if let Some(detail) = info.error_detail {
                return Err(failed_build(detail.message.unwrap_or_else(|| "the build failed".into())));
            }
            if let Some(line) = info.stream {
                reporter.line(&line);
            }
        }
        let image = self
            .image_inspect(first_tag)
            .await?
            .ok_or_else(|| failed_build(format!("the build finished but {first_tag} is not there")))?;
        for tag in &tags[1..] {
            let name = ImageRef::parse(tag)?;
            self.image_tag(&image.id, &name.repository, name.tag_or_digest()).await?;
        }
        Ok(image.id)
    }

    async fn container_inspect(&self, name_or_id: &str) -> Result<Option<ContainerInfo>> {
        let data = match self.client.inspect_container(name_or_id, None).await {
            Ok(data) => data,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(failed(format!("inspect container {name_or_id}"), e)),
        };
        let mut info = ContainerInfo {
            id: data.id.unwrap_or_default(),
            name: data.name.unwrap_or_default().trim_start_matches('/').to_string(),
            image_id: data.image.unwrap_or_default(),
            running: data.state.and_then(|s| s.running).unwrap_or(false),
            created: data.created,
            ..Default::default()
        };
        if let Some(config) = data.config {
            info.image = config.image.unwrap_or_default();
            info.labels = sorted(config.labels);
        }
        Ok(Some(info))
    }

    async fn container_list(&self, label: &str) -> Result<Vec<ContainerInfo>> {
        let filters = HashMap::from([("label", vec![label])]);
        let options = ListContainersOptionsBuilder::default().all(true).filters(&filters).build();
        let containers = self.client.list_containers(Some(options)).await.map_err(|e| failed("list containers", e))?;
        Ok(containers
            .into_iter()
            .map(|c| ContainerInfo {
                id: c.id.unwrap_or_default(),
                name: c
                    .names
                    .and_then(|n| n.into_iter().next())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                image_id: c.image_id.unwrap_or_default(),
                image: c.image.unwrap_or_default(),
                labels: sorted(c.labels),
                running: c.state.is_some_and(|s| s.to_string() == "running"),
                created: c.created.and_then(|t| chrono::DateTime::from_timestamp(t, 0)).map(|t| t.to_rfc3339()),
                ..Default::default()
            })
            .collect())
    }

    async fn container_create(&self, request: &CreateRequest) -> Result<String> {
        let options = CreateContainerOptionsBuilder::default().name(&request.name).build();
        let created = self
            .client
            .create_container(Some(options), create_body(request))
            .await
            .map_err(|e| failed(format!("create container {} from {}", request.name, request.image), e))?;
        Ok(created.id)
    }

    async fn container_rename(&self, name_or_id: &str, new_name: &str) -> Result<()> {
        let options = RenameContainerOptionsBuilder::default().name(new_name).build();
        self.client
            .rename_container(name_or_id, options)
            .await
            .map_err(|e| failed(format!("rename {name_or_id} to {new_name}"), e))
    }

    async fn container_start(&self, name_or_id: &str) -> Result<()> {
        self.client.start_container(name_or_id, None).await.map_err(|e| failed(format!("start {name_or_id}"), e))
    }

    async fn container_stop(&self, name_or_id: &str) -> Result<()> {
        let options = bollard::query_parameters::StopContainerOptionsBuilder::new().t(0).build();
        self.client.stop_container(name_or_id, Some(options)).await.map_err(|e| failed(format!("stop {name_or_id}"), e))
    }

    async fn container_remove(&self, name_or_id: &str, force: bool) -> Result<()> {
        let options = RemoveContainerOptionsBuilder::default().force(force).build();
        match self.client.remove_container(name_or_id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(failed(format!("remove container {name_or_id}"), e)),
        }
    }

    async fn container_archive(&self, name_or_id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let options = bollard::query_parameters::DownloadFromContainerOptions { path: path.to_string() };
        let stream = Box::pin(self.client.download_from_container(name_or_id, Some(options)));
        let failed = |error| failed(format!("copy {path} out of {name_or_id}"), error);
        super::archive::collect(stream, "docker", name_or_id, path, is_not_found, failed).await
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
        let config = CreateExecOptions {
            cmd: Some(command.to_vec()),
            env: Some(env.to_vec()),
            user: user.map(str::to_string),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let exec = self.client.create_exec(name_or_id, config).await.map_err(|e| failed(action(), e))?;
        let mut captured = (Vec::new(), Vec::new());
        if let StartExecResults::Attached { output, .. } =
            self.client.start_exec(&exec.id, None).await.map_err(|e| failed(action(), e))?
        {
            let chunks = output.filter_map(|item| async move {
                match item {
                    Ok(bollard::container::LogOutput::StdOut { message }) => Some(Chunk::Stdout(message.to_vec())),
                    Ok(bollard::container::LogOutput::Console { message }) => Some(Chunk::Stdout(message.to_vec())),
                    Ok(bollard::container::LogOutput::StdErr { message }) => Some(Chunk::Stderr(message.to_vec())),
                    _ => None,
                }
            });
            captured = route_chunks(Box::pin(chunks), io).await;
        }
        let inspect = self.client.inspect_exec(&exec.id).await.map_err(|e| failed(action(), e))?;
        let (stdout, stderr) = captured;
        Ok(ExecOutcome { exit_code: inspect.exit_code.unwrap_or(-1), stdout, stderr })
    }
}

/// The Docker create body for a request.
fn create_body(request: &CreateRequest) -> ContainerCreateBody {
    let devices = request
        .devices
        .iter()
        .map(|(host, container)| DeviceMapping {
            path_on_host: Some(host.display().to_string()),
            path_in_container: Some(container.display().to_string()),
            cgroup_permissions: Some("rwm".into()),
        })
        .collect();
    let ulimits = request
        .ulimits
        .iter()
        .map(|u| ResourcesUlimits { name: Some(u.name.clone()), soft: Some(limit(u.soft)), hard: Some(limit(u.hard)) })
        .collect();
    let binds = request
        .mounts
        .iter()
        .map(|m| format!("{}:{}{}", m.source.display(), m.target.display(), if m.read_only { ":ro" } else { "" }))
        .collect();
    let host_config = HostConfig {
        devices: Some(devices),
        group_add: Some(request.group_add.clone()),
        ulimits: Some(ulimits),
        security_opt: Some(request.security_opt.clone()),
        binds: Some(binds),
        network_mode: request.host_network.then(|| "host".to_string()),
        ipc_mode: request.host_ipc.then(|| "host".to_string()),
        init: request.init.then_some(true),
        annotations: (!request.annotations.is_empty())
            .then(|| request.annotations.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(request.image.clone()),
        hostname: request.hostname.clone(),
        user: request.user.clone(),
        env: Some(request.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        labels: Some(request.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        working_dir: request.workdir.as_ref().map(|w| w.display().to_string()),
        entrypoint: request.entrypoint.clone(),
        cmd: (!request.command.is_empty()).then(|| request.command.clone()),
        host_config: Some(host_config),
        ..Default::default()
    }
}
