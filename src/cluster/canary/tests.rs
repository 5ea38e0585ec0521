//! The canary's decision on measured results, and its rollback on in-process nodes over
//! in-memory engines: every node back on the previous image through the refresh pipeline, or
//! none. (`tests/testsuite/canary.rs` runs the whole canary over ssh with llama.cpp.)

use super::*;
use crate::bench::result::tests::result;
use crate::cluster::testing::{as_nodes, digest, failing, nodes, publish, TestNode, REPO};
use crate::container_engine::fake::RecordedCall;
use crate::error::ErrorKind;
use crate::node::call::NodeCall;
use crate::reporter::Silent;

const NAME: &str = "vllm";

fn request() -> RefreshRequest {
    RefreshRequest::for_tests(NAME, &format!("{REPO}:latest"))
}

fn spread_off() -> SpreadSettings {
    SpreadSettings { enabled: false, ..SpreadSettings::default() }
}

fn baseline(throughput: f64) -> Baseline {
    Baseline { id: "0123abcd".into(), image: "sha256:old".into(), output_throughput: throughput, before_swap: true }
}

fn measured(throughput: f64) -> BenchResult {
    result("sha256:new", "2026-11-24T10:00:00Z", &[(BENCH_CONCURRENCY, throughput)])
}

#[test]
fn the_gate_decides_first_then_the_ratio_to_the_previous_image() {
    let failed = judge(Some("the gate failed: prompt \"p1\"".into()), &measured(100.0), Some(&baseline(50.0)), 0.9);
    assert_eq!(failed, Judgement { ratio: None, reason: Some("the gate failed: prompt \"p1\"".into()) });

    let kept = judge(None, &measured(95.0), Some(&baseline(100.0)), 0.9);
    assert_eq!(kept, Judgement { ratio: Some(0.95), reason: None });

    let slow = judge(None, &measured(20.0), Some(&baseline(100.0)), 0.9);
    assert_eq!(slow.ratio, Some(0.2));
    let reason = slow.reason.expect("refused");
    for part in [
        "20.0 on image sha256:new",
        "0.20 of the 100.0 on image sha256:old",
        "result 0123abcd, measured just before the swap",
        "--min-ratio 0.9",
    ] {
        assert!(reason.contains(part), "{part:?} in {reason}");
    }
}

#[test]
fn without_a_previous_result_the_gate_alone_decides() {
    assert_eq!(judge(None, &measured(1.0), None, 0.9), Judgement { ratio: None, reason: None });
    // A baseline that measured nothing holds nothing back.
    assert_eq!(judge(None, &measured(1.0), Some(&baseline(0.0)), 0.9).reason, None);
}

/// Every node on version 1, then refreshed to version 2: what the canary's swap leaves.
async fn swapped_to_2() -> (Vec<TestNode>, String) {
    let cluster = nodes(&["a", "b", "c"]);
    publish(&cluster, '1');
    refresh_nodes(&as_nodes(&cluster), &request(), &spread_off(), &Silent).await.unwrap();
    publish(&cluster, '2');
    let forward = refresh_nodes(&as_nodes(&cluster), &request(), &spread_off(), &Silent).await.unwrap();
    let previous = forward.nodes[0].report.previous.clone().expect("the image it replaced");
    assert_eq!(previous, format!("{REPO}@{}", digest('1')));
    (cluster, previous)
}

fn images(cluster: &[TestNode]) -> Vec<Option<String>> {
    cluster.iter().map(|test| test.runs(NAME)).collect()
}

#[tokio::test]
async fn the_rollback_takes_every_node_back_without_pulling() {
    let (cluster, previous) = swapped_to_2().await;
    let pulls = |test: &TestNode| test.engine.calls().iter().filter(|c| matches!(c, RecordedCall::Pull(_))).count();
    let before: Vec<usize> = cluster.iter().map(pulls).collect();
    let back = roll_back(&as_nodes(&cluster), &request(), &previous, &spread_off(), &Silent).await.unwrap();
    assert_eq!(back.outcome, ClusterOutcome::Refreshed);
    assert_eq!(back.pinned, previous);
    assert_eq!(images(&cluster), vec![Some("sha256:id1".to_string()); 3]);
    assert_eq!(cluster.iter().map(pulls).collect::<Vec<_>>(), before, "the previous image was on every node");
}

#[tokio::test]
async fn a_rollback_one_node_cannot_stage_leaves_every_node_on_the_new_image() {
    let (cluster, previous) = swapped_to_2().await;
    let lost = failing(&cluster[2].node, |call| matches!(call, NodeCall::Refresh(_)));
    let error = roll_back(&[&cluster[0].node, &cluster[1].node, &lost], &request(), &previous, &spread_off(), &Silent)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Nodes, "{error}");
    assert!(error.to_string().contains("c: the connection was lost. Every node is as it was"), "{error}");
    assert_eq!(images(&cluster), vec![Some("sha256:id2".to_string()); 3], "all or nothing: none went back");
}

