//! The engine a dry run plans against when none answers: it has no images and no containers,
//! changes nothing, and says about itself what `detect` guesses (rootless unless root, the runtime
//! podman's containers.conf names). So `refresh --dry-run` shows the plan and the exact commands
//! on a machine without podman or docker.

use super::probe::guessed_info;
use super::{
    BuildJob, ContainerEngine, ContainerInfo, CreateRequest, EngineInfo, EngineKind, ExecIo, ExecOutcome, ImageInfo,
};
use crate::error::{Error, Result};
use crate::reporter::Reporter;

pub struct AbsentEngine {
    info: EngineInfo,
}

impl AbsentEngine {
    /// An empty `kind` engine with the facts `detect` would guess for it.
    pub fn guessed(kind: EngineKind) -> AbsentEngine {
        AbsentEngine { info: guessed_info(kind) }
    }

    /// What the plan assumed, for the one line that says so.
    pub fn describe(&self) -> String {
        format!(
            "an empty {}, {}, runtime {}, as `detect` guesses",
            self.info.kind.program(),
            if self.info.rootless { "rootless" } else { "rootful" },
            self.info.runtime
        )
    }

    /// Anything that would change or run something: never asked by a dry run.
    fn refuse<T>(&self, what: &str) -> Result<T> {
        Err(Error::Internal(format!("no engine answered, so a dry run cannot {what}")))
    }
}

#[async_trait::async_trait]
impl ContainerEngine for AbsentEngine {
    fn kind(&self) -> EngineKind {
        self.info.kind
    }
    fn endpoint(&self) -> &str {
        "(no engine answered)"
    }
    async fn info(&self) -> Result<EngineInfo> {
        Ok(self.info.clone())
    }
    async fn pull(&self, reference: &str, _reporter: &dyn Reporter) -> Result<()> {
        self.refuse(&format!("pull {reference}"))
    }
    async fn image_inspect(&self, _reference: &str) -> Result<Option<ImageInfo>> {
        Ok(None)
    }
    async fn image_list(&self, _repository: &str) -> Result<Vec<ImageInfo>> {
        Ok(Vec::new())
    }
    async fn image_tag(&self, id: &str, _repository: &str, _tag: &str) -> Result<()> {
        self.refuse(&format!("tag {id}"))
    }
    async fn image_remove(&self, reference: &str) -> Result<()> {
        self.refuse(&format!("remove {reference}"))
    }
    async fn image_push(&self, reference: &str, _reporter: &dyn Reporter) -> Result<()> {
        self.refuse(&format!("push {reference}"))
    }
    async fn build(&self, _job: BuildJob<'_>, _reporter: &dyn Reporter) -> Result<String> {
        self.refuse("build an image")
    }
    async fn container_inspect(&self, _name_or_id: &str) -> Result<Option<ContainerInfo>> {
        Ok(None)
    }
    async fn container_list(&self, _label: &str) -> Result<Vec<ContainerInfo>> {
        Ok(Vec::new())
    }
    async fn container_create(&self, request: &CreateRequest) -> Result<String> {
        self.refuse(&format!("create {}", request.name))
    }
    async fn container_rename(&self, name_or_id: &str, _new_name: &str) -> Result<()> {
        self.refuse(&format!("rename {name_or_id}"))
    }
    async fn container_start(&self, name_or_id: &str) -> Result<()> {
        self.refuse(&format!("start {name_or_id}"))
    }
    async fn container_stop(&self, name_or_id: &str) -> Result<()> {
        self.refuse(&format!("stop {name_or_id}"))
    }
    async fn container_remove(&self, name_or_id: &str, _force: bool) -> Result<()> {
        self.refuse(&format!("remove {name_or_id}"))
    }
    async fn container_archive(&self, name_or_id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        self.refuse(&format!("copy {path} out of {name_or_id}"))
    }
    async fn exec(
        &self,
        name_or_id: &str,
        _command: &[String],
        _env: &[String],
        _user: Option<&str>,
        _io: ExecIo<'_>,
    ) -> Result<ExecOutcome> {
        self.refuse(&format!("run a command in {name_or_id}"))
    }
}
