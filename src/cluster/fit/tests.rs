use std::path::Path;

use super::*;
use crate::cluster::testing::{answer, as_nodes, nodes, Scripted, TestNode};
use crate::model::shape::fixtures::{self, write_checkpoint};
use crate::node::call::NodeCall;
use crate::serving::fit::{FitAsk, Outcome, Rule};
use crate::serving::llama::LLAMA_CPP;
use crate::serving::vllm::VLLM;
use crate::toolbox::running::ExecReport;

const GIB: u64 = 1 << 30;

/// Each node's GPU as its kernel would say it: `gtt_gib` of GTT, 1 GiB of it in use.
fn with_gtt(node: &TestNode, gtt_gib: u64) {
    let device = node.host_root.join("sys/class/drm/card0/device");
    std::fs::create_dir_all(&device).expect("the card's sysfs");
    std::fs::write(device.join("mem_info_gtt_total"), format!("{}\n", gtt_gib * GIB)).expect("gtt total");
    std::fs::write(device.join("mem_info_gtt_used"), format!("{GIB}\n")).expect("gtt used");
}

fn request(engine: crate::serving::engine::EngineRef, model: &Path) -> FitRequest {
    let model = model.display().to_string();
    FitRequest {
        engine,
        source: engine.source(&model, None).expect("a source"),
        model,
        toolbox: engine.toolbox().default_toolbox.into(),
        revision: None,
        tp: None,
        pp: None,
        asked: FitAsk::default(),
        reserve_gib: 4,
        hf_token: None,
        hub_env: Default::default(),
        ask_devices: true,
        count_in_use: true,
    }
}

#[tokio::test]
async fn three_nodes_plan_a_64_head_model_from_its_headers_and_their_gtt() {
    let cluster = nodes(&["node1", "node2", "node3"]);
    for (node, gtt) in cluster.iter().zip([124, 124, 100]) {
        with_gtt(node, gtt);
    }
    let model = tempfile::tempdir().expect("a model directory");
    let written = write_checkpoint(fixtures::QWEN3_32B, model.path(), 4 << 30);
    let report = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect("a plan");
    assert!(report.read.bytes_read < 2_000_000 && report.read.bytes_read > written.header_bytes, "{:?}", report.read);
    let plan = report.plan.as_ref().expect("sized");
    // The GTT less the 1 GiB in use less the 4 GiB reserve: what HIP's carve-out says plays no part.
    let usable: Vec<u64> = plan.nodes.iter().map(|n| n.usable_bytes).collect();
    assert_eq!(usable, [119 * GIB, 119 * GIB, 95 * GIB]);
    let tp3 = plan.layout(3, 1, 1, false).expect("TP 3 is listed");
    assert!(matches!(&tp3.outcome, Outcome::Breaks { rules, .. } if rules[0].rule == Rule::AttentionHeads), "{tp3:?}");
    // No RoCE and no Thunderbolt in these trees: Ethernet, where the layers are split.
    let chosen = plan.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (1, 3));
    assert!(plan.fewer_nodes.as_deref().is_some_and(|f| f.contains("fits on 1 of the 3")), "{:?}", plan.fewer_nodes);
    assert!(!report.refused() && report.head_gpu.is_none() && report.notes.is_empty(), "{report:?}");
}

#[tokio::test]
async fn a_layout_asked_that_the_model_forbids_is_refused_in_the_plan() {
    let cluster = nodes(&["node1", "node2", "node3"]);
    cluster.iter().for_each(|node| with_gtt(node, 124));
    let model = tempfile::tempdir().expect("a model directory");
    write_checkpoint(fixtures::QWEN3_32B, model.path(), 4 << 30);
    let asked = FitRequest {
        tp: Some(3),
        asked: FitAsk { max_model_len: Some(8192), ..FitAsk::default() },
        ..request(VLLM, model.path())
    };
    let report = fit_model(&as_nodes(&cluster), &asked).await.expect("a plan");
    let refusal = report.plan.as_ref().and_then(|p| p.refusal.clone()).expect("refused");
    assert!(refusal.asked_against_the_model() && refusal.message.contains("TP 3 × PP 1, as asked"), "{refusal:?}");
    assert!(report.refused());
    let wrong = FitRequest { tp: Some(2), ..request(VLLM, model.path()) };
    let error = fit_model(&as_nodes(&cluster), &wrong).await.expect_err("2 does not divide 3 nodes");
    assert!(matches!(error, Error::Usage(_)) && error.to_string().contains("--tp 2"), "{error}");
}

