//! Usage errors exit 2 with a message, before any engine or host is touched.

use crate::support::cli::{stderr, strix};

fn usage_error(args: &[&str], needle: &str) {
    let output = strix().args(args).output().expect("run strix-toolbox");
    assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
    assert!(stderr(&output).contains(needle), "{args:?}: expected {needle:?} in {}", stderr(&output));
}

#[test]
fn bad_channel() {
    usage_error(&["refresh", "stable"], "unknown channel \"stable\"");
}

#[test]
fn bad_name() {
    usage_error(&["refresh", "latest", "--name", "bad name"], "invalid toolbox name");
    usage_error(&["refresh", "--name=-x"], "invalid toolbox name");
    usage_error(&["enter", "no/slash", "--", "true"], "invalid toolbox name");
}

#[test]
fn bad_image_reference() {
    usage_error(&["refresh", "--image", "Docker.io/UPPER:latest"], "invalid image reference");
    usage_error(&["refresh", "--image", "repo:bad tag"], "invalid image reference");
    usage_error(&["refresh", "--image-repo", "x//y"], "invalid image reference");
}

#[test]
fn a_usage_error_under_json_is_an_error_object_of_kind_usage() {
    let output = strix().args(["--json", "refresh", "stable"]).output().expect("run strix-toolbox");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(object["error"]["kind"], "usage", "{object}");
    assert!(object["error"]["message"].as_str().unwrap().contains("unknown channel \"stable\""), "{object}");
    assert!(stderr(&output).contains("unknown channel"), "{}", stderr(&output));
}

#[test]
fn bad_model_ids_and_revisions() {
    usage_error(&["model", "pull", "../../etc"], "is not a Hugging Face model id");
    usage_error(&["model", "pull", "a/b/c"], "is not a Hugging Face model id");
    usage_error(&["model", "list", "a--b/c"], "is not a Hugging Face model id");
    usage_error(&["model", "pull", "acme/tiny", "--revision", "../main"], "not a branch, tag or commit name");
    let cluster = ["--nodes", "node-a.invalid", "--ssh-config", "/dev/null", "--connect-timeout", "1"];
    usage_error(&[&["cluster", "model", "pull", "/models/x"][..], &cluster[..]].concat(), "Hugging Face model id");
}

#[test]
fn bad_env_pair() {
    usage_error(&["refresh", "latest", "--env", "NOVALUE"], "expected KEY=VALUE");
}

#[test]
fn unknown_flags_and_values() {
    usage_error(&["refresh", "--manager", "lxc"], "invalid value 'lxc'");
    usage_error(&["--container-engine", "rkt", "list"], "invalid value 'rkt'");
    usage_error(&["frobnicate"], "unrecognized subcommand");
}

#[test]
fn the_container_engines_old_spelling_is_refused_with_its_new_name() {
    usage_error(&["--engine", "docker", "list"], "--container-engine docker");
    usage_error(&["refresh", "--engine=podman", "--dry-run"], "--container-engine podman");
    let output = strix().env("STRIX_ENGINE", "docker").args(["--json", "list"]).output().expect("run strix-toolbox");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(object["error"]["kind"], "usage", "{object}");
    assert!(object["error"]["message"].as_str().unwrap().contains("STRIX_CONTAINER_ENGINE"), "{object}");
}

#[test]
fn help_documents_and_exits_zero() {
    let output = strix().args(["refresh", "--help"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    for needle in ["--dry-run", "--keep", "--manager", "IMAGE_REPO", "TOOLBOX_NAME", "latest or dev"] {
        assert!(text.contains(needle), "{needle} missing from refresh --help:\n{text}");
    }
}

#[test]
fn completions_for_bash() {
    let output = strix().args(["completions", "bash"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let script = String::from_utf8_lossy(&output.stdout);
    assert!(script.contains("strix-toolbox") && script.contains("refresh") && script.contains("--dry-run"));
}

/// Every numeric flag has bounds: a number past them (one that would overflow a clock, a port that
/// is none) is a usage error naming the range, before anything runs.
#[test]
fn numbers_out_of_range() {
    let huge = "18446744073709551615";
    let cluster = ["--nodes", "node-a.invalid", "--ssh-config", "/dev/null"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["refresh", "--wait", huge], "not in 0..=604800"),
        (vec!["refresh", "--keep", "1001"], "not in 0..=1000"),
        (vec!["refresh", "--keep=-1"], "invalid value '-1' for '--keep <KEEP>'"),
        (vec!["launch", "org/model", "--timeout", huge], "not in 1..=604800"),
        (vec!["launch", "org/model", "--timeout", "0"], "not in 1..=604800"),
        (vec!["launch", "org/model", "--port", "0"], "not in 1..=65535"),
        (vec!["launch", "org/model", "--port", "70000"], "not in 1..=65535"),
        (vec!["launch", "org/model", "--tp", "0"], "not in 1..=1024"),
        (vec!["logs", "-n", huge], "not in 0..=1000000"),
        ([&["cluster", "--connect-timeout", huge, "status"][..], &cluster[..]].concat(), "not in 1..=3600"),
        ([&["cluster", "refresh", "--spread-port", "0"][..], &cluster[..]].concat(), "not in 1..=65535"),
        ([&["cluster", "status", "--ssh-persist", "86401"][..], &cluster[..]].concat(), "not in 0..=86400"),
        ([&["cluster", "disconnect", "--ssh-persist=-1"][..], &cluster[..]].concat(), "'--ssh-persist <SECONDS>'"),
        ([&["cluster", "refresh", "--wait", "5"][..], &cluster[..]].concat(), "unexpected argument '--wait'"),
        ([&["cluster", "top", "--interval", "0"][..], &cluster[..]].concat(), "--interval 0: between 1s and 1h"),
        ([&["cluster", "top", "--interval", "2d"][..], &cluster[..]].concat(), "--interval \"2d\": a duration"),
        ([&["cluster", "metrics", "--scrape-timeout", "61s"][..], &cluster[..]].concat(), "between 1s and 60s"),
        ([&["cluster", "metrics", "--listen", "localhost:9464"][..], &cluster[..]].concat(), "--listen \"localhost"),
    ];
    for (args, needle) in cases {
        usage_error(&args, needle);
    }
    let from_env = strix()
        .env("STRIX_SPREAD_PORT", "99999")
        .args([&["cluster", "refresh"][..], &cluster[..]].concat())
        .output()
        .expect("run strix-toolbox");
    assert_eq!(from_env.status.code(), Some(2), "{}", stderr(&from_env));
    assert!(stderr(&from_env).contains("not in 1..=65535"), "{}", stderr(&from_env));
}

/// A command line clap refuses (a number out of bounds, an unknown flag) is, under `--json`, the
/// same error object as every other usage error.
#[test]
fn a_refused_command_line_under_json_is_an_error_object_too() {
    let output = strix().args(["--json", "refresh", "--keep", "5000"]).output().expect("run strix-toolbox");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(object["error"]["kind"], "usage", "{object}");
    assert!(object["error"]["message"].as_str().unwrap().contains("5000 is not in 0..=1000"), "{object}");
    let help = strix().args(["--json", "refresh", "--help"]).output().expect("run strix-toolbox");
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--keep"), "help stays help");
}
