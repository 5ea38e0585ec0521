//! One registry over the distribution API: manifests and blobs by digest, uploads, deletes. HTTPS
//! with the system's roots and the CAs the registry's certs.d directory holds; plain HTTP only
//! where registries.conf marks the registry insecure, as podman would. Basic and Bearer challenges
//! are answered with the node's own login (the auth files podman and docker read). Credentials
//! travel in request headers only: never in a URL, a log, an error or a report.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Body, Certificate, Client, Identity, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::challenge::{self, Challenge};
use super::manifest::{self, Manifest};
use super::{certs, config};
use crate::container_engine::auth::{login_for, Login};
use crate::error::{Error, Result};
use crate::image::reference::{ImageRef, DOCKER_HUB};
use crate::link::tls::TlsIdentity;

/// How long connecting to a registry may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// How long connecting to the cluster's registry may take: it is one link away.
const CLUSTER_CONNECT_LIMIT: Duration = Duration::from_secs(5);
/// How long a transfer may stall (a multi-GB blob has no limit as a whole).
const STALL_LIMIT: Duration = Duration::from_secs(120);
/// Where Docker Hub's API answers for `docker.io`.
const DOCKER_HUB_API: &str = "registry-1.docker.io";
/// The registry's answer to a digest this is, in `Docker-Content-Digest`.
const CONTENT_DIGEST: &str = "docker-content-digest";

/// What a token must allow on a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Pull,
    Push,
}

pub struct RegistryClient {
    /// As references name it: `docker.io`, `127.0.0.1:5000`, `192.168.100.1:5443`.
    registry: String,
    /// `https://registry-1.docker.io`, `http://127.0.0.1:5000`.
    base: String,
    http: Client,
    login: Option<Login>,
    auth: Mutex<Auth>,
}

/// What the registry asked for: a Basic login, or Bearer tokens (kept by scope).
#[derive(Default)]
struct Auth {
    basic: bool,
    tokens: HashMap<String, String>,
}

fn builder() -> reqwest::ClientBuilder {
    Client::builder()
        .use_rustls_tls()
        .connect_timeout(CONNECT_LIMIT)
        .read_timeout(STALL_LIMIT)
        .user_agent(concat!("strix-toolbox/", env!("CARGO_PKG_VERSION")))
}

impl RegistryClient {
    /// `image`'s registry as this node's engine reaches it (see the module doc). `engine` names the
    /// program a login fix mentions (`podman login …`).
    pub async fn upstream(image: &ImageRef, engine: &str) -> Result<RegistryClient> {
        let registry = image.registry().to_string();
        let login = login_for(engine, image).await?.map(|credentials| credentials.login);
        let insecure = config::is_insecure(&registry);
        // An insecure registry's certificate is not checked: loading the system's roots (a few
        // milliseconds of parsing on every refresh) would buy nothing.
        let mut builder = builder().tls_built_in_root_certs(!insecure);
        for (path, pem) in certs::cas_for(&registry) {
            let ca = Certificate::from_pem(&pem).map_err(|e| {
                Error::host(
                    path.display().to_string(),
                    format!("{} is not a PEM certificate ({e}), so {registry} cannot be trusted", path.display()),
                    "put the registry's CA certificate there, or remove the file",
                )
            })?;
            builder = builder.add_root_certificate(ca);
        }
        if insecure {
            builder = builder.danger_accept_invalid_certs(true);
        }
        let http = builder.build().map_err(|e| Error::Internal(format!("cannot make an HTTP client: {e}")))?;
        let host = if registry == DOCKER_HUB { DOCKER_HUB_API } else { registry.as_str() }.to_string();
        let mut client =
            RegistryClient { base: format!("https://{host}"), registry, http, login, auth: Mutex::default() };
        if insecure && client.http.get(client.url("/v2/")).send().await.is_err() {
            // Nothing speaks TLS there: plain HTTP, which registries.conf allows for it.
            client.base = format!("http://{host}");
        }
        Ok(client)
    }

