//! `plan MODEL` on this node, and `cluster plan MODEL` on every node: the same plan (see
//! `cluster::fit`), rendered with every layout's figures or the rule it breaks. Exits 1 when no
//! layout serves the model (a launch would refuse it), 0 otherwise: a model that cannot be sized
//! is said so, and a launch would go on without a plan.

use super::secrets::hf_token;
use crate::commands::arg_values::{bounded, tokens, MAX_RESERVE_GIB, MAX_SECONDS, MAX_TP};
use clap::Args;
use std::path::PathBuf;

use crate::cluster::fit::{fit_model, FitReport, FitRequest};
use crate::error::{Error, Result, EXIT_FAILURE};
use crate::model::hub_env::forwarded_hub_env;
use crate::model::shape::weights::WeightSource;
use crate::model::shape::Sizing;
use crate::node::Node;
use crate::output::{Output, Render, Style};
use crate::reporter::Bytes;
use crate::serving::engine::EngineRef;
use crate::serving::engine_args::EngineArgs;
use crate::serving::fit::{Fit, FitAsk, Layout, LayoutOutcome};
use crate::spec::parse_env;

/// A model to plan, and what is asked of the plan.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// The model: a Hugging Face repository (`org/name`), a directory on the head (vLLM), a GGUF
    /// file on the head (llama.cpp; of a split model, the first part), or a Hub repository's GGUF
    /// by its quant (`org/name:Q4_K_M`). Only its headers are read.
    #[arg(value_name = "MODEL", required_unless_present = "recipes")]
    pub model: Option<String>,

    /// The GGUF file of the Hub repository MODEL, by its path in the repository (llama.cpp).
    #[arg(long, value_name = "NAME.gguf")]
    pub file: Option<String>,

    /// The serving engine whose rules plan it [default: as launch chooses: llama.cpp for a GGUF,
    /// else vllm].
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<EngineRef>,

    /// vLLM's tensor-parallel size: only that layout, refused when the model does not allow it.
    #[arg(long, value_name = "N", value_parser = bounded::<usize>(1, MAX_TP))]
    pub tp: Option<usize>,

    /// vLLM's pipeline-parallel size.
    #[arg(long, value_name = "N", value_parser = bounded::<usize>(1, MAX_TP))]
    pub pp: Option<usize>,

    /// GiB kept back on every node for the OS and the container, off the GPU's GTT.
    #[arg(long, value_name = "GIB", default_value_t = crate::serving::fit::memory::DEFAULT_RESERVE_GIB,
          value_parser = bounded::<u64>(0, MAX_RESERVE_GIB))]
    pub reserve: u64,

    /// GiB more left free on every node for another service; the KV cache takes the rest of the
    /// memory (vLLM: every block of it) [default: 0].
    #[arg(long, value_name = "GIB", default_value_t = 0, value_parser = bounded::<u64>(0, MAX_RESERVE_GIB))]
    pub keep_free: u64,

    /// The engine's environment, KEY=VALUE (repeatable), as `launch -e` gives it: the plan reads
    /// what changes the engine's memory (vLLM's VLLM_PP_LAYER_PARTITION, VLLM_MLA_DISABLE).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,

    /// The longest request in tokens (vLLM's forms: 32768, 32k, 25.6k, 32K): every layout must
    /// hold it [default: the longest that leaves room for one request, up to the model's own].
    #[arg(long, value_name = "TOKENS", value_parser = tokens)]
    pub max_model_len: Option<u64>,

    /// The KV cache's dtype (vLLM's names: auto, bfloat16, fp8...; llama.cpp's: f16, q8_0...)
    /// [default: the engine's: the model's dtype for vLLM, f16 for llama.cpp].
    #[arg(long, value_name = "DTYPE")]
    pub kv_cache_dtype: Option<String>,

    /// A Hub branch, tag or commit [default: main].
    #[arg(long, value_name = "REVISION")]
    pub revision: Option<String>,

    /// Read the Hugging Face token from FILE [default: the HF_TOKEN environment variable]; the
    /// head sends it to the Hub in a header, never a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub hf_token_file: Option<PathBuf>,

    /// The toolbox asked which GPUs the head's server sees (llama.cpp) [default: the engine's].
    #[arg(long, value_name = "NAME")]
    pub toolbox: Option<String>,

    /// Launch each feasible layout in turn (`cluster plan` only), hold it to the gate and a short
    /// bench, and keep the fastest that answers right as the model's recipe: `cluster launch
    /// MODEL` then serves that way while the image and the model are the same.
    #[arg(long = "try", conflicts_with_all = ["recipes", "tp", "pp"])]
    pub try_layouts: bool,

    /// List the recipes `--try` kept (`cluster plan` only).
    #[arg(long, conflicts_with = "model")]
    pub recipes: bool,

    /// With --try: the endpoint's port [default: the running router's, else 8000].
    #[arg(long, value_parser = bounded::<u16>(1, 65535), requires = "try_layouts")]
    pub port: Option<u16>,

    /// With --try: seconds each layout's engine may take to serve.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800, value_parser = bounded::<u64>(1, MAX_SECONDS))]
    pub timeout: u64,

    /// With --try: the endpoint's API key, read from FILE [default: the STRIX_API_KEY environment
    /// variable], as `cluster launch` takes it.
    #[arg(long, value_name = "FILE", requires = "try_layouts")]
    pub api_key_file: Option<PathBuf>,

    /// With --try: more arguments for the engine's server, kept in the recipe.
    #[arg(last = true, value_name = "ENGINE ARGS", requires = "try_layouts")]
    pub extra: Vec<String>,
}

