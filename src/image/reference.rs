//! User-given names: image references, container names, channels. Bad ones are usage errors.

use crate::error::{Error, Result};

/// The image channels vLLM's toolbox image publishes (`EngineRef::channels`).
pub const CHANNELS: [&str; 2] = ["latest", "dev"];

/// Container names as podman and docker accept them: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`.
pub fn validate_container_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        && name.len() <= 128;
    if valid {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "invalid toolbox name {name:?}: use letters, digits, '_', '.' and '-', starting with a letter or digit"
        )))
    }
}

/// Docker Hub, the registry of a reference that names none.
pub const DOCKER_HUB: &str = "docker.io";

/// An image reference, `[registry[:port]/]path[:tag][@sha256:hex]`: the one parser for every
/// reference we take from users or hand to an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// `[registry/]path/name` as given, without tag or digest.
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parse and validate a reference; a bad one is a usage error saying what is wrong.
    pub fn parse(reference: &str) -> Result<ImageRef> {
        let bad = |why: &str| Error::Usage(format!("invalid image reference {reference:?}: {why}"));
        if reference.is_empty() {
            return Err(bad("it is empty"));
        }
        if reference.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains white space"));
        }
        let (rest, digest) = match reference.split_once('@') {
            Some((rest, digest)) => {
                let hex = digest.strip_prefix("sha256:").ok_or_else(|| bad("digest must be sha256:<64 hex>"))?;
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(bad("digest must be sha256:<64 hex>"));
                }
                (rest, Some(digest.to_string()))
            }
            None => (reference, None),
        };
        // A ':' after the last '/' starts the tag (a ':' before it is a registry port).
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match rest[last_slash..].find(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(tag) = tag {
            let valid = !tag.is_empty()
                && tag.len() <= 128
                && tag.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
                && !tag.starts_with(['.', '-']);
            if !valid {
                return Err(bad("tag must be letters, digits, '_', '.' or '-' (at most 128)"));
            }
        }
        let path = match registry_in(repository) {
            Some(registry) if !valid_registry(registry) => {
                return Err(bad("registry must be a host name or address, with an optional :port"));
            }
            Some(registry) => &repository[registry.len() + 1..],
            None => repository,
        };
        let valid_path = path.split('/').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
        });
        if !valid_path {
            return Err(bad("repository must be lowercase letters, digits, '.', '_', '-' separated by '/'"));
        }
        Ok(ImageRef { repository: repository.to_string(), tag: tag.map(str::to_string), digest })
    }

    /// The registry host (with its port) that serves the image: docker.io when none is named.
    pub fn registry(&self) -> &str {
        registry_in(&self.repository).unwrap_or(DOCKER_HUB)
    }

    /// The repository's path inside its registry, as the distribution API names it: `kyuz0/vllm`
    /// for `docker.io/kyuz0/vllm`, and Docker Hub's `library/NAME` for an official image.
    pub fn path(&self) -> String {
        let path = match registry_in(&self.repository) {
            Some(registry) => &self.repository[registry.len() + 1..],
            None => self.repository.as_str(),
        };
        if self.registry() == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path.to_string()
        }
    }

    /// What the engines' pull, push and tag calls take beside the repository: the digest when
    /// there is one (it pins the image; a tag beside it is informational), else the tag, else `latest`.
    pub fn tag_or_digest(&self) -> &str {
        self.digest.as_deref().or(self.tag.as_deref()).unwrap_or("latest")
    }

    /// `repository:tag`
    pub fn with_tag(&self, tag: &str) -> String {
        format!("{}:{tag}", self.repository)
    }
}

/// The registry part of a repository, by docker's rule: a first component with a '.' or ':', an
/// upper-case letter, or `localhost` names a registry; otherwise the path starts at once.
fn registry_in(repository: &str) -> Option<&str> {
    let (first, _) = repository.split_once('/')?;
    let names_registry =
        first.contains(['.', ':']) || first == "localhost" || first.chars().any(|c| c.is_ascii_uppercase());
    names_registry.then_some(first)
}

