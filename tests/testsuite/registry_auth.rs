//! Private registries: pulls and pushes carry the login from the files users already have
//! (`REGISTRY_AUTH_FILE`, podman's `$XDG_RUNTIME_DIR/containers/auth.json`, docker's
//! `~/.docker/config.json`) or from the credential helpers docker's config names (`credHelpers`,
//! `credsStore`), against a real registry that answers 401 without it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::support::cli::{json, refresh_vllm, run_strix, stderr};
use crate::support::docker::DockerDaemon;
use crate::support::host_tree::materialize;
use crate::support::image::stand_in_image;
use crate::support::podman::PodmanService;
use crate::support::rccl_fixtures;
use crate::support::registry::Registry;

/// The environment of a user who has logged in nowhere: no auth file anywhere we look.
fn logged_out(base: Vec<(String, String)>, home: &Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> =
        base.into_iter().filter(|(k, _)| k != "REGISTRY_AUTH_FILE" && k != "XDG_RUNTIME_DIR").collect();
    env.push(("HOME".into(), home.display().to_string()));
    env.push(("XDG_RUNTIME_DIR".into(), home.join("run").display().to_string()));
    env.push(("XDG_CONFIG_HOME".into(), home.join(".config").display().to_string()));
    env.push(("REGISTRY_AUTH_FILE".into(), String::new()));
    env
}

fn with(mut env: Vec<(String, String)>, key: &str, value: &Path) -> Vec<(String, String)> {
    env.retain(|(k, _)| k != key);
    env.push((key.into(), value.display().to_string()));
    env
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// `dir` first on PATH, where the credential helpers are.
fn with_helpers(mut env: Vec<(String, String)>, dir: &Path) -> Vec<(String, String)> {
    env.retain(|(k, _)| k != "PATH");
    env.push(("PATH".into(), format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())));
    env
}

fn write_program(path: &Path, text: &str) {
    write(path, text);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A docker credential helper, `dir/docker-credential-NAME`: answers `get` for `server` with
/// `login` (user:password), says "credentials not found" for any other server (as real helpers
/// do), and logs every request; returns the log's path.
fn credential_helper(dir: &Path, name: &str, server: &str, login: &str) -> PathBuf {
    let (user, password) = login.split_once(':').expect("user:password");
    let log = dir.join(format!("{name}.log"));
    let script = format!(
        r#"#!/bin/sh
read -r server
echo "$1 $server" >> '{log}'
if [ "$1" = get ] && [ "$server" = '{server}' ]; then
    printf '{{"ServerURL":"%s","Username":"{user}","Secret":"{password}"}}\n' "$server"
else
    echo 'credentials not found in native keychain'
    exit 1
fi
"#,
        log = log.display()
    );
    write_program(&dir.join(format!("docker-credential-{name}")), &script);
    log
}

fn requests(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

#[test]
fn podman_refresh_without_a_login_says_so_and_with_registry_auth_file_pulls() {
    let registry = Registry::start_with_login("strix", "s3cret");
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "kyuz0/private:latest", "2026-11-01T10:00:00Z");
    let host = materialize("strix-e810-healthy");
    let home = TempDir::new().expect("tempdir");
    let env = logged_out(podman.env(), home.path());
    let args = refresh_vllm(host.path().to_str().unwrap(), &image, &["--json"]);

    let refused = run_strix(&env, &args);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains(&registry.host()), "names the registry: {message}");
    assert!(message.contains("podman login"), "says how to log in: {message}");
    assert!(podman.podman(&["container", "exists", "vllm"]).status.code() == Some(1), "no toolbox was made");

    let auth_file = home.path().join("auth.json");
    write(&auth_file, &registry.auth_json());
    let output = run_strix(&with(env, "REGISTRY_AUTH_FILE", &auth_file), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "created");
}

#[test]
fn docker_refresh_reads_the_docker_config_json() {
    let registry = Registry::start_with_login("strix", "s3cret");
    let image = {
        let podman = PodmanService::start(&registry);
        stand_in_image(&podman, &registry, "kyuz0/private:latest", "2026-11-01T10:00:00Z")
    };
    let daemon = DockerDaemon::start(registry.port);
    let host = materialize("strix-e810-healthy");
    let home = TempDir::new().expect("tempdir");
    write(&home.path().join(".docker/config.json"), &registry.auth_json());

    let args = refresh_vllm(host.path().to_str().unwrap(), &image, &["--container-engine", "docker", "--json"]);
    let output = run_strix(&logged_out(daemon.env(), home.path()), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "created");
}

#[test]
fn build_push_without_a_login_fails_and_with_podman_auth_json_lands() {
    let registry = Registry::start_with_login("strix", "s3cret");
    let podman = PodmanService::start(&registry);
    let base = stand_in_image(&podman, &registry, "kyuz0/base:latest", "2026-11-01T10:00:00Z");
    let home = TempDir::new().expect("tempdir");
    let library = rccl_fixtures::gfx1151_library(home.path(), "librccl.so.1", "private push");
    let tag = format!("{}/kyuz0/vllm-therock-gfx1151:private", registry.host());
    let env = logged_out(podman.env(), home.path());
    let args = ["build", "--rccl", library.to_str().unwrap(), "--base", &base, "--tag", &tag, "--push"];

    // The base is already local (pulled by hand with the login), so the push is the first thing
    // that meets the registry's 401.
    let login = registry.login.clone().expect("login");
    podman.podman_ok(&["pull", "--quiet", "--creds", &login, &base]);
    let refused = run_strix(&env, &args);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains(&format!("push {tag}")), "names the push: {message}");
    assert!(message.contains("podman login"), "says how to log in: {message}");

    write(&home.path().join("run/containers/auth.json"), &registry.auth_json());
    let output = run_strix(&env, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    podman.podman_ok(&["rmi", "--force", &tag]);
    podman.podman_ok(&["pull", "--quiet", "--creds", &login, &tag]);
}