/// Plan on `nodes` and render the report; the exit code.
pub async fn run(args: &PlanArgs, nodes: &[&dyn Node], out: &Output) -> Result<i32> {
    if args.try_layouts || args.recipes {
        return Err(Error::Usage(
            "--try and --recipes are the cluster's: `strix-toolbox cluster plan MODEL --try`, `cluster plan --recipes`"
                .into(),
        ));
    }
    let request = request(args)?;
    let report = fit_model(nodes, &request).await?;
    out.report(&report);
    Ok(if report.refused() { EXIT_FAILURE } else { 0 })
}

/// The plan `args` ask for.
pub(super) fn request(args: &PlanArgs) -> Result<FitRequest> {
    let model = args.model.as_deref().ok_or_else(|| Error::Usage("plan needs MODEL".into()))?;
    let engine = EngineRef::for_model(args.engine, model, args.file.as_deref());
    Ok(FitRequest {
        engine,
        model: model.to_string(),
        source: engine.source(model, args.file.as_deref())?,
        toolbox: args.toolbox.clone().unwrap_or_else(|| engine.profile().toolbox.default_toolbox.to_string()),
        revision: args.revision.clone(),
        tp: args.tp,
        pp: args.pp,
        // The plan's own flags first, then the engine's after -- (with --try) and its -e.
        asked: FitAsk {
            max_model_len: args.max_model_len,
            kv_cache_dtype: args.kv_cache_dtype.clone(),
            ..FitAsk::default()
        }
        .or(engine.fit_asked(&EngineArgs::new(args.extra.clone()), &parse_env(&args.env)?)?),
        reserve_gib: args.reserve,
        keep_free_gib: args.keep_free,
        hf_token: hf_token(args.hf_token_file.as_deref())?,
        hub_env: forwarded_hub_env(std::env::vars()),
        ask_devices: true,
        count_in_use: true,
    })
}

impl Render for FitReport {
    fn render(&self, out: &Output) {
        let read = &self.read;
        let commit =
            read.commit.as_deref().map(|c| format!(", commit {}", c.get(..7).unwrap_or(c))).unwrap_or_default();
        let took = format!("{} read in {} request(s){commit}", Bytes(read.bytes_read), read.requests);
        let shape = match &read.sizing {
            Sizing::Sized(shape) => shape,
            Sizing::CannotSize { .. } => {
                let why = self.cannot_size.as_deref().unwrap_or_default();
                out.line(&format!("{} cannot be sized honestly ({took}): {why}", self.model));
                out.line("A launch goes on without a plan, as before, with a warning.");
                return;
            }
        };
        let weights = match shape.weights.as_ref() {
            Some(weights) => {
                let from = match weights.source {
                    WeightSource::Headers => "from the tensors' headers",
                    WeightSource::IndexTotal => "the index's total",
                    WeightSource::Config => "estimated from the config",
                };
                format!(", weights {} ({from})", Bytes(weights.total_bytes))
            }
            None => String::new(),
        };
        out.line(&format!(
            "{}: {}, {} layers, {} attention heads, {} KV heads of {}, context {}{weights}; by {}'s rules",
            out.paint(&self.model, Style::Bold),
            shape.architecture,
            shape.layers,
            shape.attention_heads,
            shape.kv_heads,
            shape.head_dim,
            shape.max_context,
            self.engine.profile().title
        ));
        out.line(&format!("  {took}"));
        for note in read.notes.iter().chain(&self.notes) {
            out.line(&format!("  note: {note}"));
        }
        if let Some(fit) = &self.fit {
            render_fit(fit, out);
        }
    }
}

fn render_fit(fit: &Fit, out: &Output) {
    out.line("Nodes (usable: the GPU's GTT less what is in use less the reserve and what is kept free):");
    for node in &fit.nodes {
        let free = match node.kept_free_bytes {
            0 => String::new(),
            kept => format!(", {} kept free for another service", Bytes(kept)),
        };
        out.line(&format!(
            "  {}: {} GTT, {} in use, {} kept{free}: {} usable",
            node.node,
            Bytes(node.gtt_bytes),
            Bytes(node.gtt_used_bytes),
            Bytes(node.reserve_bytes),
            Bytes(node.usable_bytes)
        ));
    }
    out.line(&format!("KV cache: {} ({})", fit.kv_cache_dtype.name, fit.kv_cache_dtype.why));
    out.line(&format!("Kept for the runtime: {} a node ({})", Bytes(fit.runtime_bytes), fit.runtime_why));
    out.line("Layouts:");
    for layout in &fit.layouts {
        render_layout(layout, out);
    }
    match (&fit.chosen, &fit.refusal) {
        (Some(chosen), _) => {
            let label = fit.chosen_layout().map(Layout::label).unwrap_or_default();
            out.line(&format!("{} {label}: {}", out.paint("Chosen:", Style::Bold), chosen.why));
        }
        (None, Some(refusal)) => {
            out.line(&format!("{} {}. Fix: {}", out.paint("Refused:", Style::Fail), refusal.message, refusal.fix));
        }
        (None, None) => {}
    }
    if let Some(fewer) = &fit.fewer_nodes {
        out.line(&format!("Fewer nodes: {fewer}"));
    }
    if !fit.engine_args.is_empty() {
        out.line(&format!("{} flags: {}", fit.engine, fit.engine_args.join(" ")));
    }
    for note in &fit.notes {
        out.line(&format!("  note: {note}"));
    }
}

