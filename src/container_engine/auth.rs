//! Registry credentials from the files users already have, in containers-auth.json(5)'s order:
//! `REGISTRY_AUTH_FILE`, podman login's `$XDG_RUNTIME_DIR/containers/auth.json` (root without
//! XDG_RUNTIME_DIR: `/run/containers/0/auth.json`), `$XDG_CONFIG_HOME/containers/auth.json`, then
//! docker login's `~/.docker/config.json`. The engine's API service may run as another user or have
//! started before a login, so credentials travel with each pull and push.
//!
//! In each file, as docker reads it: a credential helper named for the registry (`credHelpers`),
//! else the default one (`credsStore`), else the login stored inline (`auths`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::Deserialize;

use super::credential_helper::Helper;
pub use super::credential_helper::Login;
use super::endpoint::process_env;
use crate::error::{Error, Result};
use crate::image::reference::{ImageRef, DOCKER_HUB};
use crate::secret::Secret;

/// The hosts Docker Hub goes by in auth files.
const DOCKER_HUB_HOSTS: [&str; 3] = ["docker.io", "index.docker.io", "registry-1.docker.io"];
/// The server docker login stores Docker Hub's login under.
const DOCKER_HUB_SERVER: &str = "https://index.docker.io/v1/";

/// A login for one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The server the login is for, as the engine's API takes it.
    pub server: String,
    pub login: Login,
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

/// How long this process keeps a login it read: a refresh needs it for the registry's digest and
/// again for its pull, and a credential helper may be slow or prompt (gpg), so it is asked once;
/// briefly, so that a process that lives on (a node's agent) soon sees a new `login`.
const LOGIN_KEPT: Duration = Duration::from_secs(30);

/// Logins read lately: the auth files and registry they were read for, when, and the answer.
type ReadLogins = Vec<(Vec<PathBuf>, String, Instant, Option<Credentials>)>;
static READ_LOGINS: Mutex<ReadLogins> = Mutex::new(Vec::new());

/// The login for `image`'s registry from this process's auth files, asking credential helpers
/// where a file names them (once in `LOGIN_KEPT`). `engine` only shapes the messages.
pub async fn login_for(engine: &str, image: &ImageRef) -> Result<Option<Credentials>> {
    let (files, registry) = (auth_files(&process_env), image.registry().to_string());
    let kept = |logins: &mut ReadLogins| {
        logins.retain(|(_, _, read, _)| read.elapsed() < LOGIN_KEPT);
        logins.iter().find(|(f, r, _, _)| *f == files && *r == registry).map(|(_, _, _, login)| login.clone())
    };
    if let Some(login) = kept(&mut READ_LOGINS.lock().unwrap_or_else(PoisonError::into_inner)) {
        return Ok(login);
    }
    let login = credentials_in(&files, engine, &registry).await?;
    let mut logins = READ_LOGINS.lock().unwrap_or_else(PoisonError::into_inner);
    if kept(&mut logins).is_none() {
        logins.push((files, registry, Instant::now(), login.clone()));
    }
    Ok(login)
}

/// The login for `registry` from the first of `files` that has one.
async fn credentials_in(files: &[PathBuf], engine: &str, registry: &str) -> Result<Option<Credentials>> {
    for path in files {
        let Some(file) = AuthFile::read(path)? else { continue };
        if let Some((helper, server)) = file.helper_for(registry, path) {
            if let Some(login) = helper.get(&server, registry, engine).await? {
                return Ok(Some(Credentials { server, login }));
            }
        }
        if let Some(login) = file.inline_login(registry) {
            return Ok(Some(Credentials { server: registry.to_string(), login }));
        }
    }
    Ok(None)
}

/// One auth.json or docker config.json.
#[derive(Debug, Default, Deserialize)]
struct AuthFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    /// base64 of `user:password`.
    auth: Option<String>,
    identitytoken: Option<String>,
}

