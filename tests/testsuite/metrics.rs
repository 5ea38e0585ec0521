//! The metrics and the watch's view of an engine, against real components: a real Prometheus
//! scrapes the endpoint serving two fake nodes' telemetry (the fixtures' sysfs files) and a real
//! llama-server's `/metrics` relabelled, and its API holds every node's series; `promtool check
//! metrics` finds nothing in the exposition but the engines' own colon names. The vLLM stand-in
//! answers `/metrics` as vLLM does and stalls on its switch, and the watch finds the stall from
//! its real scrapes and probes (on a virtual clock).
//!
//! These tests drive the library's `metrics` and `watch` modules (and the watch's own probe) with
//! the testsuite's real servers (llama-server, the tiny model, the stand-in, Prometheus); the
//! binary's `cluster watch --metrics` and `cluster metrics --listen` are tested end to end in
//! watch.rs and top.rs (run by llama_launch.rs).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use strix_toolbox::bench::token_probe::token_probe;
use strix_toolbox::metrics::endpoint::serve;
use strix_toolbox::metrics::ScrapeError;
use strix_toolbox::metrics::{
    merge, read_node_telemetry, relabel, render, scrape, sum_of, telemetry_families, MetricType, NodeReading,
};
use strix_toolbox::watch::{
    watch_families, Decision, Fault, LookOutcome, Moment, Observation, ProbeOutcome, Progress, Start, State,
    WatchPolicy, Watcher, LLAMA_CPP_PROGRESS, VLLM_PROGRESS,
};

use crate::support::host_tree::materialize;
use crate::support::http;
use crate::support::llama_server::LlamaServer;
use crate::support::prometheus::{key, promtool_remarks_only_the_engines_colon_names, series, Prometheus};
use crate::support::stand_in_vllm::StandInVllm;
use crate::support::tiny_llama::TinyLlama;
use crate::support::wait_until;

