//! An in-memory [`ContainerEngine`] for unit tests of the decisions above it (apply, refresh, the phases):
//! images with ids, tags, digests and labels; containers with names, labels and a running state;
//! a table of "registry" images that `pull` fetches from; scripted `exec` outcomes (or, when asked,
//! an exec run by this machine, as if the container's files were its own); and any chosen call
//! made to fail, before or after it takes effect. Every call that changes something is
//! recorded, so a test can say what was (and was not) touched.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    BuildJob, ContainerEngine, ContainerInfo, CreateRequest, EngineInfo, EngineKind, ExecIo, ExecOutcome, ImageInfo,
};
use crate::error::{Error, Result};
use crate::reporter::Reporter;

/// A call that changes something, with what it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedCall {
    Pull(String),
    ImageTag { id: String, reference: String },
    ImageRemove(String),
    ImagePush(String),
    Build(Vec<String>),
    Create(String),
    Rename { from: String, to: String },
    Start(String),
    Stop(String),
    Remove(String),
    Exec { container: String, command: Vec<String> },
}

impl RecordedCall {
    pub fn rename(from: &str, to: &str) -> RecordedCall {
        RecordedCall::Rename { from: from.into(), to: to.into() }
    }
}

/// When an injected failure strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strike {
    /// The call fails and changes nothing.
    Before,
    /// The call takes effect, then reports a failure (a connection lost after the engine acted).
    After,
}

#[derive(Default)]
pub struct FakeEngine {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    images: Vec<ImageInfo>,
    /// Reference → the image a pull of it brings.
    registry: BTreeMap<String, ImageInfo>,
    containers: Vec<ContainerInfo>,
    exec_outcomes: VecDeque<ExecOutcome>,
    /// An exec with no scripted outcome runs on this machine.
    exec_here: bool,
    failures: Vec<(RecordedCall, Strike)>,
    calls: Vec<RecordedCall>,
    next_id: u64,
}

impl FakeEngine {
    pub fn new() -> FakeEngine {
        FakeEngine::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An image already here.
    pub fn add_image(&self, image: ImageInfo) {
        self.state().images.push(image);
    }

    /// What pulling `reference` brings (it replaces what was published there before).
    pub fn publish(&self, reference: &str, image: ImageInfo) {
        self.state().registry.insert(reference.to_string(), image);
    }

    pub fn add_container(&self, container: ContainerInfo) {
        self.state().containers.push(container);
    }

    /// The outcome of the next `exec` (later ones exit 0 with no output).
    pub fn script_exec(&self, outcome: ExecOutcome) {
        self.state().exec_outcomes.push_back(outcome);
    }

    /// Run every exec with no scripted outcome on this machine (its files stand for the
    /// container's: a model read where the engine reads it, with the real sh and coreutils).
    pub fn exec_here(&self) {
        self.state().exec_here = true;
    }

    /// Make `call` fail, changing nothing.
    pub fn fail(&self, call: RecordedCall) {
        self.state().failures.push((call, Strike::Before));
    }

    /// Make `call` take effect and then fail.
    pub fn fail_after(&self, call: RecordedCall) {
        self.state().failures.push((call, Strike::After));
    }

    /// Every call that changed (or tried to change) something, in order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.state().calls.clone()
    }

    pub fn container(&self, name_or_id: &str) -> Option<ContainerInfo> {
        let state = self.state();
        state.container(name_or_id).map(|i| state.containers[i].clone())
    }

    pub fn image(&self, reference: &str) -> Option<ImageInfo> {
        let state = self.state();
        state.image(reference).map(|i| state.images[i].clone())
    }

    /// Record `call`, fail it when asked to, else run `effect` (and fail afterwards when asked).
    fn run<T>(&self, call: RecordedCall, effect: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        let mut state = self.state();
        state.calls.push(call.clone());
        let strike = state.failures.iter().find(|(c, _)| *c == call).map(|(_, strike)| *strike);
        if strike == Some(Strike::Before) {
            return Err(injected(&call));
        }
        let result = effect(&mut state)?;
        match strike {
            Some(_) => Err(injected(&call)),
            None => Ok(result),
        }
    }
}

fn injected(call: &RecordedCall) -> Error {
    Error::ContainerEngine {
        engine: "fake",
        action: format!("{call:?}"),
        message: "injected failure".into(),
        fix: None,
    }
}

