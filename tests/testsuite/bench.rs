//! `bench` against a real inference engine: llama.cpp's `llama-server` on loopback serving the
//! tiny llama model (support/llama_server.rs, support/tiny_llama.rs), through the CLI as a user
//! runs it (`bench --endpoint`), its results in a private XDG state directory; and the gate
//! against the vLLM stand-in (support/stand_in_vllm.rs), whose answers can part at a near-tie.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::support::cli::strix;
use crate::support::http;
use crate::support::llama_server::LlamaServer;
use crate::support::stand_in_vllm::StandInVllm;
use crate::support::tiny_llama::TinyLlama;

/// `strix-toolbox --json bench --endpoint URL --server llama.cpp --gguf MODEL ARGS…`, its results
/// kept under `state`.
fn bench(state: &Path, server: &LlamaServer, model: &Path, args: &[&str]) -> (Output, Value) {
    let output = strix()
        .env("XDG_STATE_HOME", state)
        .env_remove("STRIX_API_KEY")
        .args(["--json", "bench", "--endpoint", &server.url(), "--server", "llama.cpp", "--gguf"])
        .arg(model)
        .args(args)
        .output()
        .expect("run strix-toolbox bench");
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not a JSON report ({error}): {}\n{}\n--- llama-server log ---\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            server.log()
        )
    });
    (output, report)
}