#[tokio::test]
async fn a_dry_run_or_a_ratio_of_nothing_is_refused_before_any_change() {
    let cluster = nodes(&["a", "b"]);
    publish(&cluster, '1');
    let store = BenchStore::at(tempfile::tempdir().unwrap().path());
    let launch = llama_launch("/models/tiny.gguf");
    let dry = RefreshRequest { dry_run: true, ..request() };
    let canary = CanaryRequest { launch: launch.clone(), min_ratio: DEFAULT_MIN_RATIO };
    let error = canary_refresh(&as_nodes(&cluster), &dry, &spread_off(), &canary, &store, &Silent).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Usage, "{error}");
    for min_ratio in [0.0, -1.0, f64::NAN] {
        let canary = CanaryRequest { launch: launch.clone(), min_ratio };
        let error =
            canary_refresh(&as_nodes(&cluster), &request(), &spread_off(), &canary, &store, &Silent).await.unwrap_err();
        assert!(error.to_string().contains("--min-ratio"), "{error}");
    }
    assert_eq!(images(&cluster), vec![None, None], "nothing was refreshed");
}

#[test]
fn what_served_before_is_relaunched_with_its_engine_and_executor() {
    let head = std::net::Ipv4Addr::new(192, 168, 2, 1);
    let record = |engine, backend| {
        let mut record = ServingRecord::new(
            "m",
            NAME,
            "m",
            "m",
            engine,
            backend,
            crate::serving::record::Role::Head,
            2,
            8001,
            head,
            head,
            "http://192.168.2.1:8001/v1",
        );
        record.pp = Some(2);
        record.on = vec!["b".into(), "c".into()];
        record.router_listen = Some("0.0.0.0:8100".parse().unwrap());
        record.extra = EngineArgs::new(vec!["--max-model-len".into(), "4096".into()]);
        record.env = [("VLLM_LOGGING_LEVEL".to_string(), "DEBUG".to_string())].into();
        record
    };
    let canary = llama_launch("/models/canary.gguf");
    let cluster = nodes(&["a", "b", "c"]);
    let cluster = as_nodes(&cluster);
    use crate::serving::engine::Backend;
    use crate::serving::engine_args::EngineArgs;
    use crate::serving::{llama::LLAMA_CPP, vllm::VLLM};
    let llama = relaunch(&record(LLAMA_CPP, Backend::Rpc), &canary, &cluster);
    assert_eq!((llama.engine, llama.backend, llama.port, llama.replace), (LLAMA_CPP, None, Some(8100), true));
    assert_eq!((llama.service.as_str(), llama.on.as_slice()), ("m", ["b".to_string(), "c".to_string()].as_slice()));
    let mut older = record(LLAMA_CPP, Backend::Rpc);
    (older.on, older.router_listen) = (Vec::new(), None);
    let older = relaunch(&older, &canary, &cluster);
    assert_eq!((older.on.as_slice(), older.port), (["a".to_string(), "b".to_string()].as_slice(), None));
    let vllm = relaunch(&record(VLLM, Backend::Ray), &canary, &cluster);
    assert_eq!((vllm.engine, vllm.backend, vllm.pp), (VLLM, Some(Backend::Ray), Some(2)));
    assert_eq!(vllm.model, "m");
    let mut from_file = record(LLAMA_CPP, Backend::Rpc);
    (from_file.model, from_file.file) = ("org/repo-GGUF".into(), Some("q8/m-Q8_0.gguf".into()));
    let pick = crate::model::gguf_pick::GgufPick::File("q8/m-Q8_0.gguf".into());
    assert!(
        matches!(relaunch(&from_file, &canary, &cluster).source, ModelSource::HubGguf { pick: p, .. } if p == pick)
    );
    assert_eq!(
        (vllm.extra.words(), vllm.env.get("VLLM_LOGGING_LEVEL")),
        (["--max-model-len", "4096"].map(String::from).as_slice(), Some(&"DEBUG".to_string())),
        "as it served: not the canary's"
    );
    // The graph capture as the operator asked it at the launch, whatever the canary's launch asks.
    let mut captured = record(VLLM, Backend::Mp);
    captured.cuda_graphs = true;
    assert!(relaunch(&captured, &canary, &cluster).cuda_graphs, "--cuda-graphs kept");
    let asks = LaunchRequest { cuda_graphs: true, ..canary.clone() };
    assert!(!relaunch(&record(VLLM, Backend::Mp), &asks, &cluster).cuda_graphs, "not asked at the launch");
}

/// A llama.cpp launch of `model` on the test toolbox, as the canary asks for one.
pub(crate) fn llama_launch(model: &str) -> LaunchRequest {
    LaunchRequest {
        engine: crate::serving::llama::LLAMA_CPP,
        toolbox: NAME.into(),
        service: ServiceName::parse(model).unwrap(),
        on: Vec::new(),
        model: model.into(),
        source: ModelSource::of(model),
        backend: None,
        tp: None,
        pp: None,
        host: None,
        port: None,
        timeout: std::time::Duration::from_secs(1),
        replace: false,
        dry_run: false,
        extra: Default::default(),
        env: Default::default(),
        hf_token: None,
        api_key: None,
        hub_env: Default::default(),
        cuda_graphs: false,
        fresh_compile_cache: false,
        keep_free_gib: 0,
        recipes: None,
        pinned: None,
        on_demand: None,
    }
}
