//! Registry credentials from the files users already have: `REGISTRY_AUTH_FILE`, then
//! `$XDG_RUNTIME_DIR/containers/auth.json` (podman login), then `~/.docker/config.json`
//! (docker login). The engine's API service may run as another user or started before a login,
//! so credentials travel with each pull and push.

use std::path::PathBuf;

use base64::Engine as _;

/// A username and password for one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub registry: String,
    pub username: String,
    pub password: String,
}

/// The auth files to read, most specific first.
pub fn auth_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(file) = env("REGISTRY_AUTH_FILE").filter(|f| !f.is_empty()) {
        files.push(PathBuf::from(file));
    }
    if let Some(dir) = env("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        files.push(PathBuf::from(dir).join("containers/auth.json"));
    }
    if let Some(home) = env("HOME").filter(|h| !h.is_empty()) {
        files.push(PathBuf::from(home).join(".docker/config.json"));
    }
    files
}

/// The registry host of an image reference (docker.io when none is named).
pub fn registry_of(reference: &str) -> String {
    match reference.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => first.to_string(),
        _ => "docker.io".to_string(),
    }
}

/// Credentials for the registry of `reference`, from the first file that has them.
pub fn credentials_for(reference: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<Credentials> {
    let registry = registry_of(reference);
    auth_files(env).iter().find_map(|file| {
        let text = std::fs::read_to_string(file).ok()?;
        find_in_auth_json(&text, &registry)
    })
}

/// Look `registry` up in an auth.json / config.json `auths` map (keys may carry a scheme/path).
pub fn find_in_auth_json(text: &str, registry: &str) -> Option<Credentials> {
    let json: serde_json::Value = serde_json::from_str(text).ok()?;
    let auths = json.get("auths")?.as_object()?;
    let aliases: &[&str] =
        if registry == "docker.io" { &["docker.io", "index.docker.io", "registry-1.docker.io"] } else { &[] };
    auths.iter().find_map(|(key, entry)| {
        let host = key.trim_start_matches("https://").trim_start_matches("http://");
        let host = host.split('/').next().unwrap_or(host);
        if host != registry && !aliases.contains(&host) {
            return None;
        }
        let encoded = entry.get("auth")?.as_str()?;
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        let (username, password) = decoded.split_once(':')?;
        Some(Credentials { registry: registry.to_string(), username: username.into(), password: password.into() })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_hosts() {
        assert_eq!(registry_of("docker.io/kyuz0/vllm:latest"), "docker.io");
        assert_eq!(registry_of("kyuz0/vllm"), "docker.io");
        assert_eq!(registry_of("127.0.0.1:5000/x/y:t"), "127.0.0.1:5000");
        assert_eq!(registry_of("localhost/x"), "localhost");
        assert_eq!(registry_of("ghcr.io/a/b"), "ghcr.io");
    }

    #[test]
    fn reads_auth_entries() {
        let json = r#"{"auths":{"https://index.docker.io/v1/":{"auth":"YWxpY2U6czNjcjN0"},"127.0.0.1:5000":{"auth":"Ym9iOnB3"}}}"#;
        let docker = find_in_auth_json(json, "docker.io").unwrap();
        assert_eq!((docker.username.as_str(), docker.password.as_str()), ("alice", "s3cr3t"));
        assert_eq!(find_in_auth_json(json, "127.0.0.1:5000").unwrap().username, "bob");
        assert_eq!(find_in_auth_json(json, "ghcr.io"), None);
        assert_eq!(find_in_auth_json("not json", "docker.io"), None);
    }

    #[test]
    fn file_order() {
        let env = |name: &str| match name {
            "REGISTRY_AUTH_FILE" => Some("/a.json".to_string()),
            "XDG_RUNTIME_DIR" => Some("/run/user/1".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(
            auth_files(&env),
            [
                PathBuf::from("/a.json"),
                PathBuf::from("/run/user/1/containers/auth.json"),
                PathBuf::from("/home/u/.docker/config.json")
            ]
        );
    }
}