fn render_layout(layout: &Layout, out: &Output) {
    match &layout.outcome {
        LayoutOutcome::Fits(figures) => {
            out.line(&format!(
                "  {} {}: a context of {} tokens (set by {})",
                out.paint("✓", Style::Ok),
                layout.label(),
                figures.context_tokens,
                figures.limited_by
            ));
            if let Some(cache) = &figures.cache {
                out.line(&format!(
                    "      {} blocks of {} tokens (one is the engine's null block): KV cache size {} tokens, {}x                      requests of {} tokens at once",
                    cache.blocks, cache.block_size, cache.tokens, cache.max_concurrency, figures.context_tokens
                ));
            }
            for node in &figures.nodes {
                let per_token = node.kv_per_token.full_bytes.saturating_add(node.kv_per_token.sliding_bytes);
                out.line(&format!(
                    "      {}: layers {}..{}, weights {}, KV cache {} ({} a token)",
                    node.node,
                    node.first_layer,
                    node.first_layer.saturating_add(node.layers),
                    Bytes(node.weights_bytes),
                    Bytes(node.kv_cache_bytes),
                    Bytes(per_token)
                ));
            }
        }
        LayoutOutcome::Breaks { rules, .. } => {
            let said: Vec<&str> = rules.iter().map(|rule| rule.message.as_str()).collect();
            out.line(&format!("  {} {}: {}", out.paint("✗", Style::Fail), layout.label(), said.join("; ")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parsed(args: &[&str]) -> PlanArgs {
        let argv = std::iter::once("strix-toolbox").chain(args.iter().copied());
        match Cli::try_parse_from(argv).expect("parses").command {
            Command::Plan(args) => args,
            other => panic!("not plan: {other:?}"),
        }
    }

    #[test]
    fn the_engine_is_chosen_as_launch_chooses_it_and_the_flags_reach_the_plan() {
        let gguf = request(&parsed(&["plan", "/m/tiny.gguf", "--max-model-len", "2048"])).expect("a request");
        assert_eq!((gguf.engine.name(), gguf.toolbox.as_str()), ("llama.cpp", "llama"));
        assert_eq!(gguf.asked.max_model_len, Some(2048));
        let hub = parsed(&["plan", "Qwen/Qwen3-32B", "--tp", "2", "--reserve", "8", "--kv-cache-dtype", "fp8"]);
        let hub = request(&hub).expect("a request");
        assert_eq!((hub.engine.name(), hub.tp, hub.reserve_gib), ("vllm", Some(2), 8));
        assert_eq!(hub.asked.kv_cache_dtype.as_deref(), Some("fp8"));
        assert_eq!(request(&parsed(&["plan", "o/r:Q4_K_M"])).expect("a request").engine.name(), "llama.cpp");
        let vllm_gguf = parsed(&["plan", "/m/tiny.gguf", "--engine", "vllm"]);
        assert!(request(&vllm_gguf).is_err(), "vLLM serves no GGUF");
        assert!(Cli::try_parse_from(["strix-toolbox", "plan", "m", "--reserve", "-1"]).is_err());
        assert!(Cli::try_parse_from(["strix-toolbox", "plan", "m", "--max-model-len", "0"]).is_err());
        // vLLM's own forms, and its environment as launch -e gives it.
        let forms =
            parsed(&["plan", "org/m", "--max-model-len", "25.6k", "-e", "VLLM_MLA_DISABLE=1", "--keep-free", "8"]);
        let forms = request(&forms).expect("a request");
        assert_eq!((forms.asked.max_model_len, forms.asked.mla_disabled, forms.keep_free_gib), (Some(25_600), true, 8));
        assert_eq!(
            request(&parsed(&["plan", "org/m", "--max-model-len", "1T"])).unwrap().asked.max_model_len,
            Some(1 << 40)
        );
        assert!(Cli::try_parse_from(["strix-toolbox", "plan", "m", "--max-model-len", "25.6K"]).is_err());
        let bad = parsed(&["plan", "org/m", "-e", "VLLM_PP_LAYER_PARTITION=a,b"]);
        assert!(matches!(request(&bad), Err(Error::Usage(_))));
    }
}