    /// The cluster's registry at `address` (`IP:PORT`): TLS checked against the cluster CA
    /// `ca_pem` alone, `identity` presented to it (it refuses a client without one), never
    /// through a proxy, no login.
    pub fn cluster(address: &str, ca_pem: &str, identity: Option<&TlsIdentity>) -> Result<RegistryClient> {
        let ca = Certificate::from_pem(ca_pem.as_bytes())
            .map_err(|e| Error::Internal(format!("the cluster registry's CA is not a PEM certificate: {e}")))?;
        let mut builder = builder()
            .connect_timeout(CLUSTER_CONNECT_LIMIT)
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .no_proxy();
        if let Some(identity) = identity {
            let identity = Identity::from_pem(&identity.pem_bundle())
                .map_err(|e| Error::Internal(format!("a client certificate for the cluster registry: {e}")))?;
            builder = builder.identity(identity);
        }
        let http = builder.build().map_err(|e| Error::Internal(format!("cannot make an HTTP client: {e}")))?;
        Ok(RegistryClient {
            registry: address.to_string(),
            base: format!("https://{address}"),
            http,
            login: None,
            auth: Mutex::default(),
        })
    }

    /// `host[:port]`, as references name it.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /v2/`: the registry answers over a connection this client trusts (a login it wants
    /// still counts as an answer).
    pub async fn ping(&self) -> Result<()> {
        let response = self.http.get(self.url("/v2/")).send().await.map_err(|e| self.unreachable(&e))?;
        match response.status() {
            status if status.is_success() || status == StatusCode::UNAUTHORIZED => Ok(()),
            _ => Err(self.refused("answer /v2/", "", response).await),
        }
    }

    /// The digest `tag` names in `path` now: the registry's `Docker-Content-Digest` for a HEAD
    /// request (which Docker Hub does not count as a pull), else the hash of the manifest itself.
    pub async fn digest_of(&self, path: &str, tag: &str) -> Result<String> {
        let url = self.url(&format!("/v2/{path}/manifests/{tag}"));
        let response =
            self.send(path, Access::Pull, || self.http.head(&url).header(ACCEPT, manifest::accepted())).await?;
        let digest = response.headers().get(CONTENT_DIGEST).and_then(|v| v.to_str().ok()).map(str::to_string);
        match digest {
            Some(digest) if response.status().is_success() && is_sha256(&digest) => Ok(digest),
            _ => Ok(self.manifest(path, tag).await?.digest),
        }
    }

    /// The manifest `reference` (a tag or a digest) names in `path`; asked by digest, its bytes
    /// must hash to that digest.
    pub async fn manifest(&self, path: &str, reference: &str) -> Result<Manifest> {
        let url = self.url(&format!("/v2/{path}/manifests/{reference}"));
        let response =
            self.send(path, Access::Pull, || self.http.get(&url).header(ACCEPT, manifest::accepted())).await?;
        if !response.status().is_success() {
            return Err(self.refused("give the manifest", &format!("{path}:{reference}"), response).await);
        }
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let bytes = response.bytes().await.map_err(|e| self.unreachable(&e))?;
        let manifest = Manifest::new(bytes.to_vec(), content_type.as_deref());
        if is_sha256(reference) && manifest.digest != reference {
            return Err(self.failure(
                path,
                format!(
                    "the manifest it gave for {reference} hashes to {}: it was damaged on the way",
                    manifest.digest
                ),
                "run the refresh again",
            ));
        }
        Ok(manifest)
    }

    /// Whether `path` has the manifest `digest`.
    pub async fn has_manifest(&self, path: &str, digest: &str) -> Result<bool> {
        let url = self.url(&format!("/v2/{path}/manifests/{digest}"));
        let response =
            self.send(path, Access::Pull, || self.http.head(&url).header(ACCEPT, manifest::accepted())).await?;
        match response.status() {
            status if status.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(self.refused("say whether it has the manifest", digest, response).await),
        }
    }

    /// Whether `path` has the blob `digest`.
    pub async fn has_blob(&self, path: &str, digest: &str) -> Result<bool> {
        let url = self.url(&format!("/v2/{path}/blobs/{digest}"));
        let response = self.send(path, Access::Pull, || self.http.head(&url)).await?;
        match response.status() {
            status if status.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(self.refused("say whether it has the blob", digest, response).await),
        }
    }

    /// The blob `digest` of `path`, its body not read yet (redirects to a CDN are followed).
    pub async fn blob(&self, path: &str, digest: &str) -> Result<Response> {
        let url = self.url(&format!("/v2/{path}/blobs/{digest}"));
        let response = self.send(path, Access::Pull, || self.http.get(&url)).await?;
        if !response.status().is_success() {
            return Err(self.refused("give the blob", digest, response).await);
        }
        Ok(response)
    }