#[tokio::test]
async fn a_cpu_head_leaves_the_layers_to_its_workers_split_by_their_gtt() {
    let cluster = nodes(&["node1", "node2", "node3"]);
    for (node, gtt) in cluster.iter().zip([64, 96, 48]) {
        with_gtt(node, gtt);
    }
    let dir = tempfile::tempdir().expect("a directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    // The head's llama-server as a CPU build answers `--list-devices`.
    let head = Scripted {
        inner: &cluster[0].node,
        answer: Box::new(|call| match call {
            NodeCall::Exec(exec) if exec.argv == ["llama-server", "--list-devices"] => answer(ExecReport {
                exit_code: 0,
                stdout: "Available devices:\n  (none)\n".into(),
                stderr: String::new(),
            }),
            _ => None,
        }),
    };
    let nodes: Vec<&dyn Node> = vec![&head, &cluster[1].node, &cluster[2].node];
    let asked =
        FitRequest { asked: FitAsk { max_model_len: Some(2048), ..FitAsk::default() }, ..request(LLAMA_CPP, &gguf) };
    let report = fit_model(&nodes, &asked).await.expect("a plan");
    assert_eq!(report.head_gpu, Some(false));
    let plan = report.plan.as_ref().expect("sized");
    let devices: Vec<&str> = plan.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(devices, ["node2", "node3"], "the workers' devices alone");
    // 96 - 1 - 4 - 1 (runtime) = 90 GiB and 48 - 1 - 4 - 1 = 42 GiB, in MiB.
    let split = plan.engine_args.windows(2).find(|w| w[0] == "--tensor-split").map(|w| w[1].clone());
    assert_eq!(split.as_deref(), Some("92160,43008"));
    assert!(plan.engine_args.ends_with(&["-c".to_string(), "2048".to_string()]), "{:?}", plan.engine_args);
}

#[tokio::test]
async fn a_head_whose_toolbox_cannot_be_asked_is_assumed_to_have_its_gpu() {
    let cluster = nodes(&["node1", "node2"]);
    cluster.iter().for_each(|node| with_gtt(node, 120));
    let dir = tempfile::tempdir().expect("a directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    let report = fit_model(&as_nodes(&cluster), &request(LLAMA_CPP, &gguf)).await.expect("a plan");
    assert_eq!(report.head_gpu, None);
    assert!(report.notes[0].contains("toolbox llama was not asked"), "{:?}", report.notes);
    let devices: Vec<&str> = report.plan.as_ref().expect("sized").nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(devices, ["node2", "node1"]);
}

#[tokio::test]
async fn a_hybrid_model_is_said_so_and_a_node_without_gtt_is_named() {
    let cluster = nodes(&["node1", "node2"]);
    with_gtt(&cluster[0], 120);
    let model = tempfile::tempdir().expect("a model directory");
    std::fs::write(model.path().join("config.json"), fixtures::QWEN3_NEXT_80B).expect("config.json");
    let error = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect_err("node2 has no GTT");
    let text = error.to_string();
    assert!(text.contains("node2") && text.contains("mem_info_gtt_total") && !text.contains("node1:"), "{text}");
    with_gtt(&cluster[1], 120);
    let report = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect("a report");
    assert!(report.plan.is_none() && !report.refused());
    assert!(report.cannot_size.as_deref().is_some_and(|why| why.starts_with("Qwen3NextForCausalLM")), "{report:?}");
}
