//! Benchmarks with the real vLLM (0.32.0's CPU build), not tests (ignored; `scripts/bench.sh`
//! runs them), each side by side with what it replaces, in one run:
//! 1. `launch` to its first answer against `vllm serve` typed by hand in the same toolbox with the
//!    plan's flags, to its first answer (hyperfine; every run starts with nothing serving);
//! 2. `bench` against `vllm bench serve` on the same server (its prefix cache off), with the same
//!    lengths, levels and greedy requests, turn about: output tokens/s, mean TTFT and mean TPOT,
//!    and each ours as a ratio of vLLM's; ours with its text prompts (the default) and with
//!    `--prompts token-ids`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::cli::{json, STRIX};
use crate::support::hub::HubStandIn;
use crate::vllm_launch::{hub_env, said_by, OneNode};

const MODEL: &str = "org/tiny-llama";

/// One node serving the model (launched with `engine_args` after `--`), in its Hub cache.
fn node_with_the_model(engine_args: &[&str]) -> (OneNode, HubStandIn, String) {
    let (node, hub) = OneNode::with_toolbox_and_hub();
    let port = crate::support::free_port().to_string();
    let mut launch = vec!["launch", MODEL, "--port", &port, "--timeout", "900", "--"];
    launch.extend_from_slice(engine_args);
    let launched = node.strix(&hub_env(&hub), &launch);
    assert!(launched.status.success(), "{}", said_by(&launched));
    (node, hub, port)
}

/// `value` in single quotes for sh.
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// A script that runs `body` on the node: in its namespace, with its sessions' environment.
fn node_script(node: &OneNode, dir: &Path, name: &str, extra_env: &[(String, String)], body: &str) -> PathBuf {
    let mut script = String::from("#!/bin/sh\nset -e\n");
    for (key, value) in node.cluster.node(1).env().iter().chain(extra_env) {
        writeln!(script, "export {key}={}", quoted(value)).expect("a string");
    }
    script.push_str(body);
    let inner = dir.join(format!("{name}.inner.sh"));
    std::fs::write(&inner, script).expect("write the script");
    let outer = dir.join(format!("{name}.sh"));
    let netns = node.cluster.node(1).netns().name().to_string();
    std::fs::write(&outer, format!("#!/bin/sh\nexec ip netns exec {netns} sh {}\n", inner.display())).expect("write");
    outer
}