    /// Upload `body` (`size` bytes) as the blob `digest` of `path`: a POST opens the session, one
    /// PUT carries every byte. The registry checks the digest too.
    pub async fn upload_blob(&self, path: &str, digest: &str, size: u64, body: Body) -> Result<()> {
        let start = self.url(&format!("/v2/{path}/blobs/uploads/"));
        let started = self.send(path, Access::Push, || self.http.post(&start).header(CONTENT_LENGTH, 0)).await?;
        if started.status() != StatusCode::ACCEPTED {
            return Err(self.refused("start an upload", digest, started).await);
        }
        let Some(location) = started.headers().get(LOCATION).and_then(|v| v.to_str().ok()) else {
            return Err(self.failure(path, "it opened an upload without saying where".into(), "check the registry"));
        };
        let location = if location.starts_with("http://") || location.starts_with("https://") {
            location.to_string()
        } else {
            self.url(location)
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let url = format!("{location}{separator}digest={}", digest.replace(':', "%3A"));
        let request = self
            .http
            .put(&url)
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(CONTENT_LENGTH, size)
            .body(body);
        let scope = scope(path, Access::Push);
        let response = self.authorized(request, &scope).await.send().await.map_err(|e| self.unreachable(&e))?;
        if response.status() != StatusCode::CREATED {
            return Err(self.refused("take the blob", digest, response).await);
        }
        Ok(())
    }

    /// Store `manifest` in `path` under its digest, bytes unchanged.
    pub async fn put_manifest(&self, path: &str, manifest: &Manifest) -> Result<()> {
        let url = self.url(&format!("/v2/{path}/manifests/{}", manifest.digest));
        let response = self
            .send(path, Access::Push, || {
                self.http.put(&url).header(CONTENT_TYPE, manifest.put_type()).body(manifest.bytes.clone())
            })
            .await?;
        if response.status() != StatusCode::CREATED {
            return Err(self.refused("take the manifest", &manifest.digest, response).await);
        }
        Ok(())
    }

    /// Delete the manifest `digest` of `path`; false when it had none.
    pub async fn delete_manifest(&self, path: &str, digest: &str) -> Result<bool> {
        let url = self.url(&format!("/v2/{path}/manifests/{digest}"));
        let response = self.send(path, Access::Push, || self.http.delete(&url)).await?;
        match response.status() {
            status if status.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(self.refused("delete the manifest", digest, response).await),
        }
    }

    /// Send the request `make` builds, answering a challenge once (the request is built again).
    async fn send(&self, path: &str, access: Access, make: impl Fn() -> RequestBuilder) -> Result<Response> {
        let scope = scope(path, access);
        let response = self.authorized(make(), &scope).await.send().await.map_err(|e| self.unreachable(&e))?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let header = response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok());
        let Some(challenge) = header.and_then(challenge::parse) else { return Ok(response) };
        self.answer(challenge, &scope).await?;
        self.authorized(make(), &scope).await.send().await.map_err(|e| self.unreachable(&e))
    }

    /// `request` with what the registry asked for so far.
    async fn authorized(&self, request: RequestBuilder, scope: &str) -> RequestBuilder {
        let auth = self.auth.lock().await;
        if let Some(token) = auth.tokens.get(scope) {
            return request.bearer_auth(token);
        }
        match &self.login {
            Some(Login::Password { username, password }) if auth.basic => {
                request.basic_auth(username, Some(password.expose()))
            }
            _ => request,
        }
    }

    /// Get what `challenge` asks for: use the login (Basic), or a token for `scope` (Bearer).
    async fn answer(&self, challenge: Challenge, scope: &str) -> Result<()> {
        match challenge {
            Challenge::Basic => {
                if !matches!(self.login, Some(Login::Password { .. })) {
                    return Err(self.login_needed("it wants a login, and this node has none for it".into()));
                }
                self.auth.lock().await.basic = true;
            }
            Challenge::Bearer { realm, service, .. } => {
                let token = self.token(&realm, service.as_deref(), scope).await?;
                self.auth.lock().await.tokens.insert(scope.to_string(), token);
            }
        }
        Ok(())
    }

