//! Which container engine: the family (`EngineKind`) and the user's choice (`--container-engine`), with the
//! one rule that turns `auto` into a family. A leaf: the spec, the engine and the operations all
//! depend on it, and it depends on nothing of theirs.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::host::installed::Installed;

/// Which engine family; the container spec's rules depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Podman,
    Docker,
}

impl EngineKind {
    /// The CLI program whose argv we render for `--dry-run` and `detect`.
    pub fn program(self) -> &'static str {
        match self {
            EngineKind::Podman => "podman",
            EngineKind::Docker => "docker",
        }
    }

    /// No engine of this family to talk to, and what to do about it.
    pub fn unavailable(self, message: impl Into<String>, fix: impl Into<String>) -> Error {
        Error::ContainerEngineUnavailable { engine: self.program(), message: message.into(), fix: Some(fix.into()) }
    }
}

/// `--container-engine`: a family, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineChoice {
    /// podman when installed or CONTAINER_HOST is set, else docker when installed or DOCKER_HOST is set.
    Auto,
    Podman,
    Docker,
}

impl EngineChoice {
    /// The one `--container-engine auto` rule (detect, doctor, refresh and enter all use it): podman when its
    /// CLI is installed or `CONTAINER_HOST` names a service; else docker when installed or
    /// `DOCKER_HOST` is set; else podman, whose absence the connection then explains.
    pub fn resolve(self, installed: &Installed, env: &dyn Fn(&str) -> Option<String>) -> EngineKind {
        let set = |name: &str| env(name).is_some_and(|value| !value.is_empty());
        match self {
            EngineChoice::Podman => EngineKind::Podman,
            EngineChoice::Docker => EngineKind::Docker,
            EngineChoice::Auto if installed.podman.is_some() || set("CONTAINER_HOST") => EngineKind::Podman,
            EngineChoice::Auto if installed.docker.is_some() || set("DOCKER_HOST") => EngineKind::Docker,
            EngineChoice::Auto => EngineKind::Podman,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    fn installed(podman: bool, docker: bool) -> Installed {
        Installed {
            podman: podman.then(|| "/usr/bin/podman".into()),
            docker: docker.then(|| "/usr/bin/docker".into()),
            ..Default::default()
        }
    }

    #[test]
    fn auto_prefers_podman_then_docker() {
        let none = env_of(&[]);
        assert_eq!(EngineChoice::Auto.resolve(&installed(true, true), &none), EngineKind::Podman);
        assert_eq!(EngineChoice::Auto.resolve(&installed(false, true), &none), EngineKind::Docker);
        assert_eq!(EngineChoice::Auto.resolve(&installed(false, false), &none), EngineKind::Podman);
    }

    #[test]
    fn auto_follows_the_service_variables() {
        let container_host = env_of(&[("CONTAINER_HOST", "unix:///p.sock")]);
        assert_eq!(EngineChoice::Auto.resolve(&installed(false, true), &container_host), EngineKind::Podman);
        let docker_host = env_of(&[("DOCKER_HOST", "unix:///d.sock")]);
        assert_eq!(EngineChoice::Auto.resolve(&installed(false, false), &docker_host), EngineKind::Docker);
        let empty = env_of(&[("CONTAINER_HOST", "")]);
        assert_eq!(EngineChoice::Auto.resolve(&installed(false, true), &empty), EngineKind::Docker);
    }

    #[test]
    fn explicit_choices_win() {
        let none = env_of(&[]);
        assert_eq!(EngineChoice::Docker.resolve(&installed(true, false), &none), EngineKind::Docker);
        assert_eq!(EngineChoice::Podman.resolve(&installed(false, true), &none), EngineKind::Podman);
    }
}
