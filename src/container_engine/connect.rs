//! Reaching the engine: which one, on which socket, and a podman service of our own when
//! podman is installed but nothing answers.

use std::sync::Arc;

use super::docker::DockerEngine;
use super::endpoint;
use super::podman::PodmanEngine;
use super::service::TemporaryService;
use super::{ContainerEngine, EngineKind};
use crate::error::Result;
use crate::host::installed::Installed;

/// A live connection to an engine. Holds the podman service it had to start, if any, so the
/// service stops when the connection is dropped.
pub struct Connection {
    engine: Arc<dyn ContainerEngine>,
    _service: Option<TemporaryService>,
}

impl Connection {
    pub fn engine(&self) -> &dyn ContainerEngine {
        self.engine.as_ref()
    }

    /// A connection to an engine already here: a unit test's in-memory one.
    #[cfg(test)]
    pub fn to(engine: Arc<dyn ContainerEngine>) -> Connection {
        Connection { engine, _service: None }
    }
}

/// Connect to the engine `kind` (resolved from `--container-engine` by [`crate::container_engine::kind::EngineChoice::resolve`]).
/// Cheap: finds a socket that accepts connections and sends no request.
pub async fn connect(kind: EngineKind, installed: &Installed) -> Result<Connection> {
    let env = endpoint::process_env;
    let podman_program = installed.podman.clone();
    match kind {
        EngineKind::Podman => {
            let sockets = endpoint::podman_sockets(&env)?;
            if let Some(socket) = sockets.iter().find(|s| endpoint::answers(s)) {
                return Ok(Connection { engine: Arc::new(PodmanEngine::new(socket)?), _service: None });
            }
            if let Some(host) = env("CONTAINER_HOST").filter(|h| !h.is_empty()) {
                return Err(EngineKind::Podman.unavailable(
                    format!("nothing answers at CONTAINER_HOST={host}"),
                    format!("start the service (`podman system service --time=0 {host} &`) or unset CONTAINER_HOST"),
                ));
            }
            let Some(program) = podman_program else {
                return Err(EngineKind::Podman.unavailable(
                    "podman is not installed and no podman socket answers",
                    "install podman, or use --container-engine docker",
                ));
            };
            let service = TemporaryService::start(&program)?;
            let engine = Arc::new(PodmanEngine::new(&service.socket)?);
            Ok(Connection { engine, _service: Some(service) })
        }
        EngineKind::Docker => {
            let socket = endpoint::docker_socket(&env)?;
            if !endpoint::answers(&socket) {
                return Err(EngineKind::Docker.unavailable(
                    format!("docker does not answer at {}", socket.display()),
                    "start it (`sudo systemctl start docker`) or set DOCKER_HOST",
                ));
            }
            Ok(Connection { engine: Arc::new(DockerEngine::connect(&socket)?), _service: None })
        }
    }
}
