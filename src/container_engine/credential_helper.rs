//! Docker's credential-helper protocol, which Docker Desktop, `pass` and secretservice logins use
//! (`credsStore` / `credHelpers` in docker's config.json): `docker-credential-NAME get` reads the
//! server URL on stdin and answers `{"ServerURL", "Username", "Secret"}` on stdout. A
//! `Username` of `<token>` means `Secret` is an identity token, not a password.

use std::process::Stdio;

use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::error::{Error, Result};
use crate::secret::Secret;

/// What helpers print (and exit non-zero with) when they hold no login for the server.
const NOT_FOUND: &str = "credentials not found";

/// A helper's answer for one server: its secret part redacted wherever it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    Password {
        username: String,
        password: Secret,
    },
    /// An OAuth identity token the engine exchanges for access itself.
    IdentityToken(Secret),
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Answer {
    #[serde(default)]
    username: String,
    #[serde(default)]
    secret: String,
}

/// Which helper the config names, and where: for messages that say how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    /// NAME in `docker-credential-NAME`.
    pub name: String,
    /// `credHelpers` or `credsStore`, and the file it is in.
    pub named_by: String,
}

impl Helper {
    pub fn program(&self) -> String {
        format!("docker-credential-{}", self.name)
    }

    /// Ask the helper for `server`'s login; None when it holds none. `registry` and `engine` only
    /// shape the messages.
    pub async fn get(&self, server: &str, registry: &str, engine: &str) -> Result<Option<Login>> {
        let program = self.program();
        let relogin = format!("log in again (`{engine} login {registry}`)");
        let failed = |message: String, fix: String| Error::Command {
            program: format!("{program} get"),
            message,
            fix: Some(fix),
        };
        let mut child = Command::new(&program)
            .arg("get")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                let why = match e.kind() {
                    std::io::ErrorKind::NotFound => "it is not on PATH".to_string(),
                    _ => format!("cannot run it ({e})"),
                };
                failed(
                    format!("{why}; {} names it for {registry}", self.named_by),
                    format!("install {program} on PATH, or remove that entry and {relogin}"),
                )
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            // A helper that exits without reading is judged by its exit status below.
            let _ = stdin.write_all(server.as_bytes()).await;
        }
        let output = child.wait_with_output().await.map_err(|e| {
            failed(
                format!("cannot read its answer: {e}"),
                format!("run `{program} get` by hand to see why, or {relogin}"),
            )
        })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            if stdout.contains(NOT_FOUND) {
                return Ok(None);
            }
            let stderr = String::from_utf8_lossy(&output.stderr);
            let said = [stdout.trim(), stderr.trim()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>();
            let ended = match output.status.code() {
                Some(code) => format!("exit code {code}"),
                None => output.status.to_string(),
            };
            return Err(failed(
                format!(
                    "asked about {server}, it ended with {ended}{}",
                    if said.is_empty() { String::new() } else { format!(": {}", said.join("; ")) }
                ),
                format!("unlock the store it reads (for `pass`, the gpg key) or {relogin}"),
            ));
        }
        // Not echoed on failure: it may hold the secret.
        let answer: Answer = serde_json::from_str(&stdout).map_err(|e| {
            failed(
                format!("its answer for {server} is not the protocol's JSON ({e})"),
                format!("check that {program} is a docker credential helper, or {relogin}"),
            )
        })?;
        Ok(login_of(answer))
    }
}

fn login_of(answer: Answer) -> Option<Login> {
    match (answer.username.as_str(), answer.secret) {
        (_, secret) if secret.is_empty() => None,
        ("<token>", token) => Some(Login::IdentityToken(Secret::new(token))),
        (_, password) => Some(Login::Password { username: answer.username, password: Secret::new(password) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(json: &str) -> Option<Login> {
        login_of(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn reads_passwords_and_identity_tokens() {
        let password = answer(r#"{"ServerURL":"127.0.0.1:5000","Username":"strix","Secret":"s3cret"}"#);
        assert_eq!(
            password,
            Some(Login::Password { username: "strix".into(), password: Secret::new("s3cret".into()) })
        );
        let token = answer(r#"{"ServerURL":"https://index.docker.io/v1/","Username":"<token>","Secret":"eyJ"}"#);
        assert_eq!(token, Some(Login::IdentityToken(Secret::new("eyJ".into()))));
        assert_eq!(answer(r#"{"ServerURL":"x","Username":"","Secret":""}"#), None);
    }
}