/// What the endpoint serves: both nodes' telemetry, the head's llama-server relabelled, the
/// watch's own families; a scrape that failed is a comment line saying why.
async fn exposition(roots: &[(&'static str, PathBuf)], llama: SocketAddr) -> String {
    let telemetry: Vec<_> = roots.iter().map(|(node, root)| (*node, read_node_telemetry(root).ok())).collect();
    let readings: Vec<NodeReading> =
        telemetry.iter().map(|(node, telemetry)| NodeReading { node, telemetry: telemetry.as_ref() }).collect();
    let (mut engine, failure) = match scrape(llama, None, Duration::from_secs(10)).await {
        Ok(families) => (families, String::new()),
        Err(error) => (Vec::new(), format!("# llama-server: {error}\n")),
    };
    relabel(&mut engine, &[("node", "strix1"), ("model", "tiny-llama")]);
    let watcher = Watcher::new(WatchPolicy::default(), Start::Serving);
    let merged = merge([telemetry_families(&readings), engine, watch_families("tiny", "tiny-llama", &watcher)]);
    let left_out: String = merged.left_out.iter().map(|why| format!("# left out: {why}\n")).collect();
    format!("{failure}{left_out}{}", render(&merged.families))
}

#[test]
fn prometheus_holds_every_nodes_telemetry_and_the_engines_metrics_relabelled() {
    let strix1 = materialize("strix-e810-healthy");
    let strix2 = materialize("strix-roce-down-thunderbolt");
    let llama = LlamaServer::builder(&TinyLlama::default().gguf()).args(&["--metrics"]).start();
    let answer = llama.greedy("Once upon a time", 8);
    let llama_address: SocketAddr = llama.url().trim_start_matches("http://").parse().unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let endpoint = listener.local_addr().unwrap();
    let roots = vec![("strix1", strix1.path().to_path_buf()), ("strix2", strix2.path().to_path_buf())];
    let provider = move || {
        let roots = roots.clone();
        async move { Ok(exposition(&roots, llama_address).await) }
    };
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let server = runtime.spawn(serve(listener, stopped, provider));

    let text = http::request(None, "GET", &format!("http://{endpoint}/metrics"), None, Duration::from_secs(30))
        .expect("GET /metrics")
        .body;
    assert!(!text.contains("# llama-server:") && !text.contains("# left out:"), "{text}");

    let prometheus = Prometheus::start(&[endpoint]);
    let ports = |name: &str| prometheus.query(name).map(|result| series(&result, &["node", "device", "port"]));
    wait_until("prometheus holding both nodes' RDMA counters", Duration::from_secs(120), || {
        ports("strix_rdma_port_transmit_bytes_total").is_ok_and(|ports| ports.len() == 3)
    });
    let sent = ports("strix_rdma_port_transmit_bytes_total").unwrap();
    let received = ports("strix_rdma_port_receive_bytes_total").unwrap();
    // irdma's ip4 and ip6 octets summed, in bytes, as the fixtures hold them.
    assert_eq!(sent[&key(&["strix1", "rocep194s0f0", "1"])], "812345678901", "{sent:?}\n{}", prometheus.log());
    assert_eq!(sent[&key(&["strix1", "rocep194s0f1", "1"])], "0");
    assert_eq!(sent[&key(&["strix2", "rocep194s0f0", "1"])], "1200");
    assert_eq!(received[&key(&["strix1", "rocep194s0f0", "1"])], "798765432109");
    let packets = ports("strix_rdma_port_receive_packets_total").unwrap();
    assert_eq!(packets[&key(&["strix2", "rocep194s0f0", "1"])], "34");

    let by = |name: &str, labels: &[&str]| series(&prometheus.query(name).unwrap(), labels);
    let used = by("strix_gpu_memory_used_bytes", &["node", "kind"]);
    assert_eq!(used[&key(&["strix1", "gtt"])], (1u64 << 30).to_string());
    assert_eq!(used[&key(&["strix2", "gtt"])], (2u64 << 30).to_string());
    assert_eq!(used[&key(&["strix2", "vram"])], (128u64 << 20).to_string());
    assert_eq!(by("strix_gpu_memory_total_bytes", &["node", "kind"])[&key(&["strix1", "gtt"])], "133143986176");
    assert_eq!(by("strix_gpu_busy_ratio", &["node", "card"])[&key(&["strix1", "card0"])], "0.37");
    assert_eq!(by("strix_gpu_power_watts", &["node"])[&key(&["strix2"])], "9");
    assert_eq!(by("strix_gpu_temperature_celsius", &["node"])[&key(&["strix1"])], "52");
    assert_eq!(
        by("strix_node_up", &["node"]),
        BTreeMap::from([(key(&["strix1"]), "1".into()), (key(&["strix2"]), "1".into())])
    );

    // The engine's own names, relabelled with its node and model; its counters as it counts them.
    let predicted = by("llamacpp:tokens_predicted_total", &["node", "model"]);
    assert_eq!(predicted, BTreeMap::from([(key(&["strix1", "tiny-llama"]), answer.completion_tokens.to_string())]));
    let decodes = by("llamacpp:n_decode_total", &["node", "model"]);
    assert!(decodes[&key(&["strix1", "tiny-llama"])].parse::<f64>().unwrap() >= 1.0, "{decodes:?}");
    assert_eq!(by("llamacpp:requests_processing", &["node"])[&key(&["strix1"])], "0");
    let states = by("strix_watch_state", &["service", "state"]);
    assert_eq!((states.len(), &states[&key(&["tiny", "serving"])]), (State::ALL.len(), &"1".to_string()));

    // promtool's lint of the exposition: only the engines' colon names (kept as their dashboards
    // know them) draw a remark; it does lint (llama.cpp's names are there to be remarked on).
    promtool_remarks_only_the_engines_colon_names(&text);

    stop.send(()).unwrap();
    runtime.block_on(server).unwrap();
}

/// One look of the watch at `at` (no nodes or ranks: the engine alone).
fn look(watcher: &mut Watcher, at: Moment, progress: Option<Progress>, probe: ProbeOutcome) -> LookOutcome {
    look_from(watcher, at, at, progress, probe)
}

/// A look begun at `began` and ended at `at` (a probe that waited its deadline).
fn look_from(
    watcher: &mut Watcher,
    began: Moment,
    at: Moment,
    progress: Option<Progress>,
    probe: ProbeOutcome,
) -> LookOutcome {
    watcher.observe(&Observation { began, at, paused: false, nodes: Vec::new(), ranks: Vec::new(), probe, progress })
}

#[test]
fn a_stopped_llama_server_is_found_stalled_within_two_intervals() {
    let llama = LlamaServer::builder(&TinyLlama::default().gguf()).args(&["--metrics"]).start();
    let address: SocketAddr = llama.url().trim_start_matches("http://").parse().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let read = || runtime.block_on(scrape(address, None, Duration::from_secs(2)));
    // The watch's own probe: one greedy token, asked at the engine's port with a deadline.
    let probe = |limit: Duration| runtime.block_on(token_probe(address, "tiny", None, limit));
    let interval = WatchPolicy::default().interval;
    let mut watcher = Watcher::new(WatchPolicy::default(), Start::Serving);

    let probed = probe(Duration::from_secs(60));
    let progress = LLAMA_CPP_PROGRESS.read(&read().expect("scrape llama-server"));
    assert!(progress.is_some_and(|progress| progress.generated >= 1.0), "{progress:?}");
    assert_eq!(
        look(&mut watcher, Moment(0), progress, probed),
        LookOutcome { state: State::Serving, action: Decision::Nothing, news: Vec::new() }
    );

    // SIGSTOP just after the look: the port still takes connections, nothing answers. The next
    // look begins an interval after it and ends when its probe's deadline runs out.
    // SAFETY: kill(2) on the test's own child.
    assert_eq!(unsafe { libc::kill(llama.pid() as i32, libc::SIGSTOP) }, 0);
    let fault_at = Moment(0).after(Duration::from_secs(1));
    let scraped = read();
    assert!(matches!(scraped, Err(ScrapeError::Silent(..))), "{scraped:?}");
    let probed = probe(Duration::from_secs(1));
    assert_eq!(probed, ProbeOutcome::TimedOut);
    let policy = WatchPolicy::default();
    let began = Moment(0).after(interval);
    let found = began.after(policy.probe_deadline());
    let step = look_from(&mut watcher, began, found, None, probed);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(llama.pid() as i32, libc::SIGCONT) }, 0);
    assert_eq!(step.state, State::Stalled, "{step:?}");
    assert_eq!(step.action, Decision::Relaunch(Fault::Stalled { quiet_seconds: 60, running: None }));
    assert!(found.since(fault_at) <= 2 * interval, "found {:?} after the stop", found.since(fault_at));
    // Continued, it answers again: the probes it held are answered, the counter moves.
    let progress = LLAMA_CPP_PROGRESS.read(&read().expect("scrape llama-server once continued"));
    assert!(progress.is_some(), "{}", llama.log());
}