fn refused(action: String, message: &str) -> Error {
    Error::ContainerEngine { engine: "fake", action, message: message.into(), fix: None }
}

impl State {
    fn container(&self, name_or_id: &str) -> Option<usize> {
        self.containers.iter().position(|c| c.name == name_or_id || c.id == name_or_id)
    }

    fn image(&self, reference: &str) -> Option<usize> {
        self.images.iter().position(|i| {
            i.id == reference
                || i.id.strip_prefix("sha256:") == Some(reference)
                || i.repo_tags.iter().any(|t| t == reference)
                || i.repo_digests.iter().any(|d| d == reference)
        })
    }

    /// `reference` names this image from now on, and no other.
    fn move_tag(&mut self, reference: &str, to: usize) {
        for image in &mut self.images {
            image.repo_tags.retain(|t| t != reference);
        }
        self.images[to].repo_tags.push(reference.to_string());
    }

    fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:060}", self.next_id)
    }
}

/// A tag (`repo:tag`), not an id or a digest reference.
fn is_tag(reference: &str) -> bool {
    !reference.contains('@') && reference.rsplit('/').next().is_some_and(|last| last.contains(':'))
}

#[async_trait]
impl ContainerEngine for FakeEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Podman
    }

    fn endpoint(&self) -> &str {
        "fake"
    }

    async fn info(&self) -> Result<EngineInfo> {
        Ok(EngineInfo {
            kind: EngineKind::Podman,
            rootless: false,
            runtime: "crun".into(),
            version: "fake".into(),
            pid: None,
        })
    }

    async fn pull(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        self.run(RecordedCall::Pull(reference.into()), |state| {
            let image = state
                .registry
                .get(reference)
                .cloned()
                .ok_or_else(|| refused(format!("pull {reference}"), "manifest unknown"))?;
            let index = match state.images.iter().position(|i| i.id == image.id) {
                Some(index) => index,
                None => {
                    state.images.push(ImageInfo { repo_tags: Vec::new(), ..image.clone() });
                    state.images.len() - 1
                }
            };
            let mut tags = image.repo_tags.clone();
            if is_tag(reference) {
                tags.push(reference.to_string());
            }
            for tag in &tags {
                state.move_tag(tag, index);
            }
            let pulled = &mut state.images[index];
            for digest in &image.repo_digests {
                if !pulled.repo_digests.contains(digest) {
                    pulled.repo_digests.push(digest.clone());
                }
            }
            Ok(())
        })?;
        reporter.layer_done(reference, "Pull complete");
        Ok(())
    }

    async fn image_inspect(&self, reference: &str) -> Result<Option<ImageInfo>> {
        Ok(self.image(reference))
    }

    async fn image_list(&self, repository: &str) -> Result<Vec<ImageInfo>> {
        let (tag, digest) = (format!("{repository}:"), format!("{repository}@"));
        let state = self.state();
        let named = |i: &&ImageInfo| {
            i.repo_tags.iter().any(|t| t.starts_with(&tag)) || i.repo_digests.iter().any(|d| d.starts_with(&digest))
        };
        Ok(state.images.iter().filter(named).cloned().collect())
    }

    async fn image_tag(&self, id: &str, repository: &str, tag: &str) -> Result<()> {
        let reference = format!("{repository}:{tag}");
        self.run(RecordedCall::ImageTag { id: id.into(), reference: reference.clone() }, |state| {
            let index = state.image(id).ok_or_else(|| refused(format!("tag {id}"), "no such image"))?;
            state.move_tag(&reference, index);
            Ok(())
        })
    }

    /// A tag of an image with others is untagged; the last name of an image a container uses is
    /// refused, as the engines do.
    async fn image_remove(&self, reference: &str) -> Result<()> {
        self.run(RecordedCall::ImageRemove(reference.into()), |state| {
            let action = || format!("remove image {reference}");
            let index = state.image(reference).ok_or_else(|| refused(action(), "no such image"))?;
            let image = &mut state.images[index];
            if is_tag(reference) && image.repo_tags.len() > 1 {
                image.repo_tags.retain(|t| t != reference);
                return Ok(());
            }
            let id = image.id.clone();
            if state.containers.iter().any(|c| c.image_id == id) {
                return Err(refused(action(), "image is in use by a container"));
            }
            state.images.remove(index);
            Ok(())
        })
    }

    async fn image_push(&self, reference: &str, _reporter: &dyn Reporter) -> Result<()> {
        self.run(RecordedCall::ImagePush(reference.into()), |state| {
            state.image(reference).map(drop).ok_or_else(|| refused(format!("push {reference}"), "no such image"))
        })
    }

    async fn build(&self, job: BuildJob<'_>, _reporter: &dyn Reporter) -> Result<String> {
        self.run(RecordedCall::Build(job.tags.to_vec()), |state| {
            let id = state.new_id("sha256:");
            state.images.push(ImageInfo { id: id.clone(), labels: job.labels.clone(), ..Default::default() });
            let index = state.images.len() - 1;
            for tag in job.tags {
                state.move_tag(tag, index);
            }
            Ok(id)
        })
    }

    async fn container_inspect(&self, name_or_id: &str) -> Result<Option<ContainerInfo>> {
        Ok(self.container(name_or_id))
    }

    async fn container_list(&self, label: &str) -> Result<Vec<ContainerInfo>> {
        let (key, value) = match label.split_once('=') {
            Some((key, value)) => (key, Some(value)),
            None => (label, None),
        };
        let carries = |c: &&ContainerInfo| c.labels.get(key).is_some_and(|v| value.is_none_or(|want| v == want));
        Ok(self.state().containers.iter().filter(carries).cloned().collect())
    }

    async fn container_create(&self, request: &CreateRequest) -> Result<String> {
        self.run(RecordedCall::Create(request.name.clone()), |state| {
            let action = || format!("create {}", request.name);
            if state.container(&request.name).is_some() {
                return Err(refused(action(), "the name is already in use"));
            }
            let image = state.image(&request.image).ok_or_else(|| refused(action(), "no such image"))?;
            let image_id = state.images[image].id.clone();
            let id = state.new_id("");
            state.containers.push(ContainerInfo {
                id: id.clone(),
                name: request.name.clone(),
                image_id,
                image: request.image.clone(),
                labels: request.labels.clone(),
                running: false,
                create_command: Vec::new(),
                created: Some("2026-11-01T10:00:00Z".into()),
            });
            Ok(id)
        })
    }

    async fn container_rename(&self, name_or_id: &str, new_name: &str) -> Result<()> {
        self.run(RecordedCall::rename(name_or_id, new_name), |state| {
            let action = || format!("rename {name_or_id} to {new_name}");
            let index = state.container(name_or_id).ok_or_else(|| refused(action(), "no such container"))?;
            if state.container(new_name).is_some_and(|other| other != index) {
                return Err(refused(action(), "the name is already in use"));
            }
            state.containers[index].name = new_name.to_string();
            Ok(())
        })
    }

    async fn container_start(&self, name_or_id: &str) -> Result<()> {
        self.run(RecordedCall::Start(name_or_id.into()), |state| {
            let index = state
                .container(name_or_id)
                .ok_or_else(|| refused(format!("start {name_or_id}"), "no such container"))?;
            state.containers[index].running = true;
            Ok(())
        })
    }

    async fn container_stop(&self, name_or_id: &str) -> Result<()> {
        self.run(RecordedCall::Stop(name_or_id.into()), |state| {
            let index = state
                .container(name_or_id)
                .ok_or_else(|| refused(format!("stop {name_or_id}"), "no such container"))?;
            state.containers[index].running = false;
            Ok(())
        })
    }

    async fn container_remove(&self, name_or_id: &str, force: bool) -> Result<()> {
        self.run(RecordedCall::Remove(name_or_id.into()), |state| {
            let action = || format!("remove {name_or_id}");
            let index = state.container(name_or_id).ok_or_else(|| refused(action(), "no such container"))?;
            if state.containers[index].running && !force {
                return Err(refused(action(), "the container is running"));
            }
            state.containers.remove(index);
            Ok(())
        })
    }

    async fn container_archive(&self, _name_or_id: &str, _path: &str) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    async fn exec(
        &self,
        name_or_id: &str,
        command: &[String],
        _env: &[String],
        _user: Option<&str>,
        _io: ExecIo<'_>,
    ) -> Result<ExecOutcome> {
        let scripted =
            self.run(RecordedCall::Exec { container: name_or_id.into(), command: command.to_vec() }, |state| {
                let running = state.container(name_or_id).is_some_and(|i| state.containers[i].running);
                if !running {
                    return Err(refused(format!("exec in {name_or_id}"), "the container is not running"));
                }
                let none = ExecOutcome { exit_code: 0, stdout: Vec::new(), stderr: Vec::new() };
                Ok(state.exec_outcomes.pop_front().or((!state.exec_here).then_some(none)))
            })?;
        if let Some(outcome) = scripted {
            return Ok(outcome);
        }
        let Some((program, args)) = command.split_first() else {
            return Err(refused(format!("exec in {name_or_id}"), "no command"));
        };
        let output = tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|e| refused(format!("exec {program} here"), &e.to_string()))?;
        Ok(ExecOutcome {
            exit_code: i64::from(output.status.code().unwrap_or(-1)),
            stdout: output.stdout,
            stderr: output.stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporter::Silent;

    fn image(id: &str, tags: &[&str]) -> ImageInfo {
        ImageInfo { id: id.into(), repo_tags: tags.iter().map(|t| t.to_string()).collect(), ..Default::default() }
    }

    #[tokio::test]
    async fn a_pull_moves_the_tag_to_the_published_image() {
        let engine = FakeEngine::new();
        engine.add_image(image("sha256:old", &["r/vllm:latest", "r/vllm:20260101-000000"]));
        engine.publish("r/vllm:latest", image("sha256:new", &[]));
        engine.pull("r/vllm:latest", &Silent).await.unwrap();
        assert_eq!(engine.image("r/vllm:latest").unwrap().id, "sha256:new");
        assert_eq!(engine.image("sha256:old").unwrap().repo_tags, ["r/vllm:20260101-000000"]);
        assert_eq!(engine.image_list("r/vllm").await.unwrap().len(), 2);
        assert!(engine.pull("r/other:latest", &Silent).await.is_err(), "nothing published there");
    }

    #[tokio::test]
    async fn an_image_in_use_keeps_its_last_name() {
        let engine = FakeEngine::new();
        engine.add_image(image("sha256:a", &["r/vllm:one", "r/vllm:two"]));
        engine
            .container_create(&CreateRequest { name: "box".into(), image: "r/vllm:one".into(), ..Default::default() })
            .await
            .unwrap();
        engine.image_remove("r/vllm:one").await.unwrap();
        let error = engine.image_remove("r/vllm:two").await.unwrap_err().to_string();
        assert!(error.contains("in use"), "{error}");
        engine.container_remove("box", false).await.unwrap();
        engine.image_remove("r/vllm:two").await.unwrap();
        assert_eq!(engine.image("sha256:a"), None);
    }

    #[tokio::test]
    async fn an_injected_failure_strikes_before_or_after_the_effect() {
        let engine = FakeEngine::new();
        engine.add_image(image("sha256:a", &["r/vllm:latest"]));
        let request =
            |name: &str| CreateRequest { name: name.into(), image: "r/vllm:latest".into(), ..Default::default() };
        engine.fail(RecordedCall::Create("before".into()));
        engine.fail_after(RecordedCall::Create("after".into()));
        assert!(engine.container_create(&request("before")).await.is_err());
        assert!(engine.container_create(&request("after")).await.is_err());
        assert_eq!(engine.container("before"), None);
        assert!(engine.container("after").is_some());
        assert_eq!(engine.calls(), [RecordedCall::Create("before".into()), RecordedCall::Create("after".into())]);
    }

    #[tokio::test]
    async fn exec_answers_from_the_script_in_a_running_container() {
        let engine = FakeEngine::new();
        engine.add_container(ContainerInfo { id: "c1".into(), name: "box".into(), ..Default::default() });
        let command = ["true".to_string()];
        assert!(engine.exec("box", &command, &[], None, ExecIo::Capture).await.is_err(), "not running");
        engine.container_start("box").await.unwrap();
        engine.script_exec(ExecOutcome { exit_code: 3, stdout: b"out".to_vec(), stderr: Vec::new() });
        assert_eq!(engine.exec("box", &command, &[], None, ExecIo::Capture).await.unwrap().exit_code, 3);
        assert_eq!(engine.exec("c1", &command, &[], None, ExecIo::Capture).await.unwrap().exit_code, 0);
    }
}
