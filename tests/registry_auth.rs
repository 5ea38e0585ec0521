//! Private registries: pulls and pushes carry the login from the files users already have
//! (`REGISTRY_AUTH_FILE`, podman's `$XDG_RUNTIME_DIR/containers/auth.json`, docker's
//! `~/.docker/config.json`), against a real registry that answers 401 without it.

mod common;
mod rccl_fixtures;
mod support;

use std::path::Path;

use common::docker::DockerDaemon;
use common::{refresh_vllm, run_strix, stand_in_image, PodmanService, Registry};
use support::cli::{json, stderr};
use support::host_tree::materialize;
use tempfile::TempDir;

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

    let args = refresh_vllm(host.path().to_str().unwrap(), &image, &["--engine", "docker", "--json"]);
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
