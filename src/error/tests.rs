use super::report::ErrorObject;
use super::*;

fn interrupted(signal: Signal) -> Error {
    Error::Interrupted { during: "pulling docker.io/kyuz0/vllm:latest".into(), signal }
}

fn unreachable(node: &str) -> Error {
    Error::Node {
        node: node.into(),
        message: format!("cannot reach node {node}: it is down or unreachable (No route to host)"),
        fix: Some("check that it is powered on and on the network".into()),
    }
}

fn refused_image() -> Error {
    Error::Registry {
        reference: "127.0.0.1:5000/kyuz0/vllm:latest".into(),
        message: "podman: pull 127.0.0.1:5000/kyuz0/vllm:latest failed: unauthorized".into(),
        fix: Some("log in (`podman login 127.0.0.1:5000`)".into()),
    }
}

/// One error of every variant.
fn one_of_each() -> Vec<Error> {
    let mut nodes = MultiError::new("cluster refresh stopped before any node swapped");
    nodes.push("strix-a", unreachable("strix-a"));
    nodes.push("strix-b", refused_image());
    vec![
        Error::Usage("unknown channel \"stable\": expected one of latest, dev".into()),
        Error::Usage("no cluster file at /c.toml. Fix: `strix-toolbox cluster init` writes it".into()),
        Error::host("/dev/kfd", "this node has no /dev/kfd", "load amdgpu (`sudo modprobe amdgpu`)"),
        Error::read("/etc/group", std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
        Error::engine("podman", "create vllm", "no such image"),
        Error::ContainerEngineUnavailable {
            engine: "docker",
            message: "docker does not answer at /run/docker.sock".into(),
            fix: Some("start it".into()),
        },
        refused_image(),
        Error::Command { program: "distrobox create".into(), message: "exit status: 1 (boom)".into(), fix: None },
        unreachable("strix-b"),
        Error::from_remote("strix-b", refused_image().report()),
        Error::Verification { message: "the new toolbox failed verification: rccl: wrong".into(), fix: None },
        interrupted(Signal::Interrupt),
        interrupted(Signal::Terminate),
        Error::Nodes(nodes),
        Error::artifact("/tmp/librccl.so.1.gz", "the gzip data is truncated", "download it again"),
        Error::toolbox("vllm", "vllm is running", "rerun with --force"),
        refused_image().context("cannot get the image to check against"),
        Error::Internal("an empty command line".into()),
        Error::Usage("--tp 3 needs 3 GPUs. Fix: --tp 2 or less".into()),
    ]
}

#[test]
fn each_kind_has_its_exit_code() {
    let code = |error: Error| (error.kind(), error.exit_code());
    assert_eq!(code(Error::Usage("bad".into())), (ErrorKind::Usage, EXIT_USAGE));
    assert_eq!(code(interrupted(Signal::Interrupt)), (ErrorKind::Interrupted, 130));
    assert_eq!(code(interrupted(Signal::Terminate)), (ErrorKind::Interrupted, 143));
    assert_eq!(code(refused_image()), (ErrorKind::Registry, EXIT_FAILURE));
    assert_eq!(code(unreachable("strix-b")), (ErrorKind::Node, EXIT_FAILURE));
    assert_eq!(code(Error::read("/x", std::io::Error::other("eio"))), (ErrorKind::Host, EXIT_FAILURE));
    assert_eq!(code(interrupted(Signal::Terminate).context("while staging")), (ErrorKind::Interrupted, 143));
    for error in one_of_each() {
        let expected = match error.kind() {
            ErrorKind::Usage => 2,
            ErrorKind::Interrupted => error.exit_code(),
            _ => 1,
        };
        assert_eq!(error.exit_code(), expected, "{error}");
        assert!([1, 2, 130, 143].contains(&error.exit_code()), "{error}");
    }
}

#[test]
fn several_nodes_give_the_code_they_share() {
    let nodes = |errors: Vec<Error>| {
        let mut multi = MultiError::new("staging failed");
        for (i, error) in errors.into_iter().enumerate() {
            multi.push(format!("strix-{i}"), error);
        }
        Error::Nodes(multi)
    };
    let all_interrupted = nodes(vec![interrupted(Signal::Interrupt), interrupted(Signal::Interrupt)]);
    assert_eq!(all_interrupted.exit_code(), 130);
    assert_eq!(all_interrupted.report().exit_code(), 130);
    assert_eq!(nodes(vec![interrupted(Signal::Terminate)]).exit_code(), 143);
    assert_eq!(nodes(vec![interrupted(Signal::Interrupt), refused_image()]).exit_code(), 1);
    assert_eq!(nodes(vec![Error::Usage("a".into()), Error::Usage("b".into())]).exit_code(), 2);
    assert_eq!(nodes(Vec::new()).exit_code(), 1);
    assert_eq!(nodes(vec![unreachable("strix-0")]).kind(), ErrorKind::Nodes);
}

#[test]
fn the_report_is_the_message_and_the_fix_apart() {
    for error in one_of_each() {
        let report = error.report();
        assert_eq!(report.kind, error.kind(), "{error}");
        assert_eq!(report.to_string(), error.to_string(), "{report:?}");
        assert_eq!(report.fix.as_deref(), error.fix(), "{error}");
        assert!(!report.message.ends_with(". Fix: "), "{report:?}");
        if let Some(fix) = &report.fix {
            assert!(!report.message.contains(&format!("Fix: {fix}")), "fix twice in {report:?}");
        }
    }
    let registry = refused_image().report();
    assert_eq!(registry.message, "podman: pull 127.0.0.1:5000/kyuz0/vllm:latest failed: unauthorized");
    assert_eq!(registry.fix.as_deref(), Some("log in (`podman login 127.0.0.1:5000`)"));
    let usage = Error::Usage("x is wrong. Fix: a. Fix: b".into()).report();
    assert_eq!((usage.message.as_str(), usage.fix.as_deref()), ("x is wrong. Fix: a", Some("b")));
}

#[test]
fn error_reports_survive_json() {
    for error in one_of_each() {
        let object = ErrorObject { error: error.report() };
        let json = serde_json::to_string(&object).expect("serialize");
        let back: ErrorObject = serde_json::from_str(&json).expect(&json);
        assert_eq!(back, object, "{json}");
    }
    let mut multi = MultiError::new("cluster refresh failed during the swap");
    multi.push("strix-b", unreachable("strix-b"));
    let value = serde_json::to_value(ErrorObject { error: Error::Nodes(multi).report() }).expect("json");
    assert_eq!(value["error"]["kind"], "nodes");
    assert_eq!(value["error"]["nodes"][0]["node"], "strix-b");
    assert_eq!(value["error"]["nodes"][0]["kind"], "node");
    assert_eq!(value["error"]["nodes"][0]["fix"], "check that it is powered on and on the network");
    let terse: ErrorReport = serde_json::from_str(r#"{"kind":"engine","message":"podman: x failed: y"}"#).unwrap();
    assert_eq!(
        (terse.kind, terse.fix, terse.nodes.len()),
        (ErrorKind::ContainerEngine, None, 0),
        "the old name is read"
    );
    let unavailable = Error::ContainerEngineUnavailable { engine: "podman", message: "no socket".into(), fix: None };
    assert_eq!(serde_json::to_value(unavailable.kind()).unwrap(), "container-engine");
    assert_eq!(serde_json::to_value(ErrorKind::Interrupted).unwrap(), "interrupted");
}

#[test]
fn a_remote_error_keeps_its_kind_and_names_its_node() {
    for error in one_of_each() {
        let remote = Error::from_remote("strix-b", error.report());
        assert_eq!(remote.kind(), error.kind(), "{error}");
        assert_eq!(remote.to_string(), format!("node strix-b: {error}"));
        assert_eq!(remote.fix(), error.fix(), "{error}");
        assert_eq!(remote.report().nodes, error.report().nodes);
    }
    let usage = Error::from_remote("strix-b", Error::Usage("bad --env".into()).report());
    assert_eq!(usage.exit_code(), EXIT_USAGE);
    let stopped = Error::from_remote("strix-b", interrupted(Signal::Interrupt).report());
    assert_eq!(stopped.exit_code(), EXIT_INTERRUPTED);
}

#[test]
fn several_node_failures_name_every_node_and_its_reason() {
    let mut multi = MultiError::new("cluster refresh stopped before any node swapped");
    multi.push("strix-a", unreachable("strix-a"));
    multi.push("strix-b", refused_image());
    let multi = multi.with_outcome("Every node is as it was (staged replacement removed on strix-c).");
    let text = Error::Nodes(multi).to_string();
    assert_eq!(
        text,
        "cluster refresh stopped before any node swapped:\n  \
         strix-a: cannot reach node strix-a: it is down or unreachable (No route to host). Fix: check that it is \
         powered on and on the network\n  \
         strix-b: podman: pull 127.0.0.1:5000/kyuz0/vllm:latest failed: unauthorized. Fix: log in (`podman login \
         127.0.0.1:5000`)\n\
         Every node is as it was (staged replacement removed on strix-c)."
    );

    let mut one = MultiError::new("nothing was changed");
    one.push("strix-c", refused_image());
    assert_eq!(
        one.to_string(),
        "nothing was changed: strix-c: podman: pull 127.0.0.1:5000/kyuz0/vllm:latest failed: unauthorized. Fix: \
         log in (`podman login 127.0.0.1:5000`)"
    );
    assert!(!one.is_empty() && MultiError::new("x").is_empty());
}

#[test]
fn interruptions_say_which_signal_and_that_nothing_changed() {
    let text = interrupted(Signal::Interrupt).to_string();
    assert_eq!(text, "interrupted during pulling docker.io/kyuz0/vllm:latest; nothing was changed");
    let text = interrupted(Signal::Terminate).to_string();
    assert!(text.starts_with("interrupted by SIGTERM during pulling") && text.ends_with("nothing was changed"));
}

#[test]
fn a_node_is_named_once_in_a_multi_error() {
    let mut failed = MultiError::new("the launch failed");
    failed.push("node1", Error::from_remote("node1", refused_image().report()));
    failed.push("node2", unreachable("node2"));
    let text = failed.to_string();
    assert!(!text.contains("node1: node node1") && !text.contains("node2: node node2"), "{text}");
    assert!(text.contains("\n  node1: podman: pull") && text.contains("\n  node2: cannot reach node node2"), "{text}");
}

#[test]
fn every_kind_is_named_as_serde_names_it() {
    for kind in ErrorKind::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        assert_eq!(ErrorKind::parse(kind.as_str()), Some(kind));
    }
    assert_eq!(ErrorKind::parse("quota"), None);
}
