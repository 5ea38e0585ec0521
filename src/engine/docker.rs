//! Docker over its API (bollard).

use std::path::Path;

use crate::error::{Error, Result};

pub struct DockerEngine {
    pub client: bollard::Docker,
    pub endpoint: String,
}

impl DockerEngine {
    pub fn connect(socket: &Path) -> Result<DockerEngine> {
        let endpoint = format!("unix://{}", socket.display());
        let client = bollard::Docker::connect_with_unix(&endpoint, 120, bollard::API_DEFAULT_VERSION)
            .map_err(|e| Error::Failed(format!("cannot use the docker socket {endpoint}: {e}")))?;
        Ok(DockerEngine { client, endpoint })
    }
}

// The Engine implementation lands in the next change; until then docker reports itself unavailable.
#[async_trait::async_trait]
impl super::Engine for DockerEngine {
    fn kind(&self) -> super::EngineKind { super::EngineKind::Docker }
    fn endpoint(&self) -> &str { &self.endpoint }
    async fn info(&self) -> Result<super::EngineInfo> { Err(unavailable()) }
    async fn pull(&self, _: &str, _: &crate::ui::Progress) -> Result<()> { Err(unavailable()) }
    async fn image_inspect(&self, _: &str) -> Result<Option<super::ImageInfo>> { Err(unavailable()) }
    async fn image_list(&self, _: &str) -> Result<Vec<super::ImageInfo>> { Err(unavailable()) }
    async fn image_tag(&self, _: &str, _: &str, _: &str) -> Result<()> { Err(unavailable()) }
    async fn image_remove(&self, _: &str) -> Result<()> { Err(unavailable()) }
    async fn image_push(&self, _: &str, _: &crate::ui::Progress) -> Result<()> { Err(unavailable()) }
    async fn build(&self, _: Vec<u8>, _: &str, _: &[String], _: &std::collections::BTreeMap<String, String>, _: &std::collections::BTreeMap<String, String>, _: &crate::ui::Progress) -> Result<String> { Err(unavailable()) }
    async fn container_inspect(&self, _: &str) -> Result<Option<super::ContainerInfo>> { Err(unavailable()) }
    async fn container_list(&self, _: &str) -> Result<Vec<super::ContainerInfo>> { Err(unavailable()) }
    async fn container_create(&self, _: &super::CreateRequest) -> Result<String> { Err(unavailable()) }
    async fn container_rename(&self, _: &str, _: &str) -> Result<()> { Err(unavailable()) }
    async fn container_start(&self, _: &str) -> Result<()> { Err(unavailable()) }
    async fn container_remove(&self, _: &str, _: bool) -> Result<()> { Err(unavailable()) }
    async fn exec(&self, _: &str, _: &[String], _: &[String], _: Option<&str>) -> Result<super::ExecOutcome> { Err(unavailable()) }
}

fn unavailable() -> Error {
    Error::Failed("docker support is being written".into())
}
