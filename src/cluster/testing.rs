//! In-process clusters for unit tests of the decisions across nodes (refresh, the spread, verify,
//! a canary): each node is a [`LocalNode`] on a GPU host tree of its own (device nodes linked to
//! `/dev/null`, as `examples/hosts/` has them) and its own in-memory [`FakeEngine`], so a test
//! says what each node's engine holds, makes any engine call fail, and reads back what changed.
//! Calls the fake engine cannot answer (the registry API, the head's registry) are given their
//! answers with [`Scripted`]; a node that fails a call, or a signal that comes during one, with
//! [`failing`] and [`interrupting`].

use std::sync::Arc;

use async_trait::async_trait;

use super::interrupt::Interrupt;
use crate::container_engine::fake::FakeEngine;
use crate::container_engine::ImageInfo;
use crate::error::{Error, Result, Signal};
use crate::labels;
use crate::node::call::NodeCall;
use crate::node::local::LocalNode;
use crate::node::Node;
use crate::settings::Settings;

/// The repository the tests' images come from.
pub const REPO: &str = "registry.test/vllm";

/// One node: its engine, and the node over it.
pub struct TestNode {
    pub engine: Arc<FakeEngine>,
    pub node: LocalNode,
    /// Its host tree (what `--host-root` names).
    pub host_root: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TestNode {
    /// A GPU node named `name` with an empty engine.
    pub fn new(name: &str) -> TestNode {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().join("host");
        std::fs::create_dir_all(root.join("dev/dri")).expect("the host tree");
        for device in ["dev/kfd", "dev/dri/card0", "dev/dri/renderD128"] {
            std::os::unix::fs::symlink("/dev/null", root.join(device)).expect("a device link");
        }
        let engine = Arc::new(FakeEngine::new());
        let settings = Settings::for_tests(dir.path()).with_engine(engine.clone());
        let settings = Settings { host_root: root.clone(), ..settings };
        TestNode { engine, node: LocalNode::named(name, settings), host_root: root, _dir: dir }
    }

    /// The image toolbox `name` runs (its id label), if it exists.
    pub fn runs(&self, name: &str) -> Option<String> {
        self.engine.container(name).and_then(|c| c.labels.get(labels::IMAGE_ID).cloned())
    }

    /// The names of the containers of toolbox `name` (its own, parked or staged).
    pub fn toolboxes(&self, name: &str) -> Vec<String> {
        [name.to_string(), crate::plan::old_name(name), crate::plan::temp_name(name)]
            .into_iter()
            .filter(|candidate| self.engine.container(candidate).is_some())
            .collect()
    }
}

/// Nodes named `names`, the first the head.
pub fn nodes(names: &[&str]) -> Vec<TestNode> {
    names.iter().map(|name| TestNode::new(name)).collect()
}

/// Every node as a [`Node`].
pub fn as_nodes(nodes: &[TestNode]) -> Vec<&dyn Node> {
    nodes.iter().map(|test| &test.node as &dyn Node).collect()
}

/// `sha256:` and 64 times `digit`.
pub fn digest(digit: char) -> String {
    format!("sha256:{}", digit.to_string().repeat(64))
}

/// Version `digit` of the image (id `sha256:DIGIT…`, pinned under day `digit` of November 2026),
/// published under `REPO:latest` and under its digest on every node's registry.
pub fn publish(nodes: &[TestNode], digit: char) -> ImageInfo {
    let image = ImageInfo {
        id: format!("sha256:id{digit}"),
        repo_digests: vec![format!("{REPO}@{}", digest(digit))],
        labels: [(labels::OCI_CREATED.to_string(), format!("2026-11-0{digit}T10:00:00Z"))].into(),
        ..Default::default()
    };
    for test in nodes {
        test.engine.publish(&format!("{REPO}:latest"), image.clone());
        test.engine.publish(&format!("{REPO}@{}", digest(digit)), image.clone());
    }
    image
}

/// A node's own answer to a call (None: the call goes on to the node).
pub type CannedAnswer<'a> = Box<dyn Fn(&NodeCall) -> Option<Result<serde_json::Value>> + Send + Sync + 'a>;

/// A node that answers some calls itself (what the fake engine cannot: the registry API, the
/// head's registry) and hands the others to `inner`.
pub struct Scripted<'a> {
    pub inner: &'a dyn Node,
    pub answer: CannedAnswer<'a>,
}

#[async_trait]
impl Node for Scripted<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn ask(&self, call: NodeCall) -> Result<serde_json::Value> {
        match (self.answer)(&call) {
            Some(answer) => answer,
            None => self.inner.ask(call).await,
        }
    }
}

/// `inner`, whose channel fails the calls `fails` picks, as a node that went away would (the call
/// never reaches the node).
pub fn failing<'a>(inner: &'a dyn Node, fails: fn(&NodeCall) -> bool) -> Scripted<'a> {
    let node = inner.name().to_string();
    Scripted {
        inner,
        answer: Box::new(move |call| {
            let message = format!("node {node}: the connection was lost");
            fails(call).then(|| Err(Error::Node { node: node.clone(), message, fix: None }))
        }),
    }
}

/// `inner`, during whose answer to the calls `when` picks Ctrl-C comes (the call still finishes,
/// as a node's does).
pub fn interrupting<'a>(inner: &'a dyn Node, interrupt: &'a Interrupt, when: fn(&NodeCall) -> bool) -> Scripted<'a> {
    Scripted {
        inner,
        answer: Box::new(move |call| {
            if when(call) {
                interrupt.raise(Signal::Interrupt);
            }
            None
        }),
    }
}

/// `value` as a node's answer.
pub fn answer<T: serde::Serialize>(value: T) -> Option<Result<serde_json::Value>> {
    Some(Ok(serde_json::to_value(value).expect("a report encodes")))
}