    /// A bearer token for `scope` from the token service at `realm`: anonymous, with the login,
    /// or (an identity token) by docker's OAuth refresh grant.
    async fn token(&self, realm: &str, service: Option<&str>, scope: &str) -> Result<String> {
        let mut query = vec![("scope", scope)];
        query.extend(service.map(|service| ("service", service)));
        let request = match &self.login {
            Some(Login::IdentityToken(token)) => {
                let mut form = vec![
                    ("grant_type", "refresh_token"),
                    ("refresh_token", token.expose()),
                    ("client_id", "strix-toolbox"),
                    ("scope", scope),
                ];
                form.extend(service.map(|service| ("service", service)));
                self.http.post(realm).form(&form)
            }
            Some(Login::Password { username, password }) => {
                self.http.get(realm).query(&query).basic_auth(username, Some(password.expose()))
            }
            None => self.http.get(realm).query(&query),
        };
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        if !response.status().is_success() {
            return Err(self.refused("give a token", scope, response).await);
        }
        #[derive(Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let bytes = response.bytes().await.map_err(|e| self.unreachable(&e))?;
        let token: Option<Token> = serde_json::from_slice(&bytes).ok();
        token
            .and_then(|token| token.token.or(token.access_token))
            .filter(|token| !token.is_empty())
            .ok_or_else(|| self.failure(scope, "its token service gave no token".into(), "check the registry"))
    }

    /// The registry could not be reached, or the transfer broke: why, from the whole error chain.
    pub fn unreachable(&self, error: &reqwest::Error) -> Error {
        Error::Registry {
            reference: self.registry.clone(),
            message: format!("cannot reach the registry {}: {}", self.registry, error_chain(error)),
            fix: Some(format!("check that {} is reachable from this node, then run again", self.registry)),
        }
    }

    fn failure(&self, what: &str, message: String, fix: &str) -> Error {
        Error::Registry {
            reference: format!("{}/{what}", self.registry),
            message: format!("{}: {message}", self.registry),
            fix: Some(fix.to_string()),
        }
    }

    fn login_needed(&self, message: String) -> Error {
        Error::Registry {
            reference: self.registry.clone(),
            message: format!("{}: {message}", self.registry),
            fix: Some(format!(
                "log in (`podman login {0}` or `docker login {0}`) on this node, or point REGISTRY_AUTH_FILE at an \
                 auth.json that holds the login",
                self.registry
            )),
        }
    }

    /// The registry answered `response` when asked to `what` (`subject`): its status and its own
    /// error message, with the fix the status calls for.
    async fn refused(&self, what: &str, subject: &str, response: Response) -> Error {
        let status = response.status();
        let body = response.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
        let said = registry_message(&body);
        let message = format!(
            "asked to {what}{}, it answered {status}{}",
            if subject.is_empty() { String::new() } else { format!(" {subject}") },
            if said.is_empty() { String::new() } else { format!(": {said}") }
        );
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => self.login_needed(message),
            StatusCode::NOT_FOUND => self.failure(subject, message, "check the image reference"),
            _ => self.failure(subject, message, "check the registry and run again"),
        }
    }
}

/// `repository:PATH:pull` or `…:pull,push`.
fn scope(path: &str, access: Access) -> String {
    let actions = match access {
        Access::Pull => "pull",
        Access::Push => "pull,push",
    };
    format!("repository:{path}:{actions}")
}

