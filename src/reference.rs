//! User-given names: image references, container names, channels. Bad ones are usage errors.

use crate::error::{Error, Result};

/// The image channels the project publishes.
pub const CHANNELS: [&str; 2] = ["latest", "dev"];

/// `latest` or `dev`; anything else is a usage error.
pub fn parse_channel(channel: &str) -> Result<&'static str> {
    CHANNELS
        .iter()
        .copied()
        .find(|c| *c == channel)
        .ok_or_else(|| Error::Usage(format!("unknown channel {channel:?}: expected one of {}", CHANNELS.join(", "))))
}

/// The toolbox name a channel gets by default.
pub fn default_name(channel: &str) -> String {
    if channel == "latest" {
        "vllm".into()
    } else {
        format!("vllm-{channel}")
    }
}

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

/// An image reference split into repository and tag/digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// `registry/path/name`, without tag or digest.
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parse and validate `[registry/]path[:tag][@sha256:hex]`.
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
        let (repository, tag) = match rest[last_slash..].rfind(':') {
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
        let path_start = if repository.contains('/') { repository.find('/').map_or(0, |i| i + 1) } else { 0 };
        let path = &repository[path_start..];
        let valid_path = !path.is_empty()
            && path.split('/').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
                    && part.starts_with(|c: char| c.is_ascii_alphanumeric())
            });
        if !valid_path || repository.ends_with('/') {
            return Err(bad("repository must be lowercase letters, digits, '.', '_', '-' separated by '/'"));
        }
        Ok(ImageRef { repository: repository.to_string(), tag: tag.map(str::to_string), digest })
    }

    /// `repository:tag`
    pub fn with_tag(&self, tag: &str) -> String {
        format!("{}:{tag}", self.repository)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels() {
        assert_eq!(parse_channel("dev").unwrap(), "dev");
        assert!(matches!(parse_channel("stable"), Err(Error::Usage(_))));
        assert_eq!(default_name("latest"), "vllm");
        assert_eq!(default_name("dev"), "vllm-dev");
    }

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
        let r = ImageRef::parse("127.0.0.1:5000/stand-in").unwrap();
        assert_eq!((r.repository.as_str(), r.tag), ("127.0.0.1:5000/stand-in", None));
        let digest = format!("sha256:{}", "a".repeat(64));
        let r = ImageRef::parse(&format!("127.0.0.1:5000/x/y:t@{digest}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(digest.as_str()));
        assert_eq!(r.with_tag("20261101-100000"), "127.0.0.1:5000/x/y:20261101-100000");
        for bad in ["", "Upper/Case", "a b", "repo:", "repo:bad tag", "repo@sha256:zz", "x//y", "repo/:tag", "repo:-x"]
        {
            assert!(matches!(ImageRef::parse(bad), Err(Error::Usage(_))), "{bad:?}");
        }
    }
}