/// `host`, `host:port`, `[ipv6]` or `[ipv6]:port`.
fn valid_registry(registry: &str) -> bool {
    let (host_ok, port) = match registry.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((address, after)) => (
                !address.is_empty() && address.chars().all(|c| c.is_ascii_hexdigit() || c == ':'),
                match after {
                    "" => None,
                    _ => Some(after.strip_prefix(':').unwrap_or("not a port")),
                },
            ),
            None => (false, None),
        },
        None => {
            let (host, port) = match registry.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (registry, None),
            };
            let label_ok = |label: &str| {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            };
            (host.split('.').all(label_ok), port)
        }
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit()));
    host_ok && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels() {}

    #[test]
    fn container_names() {
        for ok in ["vllm", "vllm-dev", "a.b_c-1", "9lives"] {
            validate_container_name(ok).unwrap();
        }
        for bad in ["", "-x", "has space", "a/b", "é", "x;rm"] {
            assert!(matches!(validate_container_name(bad), Err(Error::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn references() {
        let r = ImageRef::parse("docker.io/kyuz0/vllm-therock-gfx1151:dev").unwrap();
        assert_eq!((r.repository.as_str(), r.tag.as_deref()), ("docker.io/kyuz0/vllm-therock-gfx1151", Some("dev")));
        assert_eq!((r.registry(), r.tag_or_digest()), ("docker.io", "dev"));
        assert_eq!(r.with_tag("20261101-100000"), "docker.io/kyuz0/vllm-therock-gfx1151:20261101-100000");
        for bad in ["", "Upper/Case", "a b", "repo:", "repo:bad tag", "repo@sha256:zz", "x//y", "repo/:tag", "repo:-x"]
        {
            assert!(matches!(ImageRef::parse(bad), Err(Error::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn a_registry_port_is_not_a_tag() {
        let r = ImageRef::parse("127.0.0.1:5000/a/b").unwrap();
        assert_eq!(r, ImageRef { repository: "127.0.0.1:5000/a/b".into(), tag: None, digest: None });
        assert_eq!((r.registry(), r.tag_or_digest(), r.path().as_str()), ("127.0.0.1:5000", "latest", "a/b"));
        let r = ImageRef::parse("127.0.0.1:5000/a/b:dev").unwrap();
        assert_eq!((r.repository.as_str(), r.tag_or_digest()), ("127.0.0.1:5000/a/b", "dev"));
    }

    #[test]
    fn digests_with_and_without_a_tag() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let r = ImageRef::parse(&format!("127.0.0.1:5000/a/b@{digest}")).unwrap();
        assert_eq!(r, ImageRef { repository: "127.0.0.1:5000/a/b".into(), tag: None, digest: Some(digest.clone()) });
        assert_eq!(r.tag_or_digest(), digest);
        let r = ImageRef::parse(&format!("127.0.0.1:5000/a/b:tag@{digest}")).unwrap();
        assert_eq!((r.repository.as_str(), r.tag.as_deref()), ("127.0.0.1:5000/a/b", Some("tag")));
        assert_eq!((r.registry(), r.tag_or_digest()), ("127.0.0.1:5000", digest.as_str()));
    }

    #[test]
    fn registries_by_dockers_rule() {
        for (reference, registry) in [
            ("kyuz0/vllm", "docker.io"),
            ("vllm", "docker.io"),
            ("ghcr.io/a/b:1", "ghcr.io"),
            ("localhost/x", "localhost"),
            ("localhost:5000/x", "localhost:5000"),
            ("Registry/x", "Registry"),
            ("[::1]:5000/x", "[::1]:5000"),
        ] {
            assert_eq!(ImageRef::parse(reference).unwrap().registry(), registry, "{reference}");
        }
        let paths =
            ["kyuz0/vllm", "docker.io/kyuz0/vllm:dev", "registry:2", "docker.io/library/registry", "localhost/x"];
        let paths: Vec<String> = paths.iter().map(|r| ImageRef::parse(r).unwrap().path()).collect();
        assert_eq!(paths, ["kyuz0/vllm", "kyuz0/vllm", "library/registry", "library/registry", "x"]);
        for bad in ["bad_host.io/x", "host:port/x", "host:123456/x", "[zz]:1/x", "[::1/x", "-a.io/x"] {
            let error = ImageRef::parse(bad).unwrap_err().to_string();
            assert!(error.contains("registry must be"), "{bad}: {error}");
        }
    }
}