/// sh that POSTs one greedy completion to `url` until it answers (at most 600 tries, 0.5 s apart).
fn first_answer(url: &str, model: &str) -> String {
    let body = format!(r#"{{"model": "{model}", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}}"#);
    format!(
        "i=0\nuntil curl -sf -m 120 -H 'Content-Type: application/json' -d {} {url}/v1/completions >/dev/null; do\n\
         \x20 i=$((i+1)); [ $i -lt 600 ] || exit 1; sleep 0.5\ndone\n",
        quoted(&body)
    )
}

#[test]
#[ignore = "a benchmark: scripts/bench.sh runs it"]
fn launch_against_vllm_serve_by_hand() {
    let (node, hub, port) = node_with_the_model(&[]);
    // What the launch ran: its flags, as `launch --dry-run` shows them to a person.
    let dry = node.strix(&hub_env(&hub), &["launch", MODEL, "--port", &port, "--dry-run", "--replace"]);
    assert!(dry.status.success(), "{}", said_by(&dry));
    let plan = json(&dry);
    let flags: Vec<String> = plan["plan"]["engine_args"]
        .as_array()
        .expect("the plan's flags")
        .iter()
        .filter_map(|f| f.as_str().map(String::from))
        .collect();
    let stopped = node.strix(&[], &["stop"]);
    assert!(stopped.status.success(), "{}", said_by(&stopped));

    let link = node.cluster.node(1).link_address.to_string();
    let work = tempfile::tempdir().expect("tempdir");
    let offline = [("HF_HUB_OFFLINE".to_string(), "1".to_string())];
    let ours = node_script(
        &node,
        work.path(),
        "ours",
        &hub_env(&hub),
        &format!(
            "{STRIX} launch {MODEL} --port {port} --timeout 900 >/dev/null\n{}",
            first_answer(&format!("http://{link}:{port}"), MODEL)
        ),
    );
    let serve: Vec<String> = flags.iter().map(|flag| quoted(flag)).collect();
    let by_hand = node_script(
        &node,
        work.path(),
        "by-hand",
        &offline,
        &format!(
            "podman --remote exec -d -e HF_HUB_OFFLINE=1 vllm vllm serve {MODEL} --host {link} --port {port} {}\n{}",
            serve.join(" "),
            first_answer(&format!("http://{link}:{port}"), MODEL)
        ),
    );
    // Before every run, of either: nothing serves (the other's last run still would, its port
    // and its memory taken).
    let stop_both = node_script(
        &node,
        work.path(),
        "stop-both",
        &[],
        &format!(
            "{STRIX} stop >/dev/null 2>&1 || true\n\
             podman --remote exec vllm pkill -f 'vllm serve' || true\n\
             i=0; while podman --remote exec vllm pgrep -f 'vllm serve' >/dev/null; do i=$((i+1)); [ $i -lt 120 ] || exit 1; sleep 0.5; done\n"
        ),
    );
    let report = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench/vllm-launch.md");
    std::fs::create_dir_all(report.parent().expect("a directory")).expect("mkdir target/bench");
    let sh = |path: &Path| format!("sh {}", path.display());
    let status = Command::new("hyperfine")
        .args(["--runs", "3", "--export-markdown"])
        .arg(&report)
        .args(["--prepare", &sh(&stop_both)])
        .args(["-n", "strix-toolbox launch, to the first answer", &sh(&ours)])
        .args(["-n", "vllm serve by hand, to the first answer", &sh(&by_hand)])
        .status()
        .expect("hyperfine (scripts/test-deps.sh installs it)");
    assert!(status.success(), "hyperfine failed");
    let _ = Command::new("sh").arg(&stop_both).status();
}

/// The figures of one `vllm bench serve --save-result` file or one level of our `bench --json`.
#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    output_throughput: f64,
    mean_ttft_ms: f64,
    mean_tpot_ms: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[test]
#[ignore = "a benchmark: scripts/bench.sh runs it"]
fn bench_against_vllm_bench_serve() {
    // Without the prefix cache: vLLM's bench sends the same random prompts every run (its seed
    // is 0 unless told) and its first prompt once more before it measures, so on a server that
    // caches prefixes its later rounds prefill partly from the cache (at concurrency 4, 885 of
    // 2,048 prompt tokens in one run), while ours never repeats a prompt. Cold prefills on both
    // sides compare the clients, not the cache.
    let (node, _hub, port) = node_with_the_model(&["--no-enable-prefix-caching"]);
    let link = node.cluster.node(1).link_address.to_string();
    let snapshots = node.home().join(".cache/huggingface/hub/models--org--tiny-llama/snapshots");
    let tokenizer =
        std::fs::read_dir(&snapshots).expect("the model's snapshots").flatten().next().expect("a snapshot").path();
    let (input, output, requests) = ("128", "32", "32");
    // Ours as text prompts (the default, as vLLM sends its random prompts) and as token ids.
    let forms = ["text", "token-ids"];
    let mut ours: Vec<Vec<Vec<Figures>>> = vec![vec![Vec::new(); 2]; forms.len()];
    let mut theirs: Vec<Vec<Figures>> = vec![Vec::new(); 2];
    let levels = ["1", "4"];
    for _round in 0..5 {
        for (form_index, form) in forms.iter().enumerate() {
            let benched = node.strix(
                &[],
                &[
                    "bench",
                    "--concurrency",
                    "1,4",
                    "--requests",
                    requests,
                    "--input-len",
                    input,
                    "--output-len",
                    output,
                    "--prompts",
                    form,
                ],
            );
            assert!(benched.status.success(), "{}", said_by(&benched));
            let report = json(&benched);
            for (index, level) in report["result"]["levels"].as_array().expect("levels").iter().enumerate() {
                let f = &level["figures"];
                let number = |value: &Value| value.as_f64().unwrap_or_else(|| panic!("{f}"));
                eprintln!(
                    "strix-toolbox bench --prompts {form}, concurrency {}: TTFT ms median {:.2} p99 {:.2}, TPOT ms \
                     median {:.2}, {} input tokens",
                    level["concurrency"],
                    number(&f["ttft_ms"]["median"]),
                    number(&f["ttft_ms"]["p99"]),
                    number(&f["tpot_ms"]["median"]),
                    number(&f["total_input_tokens"])
                );
                ours[form_index][index].push(Figures {
                    output_throughput: number(&f["output_throughput"]),
                    mean_ttft_ms: number(&f["ttft_ms"]["mean"]),
                    mean_tpot_ms: number(&f["tpot_ms"]["mean"]),
                });
            }
        }
        for (index, level) in levels.iter().enumerate() {
            // In the node's home, which its toolbox sees at the same path.
            let dir = node.home().join(format!("vllm-bench-{level}")).display().to_string();
            let argv = [
                "enter",
                "vllm",
                "--",
                "vllm",
                "bench",
                "serve",
                "--backend",
                "vllm",
                "--base-url",
                &format!("http://{link}:{port}"),
                "--model",
                MODEL,
                "--tokenizer",
                tokenizer.to_str().expect("utf-8"),
                "--dataset-name",
                "random",
                "--random-input-len",
                input,
                "--random-output-len",
                output,
                "--num-prompts",
                requests,
                "--max-concurrency",
                level,
                "--ignore-eos",
                // Greedy, as ours sends: vLLM's bench no longer sets it, and the server's default
                // samples, which costs every step a little.
                "--temperature",
                "0",
                "--save-result",
                "--result-dir",
                &dir,
                "--result-filename",
                "result.json",
            ];
            let served = node.strix(&[], &argv);
            assert!(served.status.success(), "{}", said_by(&served));
            let saved: Value = serde_json::from_str(
                &std::fs::read_to_string(format!("{dir}/result.json")).expect("vllm bench serve's result"),
            )
            .expect("JSON");
            let number = |key: &str| saved[key].as_f64().unwrap_or_else(|| panic!("{key}: {saved}"));
            eprintln!(
                "vllm bench serve, concurrency {level}: TTFT ms median {:.2} p99 {:.2}, TPOT ms median {:.2}, {} input tokens",
                number("median_ttft_ms"),
                number("p99_ttft_ms"),
                number("median_tpot_ms"),
                number("total_input_tokens")
            );
            theirs[index].push(Figures {
                output_throughput: number("output_throughput"),
                mean_ttft_ms: number("mean_ttft_ms"),
                mean_tpot_ms: number("mean_tpot_ms"),
            });
        }
    }
    let mut table = String::from(
        "| concurrency | figure | strix-toolbox bench (text) | vllm bench serve | ratio | strix-toolbox bench \
         --prompts token-ids | ratio |\n|---|---|---|---|---|---|---|\n",
    );
    for (index, level) in levels.iter().enumerate() {
        let pick = |runs: &[Figures], f: fn(&Figures) -> f64| median(runs.iter().map(f).collect());
        for (name, f) in [
            ("output tokens/s", (|x: &Figures| x.output_throughput) as fn(&Figures) -> f64),
            ("mean TTFT ms", |x: &Figures| x.mean_ttft_ms),
            ("mean TPOT ms", |x: &Figures| x.mean_tpot_ms),
        ] {
            let (text, ids, b) = (pick(&ours[0][index], f), pick(&ours[1][index], f), pick(&theirs[index], f));
            writeln!(table, "| {level} | {name} | {text:.2} | {b:.2} | {:.3} | {ids:.2} | {:.3} |", text / b, ids / b)
                .expect("a string");
        }
    }
    eprintln!("{table}");
    let report = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench/vllm-bench.md");
    std::fs::create_dir_all(report.parent().expect("a directory")).expect("mkdir target/bench");
    std::fs::write(&report, table).expect("write the report");
}