#[test]
fn podman_asks_the_credential_helper_named_for_the_registry_and_says_when_it_cannot() {
    let registry = Registry::start_with_login("strix", "s3cret");
    let podman = PodmanService::start(&registry);
    let image = stand_in_image(&podman, &registry, "kyuz0/private:latest", "2026-11-01T10:00:00Z");
    let host = materialize("strix-e810-healthy");
    let home = TempDir::new().expect("tempdir");
    let bin = home.path().join("bin");
    let log = credential_helper(&bin, "strixtest", &registry.host(), registry.login.as_deref().expect("login"));
    write_program(
        &bin.join("docker-credential-locked"),
        "#!/bin/sh\necho 'gpg: decryption failed: No secret key' >&2\nexit 1\n",
    );
    let env = with_helpers(logged_out(podman.env(), home.path()), &bin);
    let config = home.path().join(".docker/config.json");
    let args = refresh_vllm(host.path().to_str().unwrap(), &image, &["--json"]);
    let reg = registry.host();

    // A store that is not installed: named, with the fix.
    write(&config, r#"{"credsStore":"absent"}"#);
    let refused = run_strix(&env, &args);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("docker-credential-absent") && message.contains("`credsStore`"), "{message}");
    assert!(message.contains(&config.display().to_string()), "names the file: {message}");
    assert!(message.contains("Fix: install docker-credential-absent"), "{message}");

    // The registry's own helper is asked, not the store, and its failure is passed on.
    write(&config, &format!(r#"{{"credsStore":"absent","credHelpers":{{"{reg}":"locked"}}}}"#));
    let refused = run_strix(&env, &args);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("docker-credential-locked get"), "{message}");
    assert!(message.contains("gpg: decryption failed"), "passes on what the helper said: {message}");
    assert!(message.contains(&format!("`podman login {reg}`")), "{message}");
    assert!(podman.container_names().is_empty(), "no toolbox was made");

    write(
        &config,
        &format!(r#"{{"auths":{{"{reg}":{{}}}},"credsStore":"absent","credHelpers":{{"{reg}":"strixtest"}}}}"#),
    );
    let output = run_strix(&env, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "created");
    assert_eq!(requests(&log), [format!("get {reg}")]);
}

#[test]
fn docker_pulls_with_the_credentials_store() {
    let registry = Registry::start_with_login("strix", "s3cret");
    let image = {
        let podman = PodmanService::start(&registry);
        stand_in_image(&podman, &registry, "kyuz0/private:latest", "2026-11-01T10:00:00Z")
    };
    let daemon = DockerDaemon::start(registry.port);
    let host = materialize("strix-e810-healthy");
    let home = TempDir::new().expect("tempdir");
    let bin = home.path().join("bin");
    let log = credential_helper(&bin, "strixtest", &registry.host(), registry.login.as_deref().expect("login"));
    // What `docker login` writes with a store: an empty entry, the secret in the store.
    write(
        &home.path().join(".docker/config.json"),
        &format!(r#"{{"auths":{{"{}":{{}}}},"credsStore":"strixtest"}}"#, registry.host()),
    );

    let args = refresh_vllm(host.path().to_str().unwrap(), &image, &["--container-engine", "docker", "--json"]);
    let output = run_strix(&with_helpers(logged_out(daemon.env(), home.path()), &bin), &args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&output)["action"], "created");
    assert_eq!(requests(&log), [format!("get {}", registry.host())]);
}

#[test]
fn build_pulls_its_base_and_pushes_through_the_credentials_store() {
    let registry = Registry::start_with_login("strix", "s3cret");
    let podman = PodmanService::start(&registry);
    // Only in the registry: the build's pull of the base meets the 401 first.
    let base = stand_in_image(&podman, &registry, "kyuz0/base:latest", "2026-11-01T10:00:00Z");
    let home = TempDir::new().expect("tempdir");
    let bin = home.path().join("bin");
    let login = registry.login.clone().expect("login");
    let log = credential_helper(&bin, "strixtest", &registry.host(), &login);
    write(&home.path().join(".docker/config.json"), r#"{"credsStore":"strixtest"}"#);
    let library = rccl_fixtures::gfx1151_library(home.path(), "librccl.so.1", "helper push");
    let tag = format!("{}/kyuz0/vllm-therock-gfx1151:helper", registry.host());
    let env = with_helpers(logged_out(podman.env(), home.path()), &bin);
    let args = ["build", "--rccl", library.to_str().unwrap(), "--base", &base, "--tag", &tag, "--push"];

    let output = run_strix(&env, &args);
    assert!(output.status.success(), "{}", stderr(&output));
    // Read once: the base's pull and the push, in one command, share the login.
    assert_eq!(requests(&log), [format!("get {}", registry.host())]);
    podman.podman_ok(&["rmi", "--force", &tag]);
    podman.podman_ok(&["pull", "--quiet", "--creds", &login, &tag]);
}