/// A completion from the stand-in, within `limit`.
fn complete(url: &str, prompt: &str, max_tokens: u32, stream: bool, limit: Duration) -> Result<http::Response, String> {
    let body = json!({"model": "qwen", "prompt": prompt, "max_tokens": max_tokens, "stream": stream});
    http::request(None, "POST", &format!("{url}/v1/completions"), Some(&body.to_string()), limit)
}

#[test]
fn the_vllm_stand_in_counts_what_it_served_and_the_watch_finds_its_stall() {
    let dir = tempfile::tempdir().unwrap();
    let stall = dir.path().join("stall");
    let vllm = StandInVllm::start("Qwen/Qwen3-0.6B", "qwen", &[("STANDIN_STALL_FILE", stall.to_str().unwrap())]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let read = || runtime.block_on(scrape(vllm.address(), None, Duration::from_secs(10))).expect("scrape the stand-in");

    // vLLM's names, types, help and labels (vllm/v1/metrics/loggers.py, as prometheus_client writes them).
    let families = read();
    for (name, kind, help) in [
        ("vllm:num_requests_running", MetricType::Gauge, "Number of requests in model execution batches."),
        ("vllm:num_requests_waiting", MetricType::Gauge, "Number of requests waiting to be processed."),
        ("vllm:kv_cache_usage_perc", MetricType::Gauge, "KV-cache usage. 1 means 100 percent usage."),
        ("vllm:prompt_tokens_total", MetricType::Counter, "Number of prefill tokens processed."),
        ("vllm:generation_tokens_total", MetricType::Counter, "Number of generation tokens processed."),
    ] {
        let family = families.iter().find(|family| family.name == name).unwrap_or_else(|| panic!("no {name}"));
        assert_eq!((family.kind, family.help.as_deref()), (kind, Some(help)), "{name}");
        let labels = &family.samples[0].labels;
        assert_eq!(labels, &[("engine".to_string(), "0".to_string()), ("model_name".to_string(), "qwen".to_string())]);
    }
    assert_eq!(VLLM_PROGRESS.read(&families), Some(Progress { generated: 0.0, running: 0.0 }));

    // What it served, counted: the BOS and three words in, 5 tokens out; then 3 more streamed.
    assert_eq!(complete(&vllm.url(), "the harbour town", 5, false, Duration::from_secs(30)).unwrap().status, 200);
    assert_eq!(complete(&vllm.url(), "salt", 3, true, Duration::from_secs(30)).unwrap().status, 200);
    let families = read();
    assert_eq!(sum_of(&families, "vllm:prompt_tokens_total"), Some(6.0));
    let before = VLLM_PROGRESS.read(&families).unwrap();
    assert_eq!(before, Progress { generated: 8.0, running: 0.0 });

    // The watch: a healthy look, then the stall switch.
    let interval = WatchPolicy::default().interval;
    let mut watcher = Watcher::new(WatchPolicy::default(), Start::Serving);
    assert_eq!(look(&mut watcher, Moment(0), Some(before), ProbeOutcome::Passed).action, Decision::Nothing);
    std::fs::write(&stall, "").unwrap();
    let url = vllm.url();
    let stuck = std::thread::spawn(move || complete(&url, "the quay", 5, false, Duration::from_secs(120)));
    let running = |count: f64| VLLM_PROGRESS.read(&read()).is_some_and(|progress| progress.running == count);
    wait_until("the stalled request counted as running", Duration::from_secs(60), || running(1.0));

    // Stalled as the real deadlock: the port takes connections, /health answers, no token comes.
    let health = http::request(None, "GET", &format!("{}/health", vllm.url()), None, Duration::from_secs(10));
    assert_eq!(health.map(|response| response.status), Ok(200));
    let ask = || runtime.block_on(token_probe(vllm.address(), "qwen", None, Duration::from_secs(1)));
    let progress = VLLM_PROGRESS.read(&read());
    assert_eq!(progress, Some(Progress { generated: 8.0, running: 1.0 }));
    let first = look(&mut watcher, Moment(0).after(interval), progress, ask());
    assert_eq!(first.state, State::Serving, "30 s without a token: not yet");
    wait_until("the unanswered probe counted as running", Duration::from_secs(60), || running(2.0));
    let progress = VLLM_PROGRESS.read(&read());
    let second = look(&mut watcher, Moment(0).after(2 * interval), progress, ask());
    assert_eq!(second.state, State::Stalled, "{second:?}");
    assert_eq!(second.action, Decision::Relaunch(Fault::Stalled { quiet_seconds: 60, running: Some(2.0) }));

    // The switch off: the requests go on and the counter moves.
    std::fs::remove_file(&stall).unwrap();
    let answered = stuck.join().unwrap().unwrap_or_else(|error| panic!("{error}\n{}", vllm.log()));
    assert_eq!(answered.status, 200, "{}", answered.body);
    wait_until("every stalled request done", Duration::from_secs(60), || running(0.0));
    let after = VLLM_PROGRESS.read(&read()).unwrap();
    assert_eq!(after.generated, 8.0 + 5.0 + 1.0 + 1.0, "the stuck request's 5 tokens and both probes' one");
}
