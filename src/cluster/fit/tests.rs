use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::cluster::testing::{answer, as_nodes, nodes, Scripted, TestNode};
use crate::container_engine::{ContainerEngine, ContainerInfo};
use crate::model::shape::fixtures::{self, write_checkpoint};
use crate::node::call::NodeCall;
use crate::serving::fit::{FitAsk, LayoutOutcome, Rule};
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

/// `node`'s toolbox `name`, running, its files this machine's: a model is read in it as its engine
/// would read it.
fn with_toolbox(node: &TestNode, name: &str) {
    node.engine.add_container(ContainerInfo {
        id: format!("{name}-id"),
        name: name.into(),
        running: true,
        ..Default::default()
    });
    node.engine.exec_here();
}

fn request(engine: crate::serving::engine::EngineRef, model: &Path) -> FitRequest {
    let model = model.display().to_string();
    FitRequest {
        engine,
        source: engine.source(&model, None).expect("a source"),
        model,
        toolbox: engine.profile().toolbox.default_toolbox.into(),
        revision: None,
        tp: None,
        pp: None,
        asked: FitAsk::default(),
        reserve_gib: 4,
        keep_free_gib: 0,
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
    with_toolbox(&cluster[0], "vllm");
    let model = tempfile::tempdir().expect("a model directory");
    let written = write_checkpoint(fixtures::QWEN3_32B, model.path(), 4 << 30);
    let report = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect("a plan");
    assert_eq!(report.read.toolbox.as_deref(), Some("vllm"), "read where vLLM reads it");
    assert!(report.read.bytes_read < 2_000_000 && report.read.bytes_read > written.header_bytes, "{:?}", report.read);
    let fit = report.fit.as_ref().expect("sized");
    // The GTT less the 1 GiB in use less the 4 GiB reserve: what HIP's carve-out says plays no part.
    let usable: Vec<u64> = fit.nodes.iter().map(|n| n.usable_bytes).collect();
    assert_eq!(usable, [119 * GIB, 119 * GIB, 95 * GIB]);
    let tp3 = fit.layout(3, 1, 1, false).expect("TP 3 is listed");
    assert!(
        matches!(&tp3.outcome, LayoutOutcome::Breaks { rules, .. } if rules[0].rule == Rule::AttentionHeads),
        "{tp3:?}"
    );
    // No RoCE and no Thunderbolt in these trees: Ethernet, where the layers are split.
    let chosen = fit.chosen_layout().expect("a layout");
    assert_eq!((chosen.tp, chosen.pp), (1, 3));
    assert!(fit.fewer_nodes.as_deref().is_some_and(|f| f.contains("fits on 1 of the 3")), "{:?}", fit.fewer_nodes);
    assert!(!report.refused() && report.head_gpu.is_none() && report.notes.is_empty(), "{report:?}");
}

#[tokio::test]
async fn a_layout_asked_that_the_model_forbids_is_refused_in_the_plan() {
    let cluster = nodes(&["node1", "node2", "node3"]);
    cluster.iter().for_each(|node| with_gtt(node, 124));
    with_toolbox(&cluster[0], "vllm");
    let model = tempfile::tempdir().expect("a model directory");
    write_checkpoint(fixtures::QWEN3_32B, model.path(), 4 << 30);
    let asked = FitRequest {
        tp: Some(3),
        asked: FitAsk { max_model_len: Some(8192), ..FitAsk::default() },
        ..request(VLLM, model.path())
    };
    let report = fit_model(&as_nodes(&cluster), &asked).await.expect("a plan");
    let refusal = report.fit.as_ref().and_then(|p| p.refusal.clone()).expect("refused");
    assert!(refusal.asked_against_the_model() && refusal.message.contains("TP 3 × PP 1, as asked"), "{refusal:?}");
    assert!(report.refused());
    let wrong = FitRequest { tp: Some(2), ..request(VLLM, model.path()) };
    let error = fit_model(&as_nodes(&cluster), &wrong).await.expect_err("2 does not divide 3 nodes");
    assert!(matches!(&error, NoFit::Failed(Error::Usage(text)) if text.contains("--tp 2")), "{error:?}");
}

#[tokio::test]
async fn a_cpu_head_leaves_the_layers_to_its_workers_split_by_their_gtt() {
    let cluster = nodes(&["node1", "node2", "node3"]);
    for (node, gtt) in cluster.iter().zip([64, 96, 48]) {
        with_gtt(node, gtt);
    }
    with_toolbox(&cluster[0], "llama");
    let dir = tempfile::tempdir().expect("a directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    // The head's llama-server as a CPU build answers `--list-devices`.
    let head = Scripted {
        inner: &cluster[0].node,
        answer: Box::new(|call| match call {
            NodeCall::Exec(exec) if exec.argv == crate::serving::fit::llama_build::QUESTION => answer(ExecReport {
                exit_code: 0,
                stdout: "version: 0.5.0-dev (build 0, commit unknown)\n--- strix: list-devices\nAvailable devices:\n  \
                         (none)\n--- strix: rpc-server --help\n  -d, --device <dev1,dev2,...>\n  -H, --host HOST\n"
                    .into(),
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
    let fit = report.fit.as_ref().expect("sized");
    let devices: Vec<&str> = fit.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(devices, ["node2", "node3"], "the workers' devices alone");
    // 96 - 1 - 4 - 1 (runtime) = 90 GiB and 48 - 1 - 4 - 1 = 42 GiB, in MiB.
    let split = fit.engine_args.windows(2).find(|w| w[0] == "--tensor-split").map(|w| w[1].clone());
    assert_eq!(split.as_deref(), Some("92160,43008"));
    let devices = fit.engine_args.windows(2).find(|w| w[0] == "--device").map(|w| w[1].clone());
    assert_eq!(devices.as_deref(), Some("RPC0,RPC1"), "the workers' devices named, as many as the split's");
    assert!(fit.engine_args.ends_with(&["-c".to_string(), "2048".to_string()]), "{:?}", fit.engine_args);
}

#[tokio::test]
async fn a_head_whose_toolbox_cannot_be_asked_is_assumed_to_have_its_gpu() {
    let cluster = nodes(&["node1", "node2"]);
    cluster.iter().for_each(|node| with_gtt(node, 120));
    with_toolbox(&cluster[0], "llama");
    let dir = tempfile::tempdir().expect("a directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    let report = fit_model(&as_nodes(&cluster), &request(LLAMA_CPP, &gguf)).await.expect("a plan");
    assert_eq!(report.head_gpu, None);
    assert!(report.notes[0].contains("llama-server could not say which GPUs"), "{:?}", report.notes);
    let fit = report.fit.as_ref().expect("sized");
    assert!(!fit.engine_args.contains(&"--device".to_string()), "no names known: {:?}", fit.engine_args);
    assert!(fit.notes.iter().any(|n| n.contains("own device order")), "{:?}", fit.notes);
    let devices: Vec<&str> = report.fit.as_ref().expect("sized").nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(devices, ["node2", "node1"]);
}

#[tokio::test]
async fn a_hybrid_model_is_said_so_and_a_node_without_gtt_is_named() {
    let cluster = nodes(&["node1", "node2"]);
    with_gtt(&cluster[0], 120);
    with_toolbox(&cluster[0], "vllm");
    let model = tempfile::tempdir().expect("a model directory");
    std::fs::write(model.path().join("config.json"), fixtures::QWEN3_NEXT_80B).expect("config.json");
    let error = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect_err("node2 has no GTT");
    assert!(matches!(error, NoFit::Failed(_)), "a node's memory, not the model: {error:?}");
    let text = Error::from(error).to_string();
    assert!(text.contains("node2") && text.contains("mem_info_gtt_total") && !text.contains("node1:"), "{text}");
    with_gtt(&cluster[1], 120);
    let report = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect("a report");
    assert!(report.fit.is_none() && !report.refused());
    assert!(report.cannot_size.as_deref().is_some_and(|why| why.starts_with("Qwen3NextForCausalLM")), "{report:?}");
}

#[tokio::test]
async fn the_images_labels_say_which_vllm_sizes_the_cache() {
    use crate::container_engine::ContainerInfo;
    use crate::labels;
    // A node whose toolbox vllm's image carries `image_labels` beside the tool's own.
    let node_with = |image_labels: &[(&str, &str)]| {
        let cluster = nodes(&["node1"]);
        with_gtt(&cluster[0], 8);
        let mut labels: BTreeMap<String, String> = [(labels::MANAGED.to_string(), "true".to_string())].into();
        labels.extend(image_labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        cluster[0].engine.add_container(ContainerInfo {
            id: "vllm-id".into(),
            name: "vllm".into(),
            running: true,
            labels,
            ..ContainerInfo::default()
        });
        cluster[0].engine.exec_here();
        cluster
    };
    let model = tempfile::tempdir().expect("a model directory");
    write_checkpoint(fixtures::TINY_LLAMA_4L, model.path(), 4 << 30);
    // An image without the vLLM label: ROCm's rules assumed, and said.
    let cluster = node_with(&[]);
    let report = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect("a plan");
    let notes = &report.fit.as_ref().expect("sized").notes;
    assert_eq!(
        notes[0],
        "vLLM 0.32.0 on ROCm assumed: the image of the head's toolbox vllm has no io.github.strix-toolbox.vllm.version \
         label: blocks of 16 tokens"
    );
    // The toolbox's image says vLLM 0.32.0 on CPU: blocks of 128.
    let cluster = node_with(&[(labels::VLLM_VERSION, "0.32.0"), (labels::DEVICE, "cpu")]);
    let report = fit_model(&as_nodes(&cluster), &request(VLLM, model.path())).await.expect("a plan");
    let fit = report.fit.as_ref().expect("sized");
    assert_eq!(fit.notes[0], "vLLM 0.32.0 on CPU, as the image's labels say: blocks of 128 tokens");
    let figures = fit.chosen_layout().and_then(|l| l.fits()).expect("it fits");
    assert_eq!(figures.cache.as_ref().map(|c| c.block_size), Some(128));
    // --keep-free 1: a GiB fewer for the cache (8 GiB less 1 in use, 4 reserved, 1 kept: 2 GiB).
    let keeping = FitRequest { keep_free_gib: 1, ..request(VLLM, model.path()) };
    let kept = fit_model(&as_nodes(&cluster), &keeping).await.expect("a plan");
    assert_eq!(kept.fit.as_ref().expect("sized").nodes[0].usable_bytes, 2 * GIB);
}

#[tokio::test]
async fn a_model_its_toolbox_cannot_read_is_unread_whatever_the_host_has() {
    let cluster = nodes(&["node1", "node2"]);
    cluster.iter().for_each(|node| with_gtt(node, 120));
    let dir = tempfile::tempdir().expect("a directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    // The file is on the host, but there is no toolbox to read it in: the engine could not either.
    let error = fit_model(&as_nodes(&cluster), &request(LLAMA_CPP, &gguf)).await.expect_err("no toolbox");
    assert!(
        matches!(&error, NoFit::Unread(Error::Toolbox { message, .. }) if message.contains("no toolbox named llama")),
        "{error:?}"
    );
    // In a toolbox, a path it does not have is named, with where to look.
    with_toolbox(&cluster[0], "llama");
    let missing = dir.path().join("Qwen3-235B-A22B-Q4_K_M-00001-of-00003.gguf");
    let error = fit_model(&as_nodes(&cluster), &request(LLAMA_CPP, &missing)).await.expect_err("no such file");
    let NoFit::Unread(error) = error else { panic!("unread: {error:?}") };
    let text = error.to_string();
    assert!(
        text.contains("in toolbox llama") && text.contains("there is no file") && text.contains("00001-of-00003"),
        "{text}"
    );
    assert!(error.fix().is_some_and(|fix| fix.contains("strix-toolbox enter llama -- ls -l")), "{text}");
    assert_eq!(error.exit_code(), 1, "a model that is not there is a failure, not a usage error");
    // A directory without config.json, and a dry run whose toolbox is stopped: unread, and said why.
    let empty = tempfile::tempdir().expect("a directory");
    with_toolbox(&cluster[0], "vllm");
    let error = fit_model(&as_nodes(&cluster), &request(VLLM, empty.path())).await.expect_err("no config.json");
    assert!(matches!(&error, NoFit::Unread(e) if e.to_string().contains("no config.json")), "{error:?}");
    cluster[0].engine.container_stop("vllm").await.expect("stopped");
    let dry = FitRequest { ask_devices: false, ..request(VLLM, empty.path()) };
    let error = fit_model(&as_nodes(&cluster), &dry).await.expect_err("not running");
    assert!(
        matches!(&error, NoFit::Unread(e) if e.to_string().contains("not running (a dry run starts none)")),
        "{error:?}"
    );
    assert!(cluster[0].engine.container("vllm").is_some_and(|c| !c.running), "nothing started it");
}
