//! The vLLM plan against the real engine: `plan` on a node whose toolbox is the vLLM CPU image
//! (0.32.0, support/vllm_cpu.rs; the plan reads its labels and sizes the cache with that build's
//! blocks of 128 tokens), for tiny models of each kind of KV cache vLLM sizes its own way (GQA,
//! MHA, sliding-window layers beside full ones, a MoE); then the real `vllm serve` with the plan's
//! own flags, and what vLLM says of its cache ("CPU KV cache size: N tokens, Maximum concurrency
//! for C tokens per request: X.XXx") set beside what the plan said it would say.

use std::path::Path;

use crate::support::cli::{json, refresh_vllm, run_strix, stderr, stdout};
use crate::support::host_tree::{materialize, set_gtt};
use crate::support::podman::PodmanService;
use crate::support::registry::Registry;
use crate::support::vllm_cpu::{tiny_model, vllm_cpu};

/// tiny_hf_model.py's shapes.
const SHAPES: [&str; 4] = ["llama-gqa", "llama-mha", "gemma3-sliding", "qwen3-moe"];
/// The plan's runtime allowance (serving::fit::vllm::DEFAULT_RUNTIME_GIB) and 16 MiB more: with
/// no reserve, a cache of 16 MiB less the weights (~1.5 MB), so that the memory sets the context
/// of the shapes of 16384 tokens and the model's own 4096 tokens that of the others.
const GTT: u64 = (2 << 30) + (16 << 20);

/// What vLLM said of its cache: tokens, the context they are for, the concurrency ×100.
#[derive(Debug, PartialEq)]
struct Said {
    tokens: u64,
    per_request: u64,
    concurrency_hundredths: u64,
}

/// vLLM's line (`kv_cache_utils.py` `update_kv_cache_capacity`): `CPU KV cache size: 9,984
/// tokens, Maximum concurrency for 4,096 tokens per request: 2.44x`. (The crate's own reader,
/// serving::fit::vllm_log, is the crate's; this test reads the line for itself.)
fn said(log: &str) -> Option<Said> {
    let line = log.lines().find(|line| line.contains("KV cache size: "))?;
    let number = |text: &str| text.trim().replace(',', "").parse::<u64>().ok();
    let tokens = number(line.split("KV cache size: ").nth(1)?.split(" tokens").next()?)?;
    let per_request = number(line.split("Maximum concurrency for ").nth(1)?.split(" tokens").next()?)?;
    let times: f64 = line.split(" tokens per request: ").nth(1)?.trim().trim_end_matches('x').parse().ok()?;
    Some(Said { tokens, per_request, concurrency_hundredths: (times * 100.0).round() as u64 })
}

/// Whether `planned` is within 2% of `real`.
fn close(planned: u64, real: u64) -> bool {
    planned.abs_diff(real) * 50 <= real
}

#[test]
fn the_plans_figures_are_what_the_real_vllm_says_on_each_tiny_shape() {
    let vllm = vllm_cpu();
    let registry = Registry::start_holding(&vllm.registry_storage());
    let podman = PodmanService::start_with_store(&registry, &vllm.store());
    let host = materialize("strix-thunderbolt-only");
    set_gtt(host.path(), GTT, 0);
    let host = host.path().to_str().expect("utf-8");
    let image = format!("{}/{}", registry.host(), vllm.repository());
    let home = tempfile::tempdir().expect("a home");
    let mut env = podman.env();
    env.push(("HOME".into(), home.path().display().to_string()));
    let refreshed = run_strix(&env, &refresh_vllm(host, &image, &[]));
    assert!(refreshed.status.success(), "{}", stderr(&refreshed));

    let mut compared = Vec::new();
    for shape in SHAPES {
        // In the node's home, which its toolbox sees (the machine's test cache is not mounted there).
        let model = home.path().join("models").join(shape);
        copy_dir(&tiny_model(shape), &model);
        let model_dir = model.to_str().expect("utf-8");
        let planned = run_strix(&env, &["--json", "--host-root", host, "plan", model_dir, "--reserve", "0"]);
        assert!(planned.status.success(), "{shape}: {}{}", stdout(&planned), stderr(&planned));
        let report = json(&planned);
        let plan = &report["plan"];
        let notes: Vec<&str> = plan["notes"].as_array().expect("notes").iter().filter_map(|n| n.as_str()).collect();
        assert_eq!(notes[0], "vLLM 0.32.0 on CPU, as the image's labels say: blocks of 128 tokens", "{shape}: {plan}");
        let chosen = &plan["layouts"][plan["chosen"]["layout"].as_u64().expect("a layout chosen") as usize];
        let figures = &chosen["outcome"];
        let cache = &figures["cache"];
        let context = figures["context_tokens"].as_u64().expect("a context");
        let args: Vec<&str> =
            plan["engine_args"].as_array().expect("flags").iter().filter_map(|a| a.as_str()).collect();

        // The plan's own flags; --enforce-eager only skips torch.compile's minute, which sizes nothing.
        let mut serve = args.clone();
        serve.push("--enforce-eager");
        let log = vllm.serve_log(Path::new(model_dir), &serve);
        let Some(real) = said(&log) else { panic!("{shape}: vLLM did not say its cache with {serve:?}:\n{log}") };
        let plan_tokens = cache["tokens"].as_u64().expect("tokens");
        let plan_times: f64 = cache["max_concurrency"].as_str().expect("concurrency").parse().expect("a number");
        let plan_hundredths = (plan_times * 100.0).round() as u64;
        eprintln!(
            "{shape}: {} blocks of 128; plan {plan_tokens} tokens, {plan_times:.2}x at {context}; vLLM {} tokens, \
             {:.2}x at {}",
            cache["blocks"],
            real.tokens,
            real.concurrency_hundredths as f64 / 100.0,
            real.per_request
        );
        assert_eq!(real.per_request, context, "{shape}: the context vLLM took is the plan's");
        assert!(close(plan_tokens, real.tokens), "{shape}: plan {plan_tokens} tokens, vLLM {}", real.tokens);
        assert!(close(plan_hundredths, real.concurrency_hundredths), "{shape}: plan {plan_times}x, vLLM {real:?}");
        compared.push((shape, figures["limited_by"].as_str().unwrap_or_default().to_string()));
    }
    // The memory set some contexts, the model's own maximum others: both ways were checked.
    assert!(compared.iter().any(|(_, by)| by.starts_with("the memory of")), "{compared:?}");
    assert!(compared.iter().any(|(_, by)| by == "the model's own maximum"), "{compared:?}");
}

/// `from`'s files (a model directory, flat) copied into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir the model");
    for entry in std::fs::read_dir(from).expect("the model's files").flatten() {
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a model file");
    }
}