/// `strix-toolbox --json bench SUBCOMMAND…` on the store under `state`.
fn store(state: &Path, args: &[&str]) -> Value {
    let output = strix().env("XDG_STATE_HOME", state).arg("--json").arg("bench").args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// The server's own count of the tokens it generated (`--metrics`).
fn tokens_predicted(server: &LlamaServer) -> f64 {
    let metrics = http::request(None, "GET", &format!("{}/metrics", server.url()), None, Duration::from_secs(10))
        .expect("GET /metrics");
    let line = metrics
        .body
        .lines()
        .find(|line| line.starts_with("llamacpp:tokens_predicted_total"))
        .unwrap_or_else(|| panic!("no llamacpp:tokens_predicted_total in /metrics:\n{}", metrics.body));
    line.split_whitespace().last().unwrap().parse().unwrap()
}

/// `(stroke width, point count)` of every polyline of the SVG.
fn polylines(svg: &str) -> Vec<(String, usize)> {
    svg.split("<polyline")
        .skip(1)
        .map(|element| {
            let attribute =
                |name: &str| element.split(&format!(" {name}=\"")).nth(1).unwrap().split('"').next().unwrap();
            (attribute("stroke-width").to_string(), attribute("points").split_whitespace().count())
        })
        .collect()
}

#[test]
fn the_figures_are_positive_and_add_up() {
    let model = TinyLlama::default().gguf();
    let server = LlamaServer::builder(&model).args(&["--parallel", "4", "--metrics"]).start();
    let state = tempfile::tempdir().unwrap();
    let plot = state.path().join("plot.svg");
    let before = tokens_predicted(&server);
    let (output, report) = bench(
        state.path(),
        &server,
        &model,
        &[
            "--concurrency",
            "1,4",
            "--requests",
            "8",
            "--input-len",
            "48",
            "--output-len",
            "16",
            "--plot",
            plot.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result = &report["result"];
    let levels = result["levels"].as_array().unwrap();
    assert_eq!(levels.iter().map(|level| level["concurrency"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 4]);
    for level in levels {
        let figures = &level["figures"];
        let number = |name: &str| figures[name].as_f64().unwrap_or_else(|| panic!("{name} in {figures}"));
        // Every request sent is counted, completed, with exactly the tokens asked for.
        assert_eq!(level["requests"], 8);
        assert_eq!((number("completed"), number("failed")), (8.0, 0.0), "{level}");
        assert_eq!(number("total_output_tokens"), 8.0 * 16.0);
        assert_eq!(number("total_input_tokens"), 8.0 * 48.0);
        let duration = number("duration");
        assert!(duration > 0.0);
        assert!(close(number("output_throughput") * duration, 8.0 * 16.0), "{figures}");
        assert!(close(number("request_throughput") * duration, 8.0), "{figures}");
        assert!(close(number("total_token_throughput") * duration, 8.0 * (48.0 + 16.0)), "{figures}");
        assert!(number("max_output_tokens_per_s") > 0.0);
        for latency in ["ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"] {
            let value = |name: &str| figures[latency][name].as_f64().unwrap();
            assert!(value("mean") > 0.0, "{latency}: {}", figures[latency]);
            assert!(value("p50") <= value("p90") && value("p90") <= value("p99"), "{latency}: {}", figures[latency]);
        }
        // A request ends after its first token, and its TPOT spreads the rest over 15 tokens.
        let mean = |name: &str| figures[name]["mean"].as_f64().unwrap();
        assert!(mean("e2el_ms") > mean("ttft_ms"));
        assert!(close(mean("tpot_ms") * 15.0, mean("e2el_ms") - mean("ttft_ms")), "{figures}");
    }
    // The server generated exactly what was counted: the untimed first request, then both levels.
    assert_eq!(tokens_predicted(&server) - before, 16.0 * (1.0 + 8.0 + 8.0));

    // Kept, listed, compared with itself, drawn with one series per result.
    let id = result["id"].as_str().unwrap();
    assert!(report["saved"].as_str().unwrap().starts_with(state.path().to_str().unwrap()));
    let history = store(state.path(), &["history"]);
    assert_eq!(history["results"][0]["id"], id);
    let comparison = store(state.path(), &["compare", id, id]);
    for level in comparison["levels"].as_array().unwrap() {
        let throughput = level["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == "Output token throughput (tok/s)")
            .unwrap();
        assert_eq!(throughput["ratio"], 1.0);
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    let series: Vec<_> = polylines(&svg).into_iter().filter(|(width, _)| width == "3").collect();
    assert_eq!(series, vec![("3".to_string(), 2), ("3".to_string(), 2)], "throughput and TTFT p50, one each");

    // The same as token ids: exactly as many tokens, a result of its own kind, which a comparison
    // with the text run names.
    let lengths = ["--concurrency", "2", "--requests", "4", "--input-len", "48", "--output-len", "16"];
    let (output, as_ids) = bench(state.path(), &server, &model, &[&lengths[..], &["--prompts", "token-ids"]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(as_ids["result"]["key"]["prompts"], "token-ids");
    assert_eq!(result["key"]["prompts"], "text", "the default");
    assert_eq!(as_ids["result"]["levels"][0]["figures"]["total_input_tokens"], 4 * 48);
    let comparison = store(state.path(), &["compare", id, as_ids["result"]["id"].as_str().unwrap()]);
    assert_eq!(
        comparison["differences"],
        serde_json::json!(["prompts: text → token ids", "requests per level: 8 → 4"]),
        "{comparison}"
    );
}

#[test]
fn the_gate_passes_on_a_relaunch_fails_on_another_rope_base_and_keeps_models_apart() {
    let model = TinyLlama::default().gguf();
    let state = tempfile::tempdir().unwrap();
    let gate = |server: &LlamaServer, model: &Path, more: &[&str]| {
        let mut args = vec!["--gate-only"];
        args.extend_from_slice(more);
        bench(state.path(), server, model, &args)
    };

    // The first accepted run is the model's reference.
    let first = LlamaServer::builder(&model).start();
    let (output, report) = gate(&first, &model, &["--image", "sha256:first"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(report["gate"]["became_reference"], true);
    assert!(report["gate"]["verdict"].is_null());
    let reference_tokens: usize = report["gate"]["candidate"]["answers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|answer| answer["tokens"].as_array().unwrap().len())
        .sum();
    assert!(reference_tokens > 0);
    drop(first);

    // The same model relaunched answers the same, token for token.
    let relaunched = LlamaServer::builder(&model).start();
    let (output, report) = gate(&relaunched, &model, &["--image", "sha256:second"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let verdict = &report["gate"]["verdict"];
    assert_eq!(verdict["passed"], true, "{verdict}");
    assert_eq!(verdict["compared_tokens"].as_u64().unwrap() as usize, reference_tokens);
    assert_eq!(verdict["max_logprob_delta"], 0.0);

    // The same file under another RoPE base (what a broken image does): the first differing token
    // of each prompt is named, with both texts and both images; exit 1.
    let roped = LlamaServer::builder(&model).args(&["--override-kv", "llama.rope.freq_base=float:1000000"]).start();
    let (output, report) = gate(&roped, &model, &["--image", "sha256:roped"]);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let verdict = &report["gate"]["verdict"];
    assert_eq!(verdict["passed"], false);
    let mismatches = verdict["mismatches"].as_array().unwrap();
    assert!(!mismatches.is_empty());
    for mismatch in mismatches {
        assert!(mismatch["prompt"].as_str().is_some_and(|prompt| !prompt.is_empty()));
        assert!(mismatch["index"].as_u64().is_some());
        assert!(mismatch["reference_context"].as_str().unwrap().contains('⟦'));
        assert!(mismatch["candidate_context"].as_str().unwrap().contains('⟦'));
        assert_eq!(
            (mismatch["reference_image"].as_str(), mismatch["candidate_image"].as_str()),
            (Some("sha256:first"), Some("sha256:roped"))
        );
    }
    assert!(mismatches.iter().any(|mismatch| mismatch["kind"]["kind"] == "token"), "{mismatches:?}");
    let text = strix()
        .env("XDG_STATE_HOME", state.path())
        .args(["bench", "--gate-only", "--endpoint", &roped.url(), "--server", "llama.cpp", "--gguf"])
        .arg(&model)
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(1));
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(shown.contains("differs") && shown.contains("⟦"), "{shown}");

    // One node serving alone as the reference (another server of the same file): the relaunch
    // agrees with it, the RoPE change does not.
    let alone = LlamaServer::builder(&model).start();
    let single = |server: &LlamaServer| {
        let alone_url = format!("{}/v1", alone.url());
        gate(server, &model, &["--reference", "single-node", "--single-node-endpoint", &alone_url])
    };
    let (output, report) = single(&relaunched);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(report["gate"]["verdict"]["passed"], true);
    assert_eq!(report["gate"]["verdict"]["reference_layout"], "one node alone");
    assert_eq!(report["gate"]["became_reference"], false);
    let (output, report) = single(&roped);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(report["gate"]["verdict"]["passed"], false);

    // A file with other weights is another model: its own reference, never held against the first.
    let other = TinyLlama { seed: 2, ..TinyLlama::default() }.gguf();
    let other_server = LlamaServer::builder(&other).start();
    let (output, report) = gate(&other_server, &other, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(report["gate"]["became_reference"], true);
    assert!(report["gate"]["verdict"].is_null());
    // …and the first model's reference is still the first run's.
    let (_, report) = gate(&relaunched, &model, &[]);
    assert_eq!(report["gate"]["verdict"]["reference_image"], "sha256:first");
}

#[test]
fn the_gate_passes_answers_that_part_at_a_near_tie_and_fails_a_token_not_ranked() {
    let state = tempfile::tempdir().unwrap();
    let gate = |env: &[(&str, &str)]| {
        let vllm = StandInVllm::start("org/tiny", "tiny", env);
        let output = strix()
            .env("XDG_STATE_HOME", state.path())
            .env_remove("STRIX_API_KEY")
            .args(["--json", "bench", "--gate-only", "--endpoint", &vllm.url(), "--server", "vllm"])
            .args(["--hub-model", "org/tiny@0123456789abcdef0123456789abcdef01234567"])
            .output()
            .expect("run strix-toolbox bench");
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", String::from_utf8_lossy(&output.stderr), vllm.log()));
        (output, report)
    };
    let (output, report) = gate(&[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(report["gate"]["became_reference"], true, "{report:#}");
    let top = &report["gate"]["candidate"]["answers"][0]["tokens"][0]["top"];
    assert_eq!(top.as_array().map(Vec::len), Some(5), "vLLM's top_logprobs, as many as asked: {top}");

    // The runner-up taken at the 4th token of every prompt: each ranked the other's, so every
    // prompt's comparison ends there, and passes.
    let (output, report) = gate(&[("STANDIN_TIED_ANSWERS", "3")]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let verdict = &report["gate"]["verdict"];
    assert_eq!((&verdict["passed"], verdict["mismatches"].as_array().map(Vec::len)), (&Value::Bool(true), Some(0)));
    let ties = verdict["ties"].as_array().unwrap();
    assert_eq!(ties.len(), 6, "every prompt of the set: {verdict}");
    assert!(ties.iter().all(|tie| tie["index"] == 3), "{verdict}");
    assert_eq!(verdict["compared_tokens"], 6 * 4, "nothing after a tie is compared: {verdict}");

    // Another word from the 4th token on, one the right answer did not rank: every prompt fails.
    let (output, report) = gate(&[("STANDIN_WRONG_ANSWERS", "3")]);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let verdict = &report["gate"]["verdict"];
    let mismatches = verdict["mismatches"].as_array().unwrap();
    assert_eq!((mismatches.len(), verdict["ties"].as_array().map(Vec::len)), (6, Some(0)), "{verdict}");
    assert!(mismatches.iter().all(|m| m["index"] == 3 && m["kind"]["kind"] == "token"), "{verdict}");
}