fn is_sha256(reference: &str) -> bool {
    reference.strip_prefix("sha256:").is_some_and(|hex| hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The registry's own words (`{"errors":[{"code","message"}]}`), else the start of the body.
fn registry_message(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    if let Ok(errors) = serde_json::from_slice::<Errors>(body) {
        return errors
            .errors
            .iter()
            .map(|e| if e.message.is_empty() { e.code.clone() } else { format!("{} ({})", e.message, e.code) })
            .collect::<Vec<_>>()
            .join("; ");
    }
    String::from_utf8_lossy(body).lines().next().unwrap_or_default().chars().take(200).collect()
}

/// An error and every cause under it, each said once: "error sending request: connection refused".
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// What a fake server was asked: `METHOD TARGET`, and the Authorization header.
    type Seen = Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;
    /// A fake server's answer to (its own address, method, target, Authorization): the status line
    /// with headers, and the body.
    type Answer = dyn Fn(&str, &str, &str, Option<&str>) -> (String, Vec<u8>) + Send + Sync;

    /// An HTTP/1.1 server on 127.0.0.1, one request per connection; its address and what it saw.
    async fn serve(answer: Arc<Answer>) -> (String, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen: Seen = Arc::default();
        let (log, own) = (seen.clone(), address.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (answer, log, own) = (answer.clone(), log.clone(), own.clone());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => request.extend_from_slice(&buffer[..read]),
                        }
                    }
                    let text = String::from_utf8_lossy(&request).into_owned();
                    let mut words = text.split_whitespace();
                    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
                    let authorization = text.lines().find_map(|line| {
                        let (name, value) = line.split_once(": ")?;
                        name.eq_ignore_ascii_case("authorization").then(|| value.to_string())
                    });
                    log.lock().unwrap().push((format!("{method} {target}"), authorization.clone()));
                    let (head, body) = answer(&own, method, target, authorization.as_deref());
                    let head = format!("{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(&body).await;
                });
            }
        });
        (address, seen)
    }

    /// Docker Hub's way: a 401 naming the token service, a token for the login, and blobs
    /// redirected to a CDN on another host, which must not see the token.
    #[tokio::test]
    async fn bearer_tokens_for_the_login_and_blob_redirects_without_them() {
        let blob = b"layer bytes".to_vec();
        let served = blob.clone();
        let (cdn, cdn_saw) = serve(Arc::new(move |_, _, _, _| ("HTTP/1.1 200 OK".into(), served.clone()))).await;
        // Another host name for the same CDN: a redirect across hosts.
        let cdn = cdn.replace("127.0.0.1", "localhost");
        let manifest = br#"{"schemaVersion":2,"config":{"digest":"sha256:c","size":1},"layers":[]}"#.to_vec();
        let body = manifest.clone();
        let (registry, registry_saw) = serve(Arc::new(move |own, _, target, authorization| match authorization {
            Some(login) if target.starts_with("/token?") => {
                assert_eq!(login, "Basic YWxpY2U6czNjcmV0", "the login goes to the token service");
                ("HTTP/1.1 200 OK\r\ncontent-type: application/json".into(), br#"{"token":"tok"}"#.to_vec())
            }
            Some("Bearer tok") if target.contains("/manifests/") => {
                (format!("HTTP/1.1 200 OK\r\ncontent-type: {}", manifest::OCI_MANIFEST), body.clone())
            }
            Some("Bearer tok") => {
                (format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{cdn}/blob"), Vec::new())
            }
            _ => {
                let challenge = format!("Bearer realm=\"http://{own}/token\",service=\"hub\"");
                (format!("HTTP/1.1 401 Unauthorized\r\nwww-authenticate: {challenge}"), Vec::new())
            }
        }))
        .await;
        let client = RegistryClient {
            registry: registry.clone(),
            base: format!("http://{registry}"),
            http: builder().no_proxy().build().unwrap(),
            login: Some(Login::Password {
                username: "alice".into(),
                password: crate::secret::Secret::new("s3cret".into()),
            }),
            auth: Mutex::default(),
        };

        let got = client.manifest("kyuz0/vllm", "latest").await.unwrap();
        assert_eq!((got.digest, got.media_type.as_str()), (manifest::sha256_digest(&manifest), manifest::OCI_MANIFEST));
        let digest = manifest::sha256_digest(&blob);
        let bytes = client.blob("kyuz0/vllm", &digest).await.unwrap().bytes().await.unwrap();
        assert_eq!(bytes.to_vec(), blob);
        assert_eq!(*cdn_saw.lock().unwrap(), [("GET /blob".to_string(), None)], "nothing of the login reaches the CDN");
        let asked: Vec<String> = registry_saw.lock().unwrap().iter().map(|(request, _)| request.clone()).collect();
        assert!(
            asked.iter().any(|r| r.starts_with("GET /token?scope=repository%3Akyuz0%2Fvllm%3Apull&service=hub")),
            "{asked:?}"
        );
        assert_eq!(
            asked.iter().filter(|r| r.starts_with("GET /token")).count(),
            1,
            "one token for the scope: {asked:?}"
        );
    }

    #[test]
    fn registry_errors_read_as_the_registry_said_them() {
        let body = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#;
        assert_eq!(registry_message(body), "manifest unknown (MANIFEST_UNKNOWN)");
        assert_eq!(registry_message(b"<html>bad gateway</html>\nmore"), "<html>bad gateway</html>");
        assert_eq!(scope("kyuz0/vllm", Access::Push), "repository:kyuz0/vllm:pull,push");
        assert!(is_sha256(&format!("sha256:{}", "a".repeat(64))) && !is_sha256("latest"));
    }
}
