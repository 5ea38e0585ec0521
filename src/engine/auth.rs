//! Registry credentials from the files users already have, in containers-auth.json(5)'s order:
//! `REGISTRY_AUTH_FILE`, podman login's `$XDG_RUNTIME_DIR/containers/auth.json` (root without
//! XDG_RUNTIME_DIR: `/run/containers/0/auth.json`), `$XDG_CONFIG_HOME/containers/auth.json`, then
//! docker login's `~/.docker/config.json`. The engine's API service may run as another user or have
//! started before a login, so credentials travel with each pull and push.

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
    let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut files = Vec::new();
    files.extend(var("REGISTRY_AUTH_FILE"));
    match var("XDG_RUNTIME_DIR") {
        Some(dir) => files.push(dir.join("containers/auth.json")),
        // SAFETY: getuid has no preconditions and cannot fail.
        None => files.push(PathBuf::from(format!("/run/containers/{}/auth.json", unsafe { libc::getuid() }))),
    }
    let home = var("HOME");
    let config = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    files.extend(config.map(|c| c.join("containers/auth.json")));
    files.extend(home.map(|h| h.join(".docker/config.json")));
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

/// The "Fix:" that follows a registry's refusal of a pull or push of `reference`: how to log in
/// when it wants a login, else what else to check.
pub fn registry_fix(engine: &str, reference: &str, message: &str) -> String {
    let lower = message.to_ascii_lowercase();
    // (Not "401": digests in messages are hex.)
    let wants_login =
        ["unauthorized", "authentication required", "access denied", "denied:"].iter().any(|m| lower.contains(m));
    if wants_login {
        let registry = registry_of(reference);
        format!(
            "Fix: log in (`{engine} login {registry}`), or point REGISTRY_AUTH_FILE at an auth.json that holds the \
             login for {registry}"
        )
    } else {
        "Fix: check the image reference and that the registry is reachable".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_login_gets_the_login_fix() {
        let fix = registry_fix("podman", "127.0.0.1:5000/kyuz0/x:latest", "unauthorized: authentication required");
        assert!(fix.contains("`podman login 127.0.0.1:5000`") && fix.contains("REGISTRY_AUTH_FILE"), "{fix}");
        let fix = registry_fix("docker", "kyuz0/x", "pull access denied for kyuz0/x, may require 'docker login'");
        assert!(fix.contains("`docker login docker.io`"), "{fix}");
        let fix = registry_fix("docker", "kyuz0/x", "manifest unknown: sha256:401ab");
        assert_eq!(fix, "Fix: check the image reference and that the registry is reachable");
    }

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
                PathBuf::from("/home/u/.config/containers/auth.json"),
                PathBuf::from("/home/u/.docker/config.json")
            ]
        );
    }

    #[test]
    fn file_order_for_root_without_a_session() {
        let env = |name: &str| match name {
            "XDG_CONFIG_HOME" => Some("/etc/cfg".to_string()),
            _ => None,
        };
        let uid = unsafe { libc::getuid() };
        assert_eq!(
            auth_files(&env),
            [PathBuf::from(format!("/run/containers/{uid}/auth.json")), PathBuf::from("/etc/cfg/containers/auth.json")]
        );
    }
}