impl AuthFile {
    /// None when the file does not exist; malformed JSON is an error naming the file.
    fn read(path: &Path) -> Result<Option<AuthFile>> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::read(path, e)),
        };
        AuthFile::parse(&text).map(Some).map_err(|e| {
            Error::host(
                path.display().to_string(),
                format!(
                    "{} is not a valid auth file ({e}), so no registry login could be read from it",
                    path.display()
                ),
                "correct the JSON, or move the file away and log in again",
            )
        })
    }

    fn parse(text: &str) -> serde_json::Result<AuthFile> {
        if text.trim().is_empty() {
            return Ok(AuthFile::default());
        }
        serde_json::from_str(text)
    }

    /// The helper to ask for `registry`, with the server URL to ask it about: the one named for
    /// the registry in `credHelpers` wins over the `credsStore` default, as in docker.
    fn helper_for(&self, registry: &str, path: &Path) -> Option<(Helper, String)> {
        let named_by = |what: &str| format!("`{what}` in {}", path.display());
        if let Some((key, name)) = self.cred_helpers.iter().find(|(key, _)| names_registry(key, registry)) {
            return Some((Helper { name: name.clone(), named_by: named_by("credHelpers") }, key.clone()));
        }
        let name = self.creds_store.as_ref().filter(|n| !n.is_empty())?;
        // The server as docker login stored it: its (empty) `auths` entry, else docker's own name.
        let server = self
            .auths
            .keys()
            .find(|key| names_registry(key, registry))
            .cloned()
            .unwrap_or_else(|| if registry == DOCKER_HUB { DOCKER_HUB_SERVER } else { registry }.to_string());
        Some((Helper { name: name.clone(), named_by: named_by("credsStore") }, server))
    }

    /// The login stored in the file itself (`auths`).
    fn inline_login(&self, registry: &str) -> Option<Login> {
        self.auths.iter().filter(|(key, _)| names_registry(key, registry)).find_map(|(_, entry)| {
            if let Some(token) = entry.identitytoken.clone().filter(|t| !t.is_empty()) {
                return Some(Login::IdentityToken(Secret::new(token)));
            }
            let decoded = base64::engine::general_purpose::STANDARD.decode(entry.auth.as_ref()?).ok()?;
            let (username, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
            Some(Login::Password { username: username.into(), password: Secret::new(password.into()) })
        })
    }
}

/// True when an auth file's key (`host`, `https://host/v1/`, ...) stands for `registry`.
fn names_registry(key: &str, registry: &str) -> bool {
    let host = key.trim_start_matches("https://").trim_start_matches("http://");
    let host = host.split('/').next().unwrap_or(host);
    host == registry || (registry == DOCKER_HUB && DOCKER_HUB_HOSTS.contains(&host))
}

/// The "Fix:" that follows a registry's refusal of a pull or push of `image`: how to log in
/// when it wants a login, else what else to check.
fn registry_fix(engine: &str, image: &ImageRef, message: &str) -> String {
    let lower = message.to_ascii_lowercase();
    // (Not "401": digests in messages are hex.)
    let wants_login =
        ["unauthorized", "authentication required", "access denied", "denied:"].iter().any(|m| lower.contains(m));
    if wants_login {
        let registry = image.registry();
        format!(
            "log in (`{engine} login {registry}`), or point REGISTRY_AUTH_FILE at an auth.json that holds the login \
             for {registry}"
        )
    } else {
        "check the image reference and that the registry is reachable".to_string()
    }
}

/// The registry refused `action` (pull, push) of `image`: the engine's words and the fix they call for.
pub fn registry_refused(engine: &str, action: &str, image: &ImageRef, reference: &str, message: &str) -> Error {
    Error::Registry {
        reference: reference.to_string(),
        message: format!("{engine}: {action} {reference} failed: {message}"),
        fix: Some(registry_fix(engine, image, message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(reference: &str) -> ImageRef {
        ImageRef::parse(reference).unwrap()
    }

    #[test]
    fn a_refused_login_gets_the_login_fix() {
        let fix =
            registry_fix("podman", &image("127.0.0.1:5000/kyuz0/x:latest"), "unauthorized: authentication required");
        assert!(fix.contains("`podman login 127.0.0.1:5000`") && fix.contains("REGISTRY_AUTH_FILE"), "{fix}");
        let fix =
            registry_fix("docker", &image("kyuz0/x"), "pull access denied for kyuz0/x, may require 'docker login'");
        assert!(fix.contains("`docker login docker.io`"), "{fix}");
        let fix = registry_fix("docker", &image("kyuz0/x"), "manifest unknown: sha256:401ab");
        assert_eq!(fix, "check the image reference and that the registry is reachable");
        let refused = registry_refused("docker", "pull", &image("kyuz0/x"), "kyuz0/x", "manifest unknown");
        assert_eq!(refused.kind(), crate::error::ErrorKind::Registry);
        assert_eq!(
            refused.to_string(),
            "docker: pull kyuz0/x failed: manifest unknown. Fix: check the image reference and that the registry is \
             reachable"
        );
    }

    #[test]
    fn reads_inline_logins() {
        let json = r#"{"auths":{"https://index.docker.io/v1/":{"auth":"YWxpY2U6czNjcjN0"},"127.0.0.1:5000":{"auth":"Ym9iOnB3"},
            "ghcr.io":{"identitytoken":"tok"},"quay.io":{}}}"#;
        let file = AuthFile::parse(json).unwrap();
        let alice = Login::Password { username: "alice".into(), password: Secret::new("s3cr3t".into()) };
        assert_eq!(file.inline_login("docker.io"), Some(alice));
        assert!(
            matches!(file.inline_login("127.0.0.1:5000"), Some(Login::Password { username, .. }) if username == "bob")
        );
        assert_eq!(file.inline_login("ghcr.io"), Some(Login::IdentityToken(Secret::new("tok".into()))));
        assert_eq!(file.inline_login("quay.io"), None, "an empty entry (docker login with a credsStore) is no login");
        assert_eq!(file.inline_login("io"), None);
        assert!(AuthFile::parse("not json").is_err());
        assert!(AuthFile::parse("").unwrap().inline_login("docker.io").is_none());
    }

    #[test]
    fn a_registrys_own_helper_wins_over_the_default_store() {
        let json = r#"{"auths":{"https://index.docker.io/v1/":{},"127.0.0.1:5000":{}},"credsStore":"desktop",
            "credHelpers":{"127.0.0.1:5000":"pass","https://ghcr.io":"gh"}}"#;
        let file = AuthFile::parse(json).unwrap();
        let path = Path::new("/home/u/.docker/config.json");
        let asked = |registry: &str| -> Option<(String, String, String)> {
            file.helper_for(registry, path).map(|(h, server)| (h.program(), h.named_by, server))
        };
        let named = |what: &str| format!("`{what}` in /home/u/.docker/config.json");
        assert_eq!(
            asked("127.0.0.1:5000"),
            Some(("docker-credential-pass".into(), named("credHelpers"), "127.0.0.1:5000".into()))
        );
        assert_eq!(
            asked("ghcr.io"),
            Some(("docker-credential-gh".into(), named("credHelpers"), "https://ghcr.io".into()))
        );
        // Docker Hub goes to the store under the server docker login used.
        assert_eq!(
            asked("docker.io"),
            Some(("docker-credential-desktop".into(), named("credsStore"), "https://index.docker.io/v1/".into()))
        );
        assert_eq!(asked("quay.io").map(|(_, _, server)| server).as_deref(), Some("quay.io"));
        assert!(AuthFile::parse(r#"{"auths":{}}"#).unwrap().helper_for("quay.io", path).is_none());
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
