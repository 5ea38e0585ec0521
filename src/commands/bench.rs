//! `bench`, `cluster bench`, `bench history` and `bench compare A B`: parse, call the bench
//! operation (or read the store), render. The figures are named and laid out as `vllm bench
//! serve` prints them, one column per concurrency level.

use crate::serving::engine::EngineRef;
use crate::serving::service_name::ServiceName;
use clap::{Args, Subcommand, ValueEnum};
use std::io::Read;
use std::path::Path;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::bench::compare::{compare, named, Comparison};
use crate::bench::gate::{GateReport, MismatchKind};
use crate::bench::key::ModelIdentity;
use crate::bench::prompt::PromptForm;
use crate::bench::result::{Acceptance, BenchResult};
use crate::bench::store::{BenchStore, History, HistoryFilter};
use crate::bench::{plot, LevelResult};

use crate::cluster::bench::{bench, ties, BenchReport, BenchRequest, GateReference, Serving};
use crate::error::{Error, Result};
use crate::node::Node;
use crate::output::{Output, Render, Row, Style};
use crate::paths::Paths;
use crate::serving::engine::ENGINES;

#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub command: Option<BenchSubcommand>,

    #[command(flatten)]
    pub run: BenchArgs,
}

#[derive(Debug, Clone, Subcommand)]
pub enum BenchSubcommand {
    /// The kept results, newest first (`$XDG_STATE_HOME/strix-toolbox/bench/`).
    History(BenchHistoryArgs),
    /// Each figure of result B as a ratio of result A's, level by level, and what differs between them.
    Compare(BenchCompareArgs),
}

/// What `bench` and `cluster bench` measure, and how.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Concurrency levels: at most this many requests in flight (vLLM's --max-concurrency).
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', default_value = "1,4,16")]
    pub concurrency: Vec<u32>,

    /// Requests per concurrency level.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub requests: u32,

    /// Prompt tokens per request, as the server counts them (its special tokens included).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub input_len: u32,

    /// How prompts are sent: as text the server tokenizes, made to tokenize to --input-len, as
    /// `vllm bench serve` sends its random prompts (its figures, tokenizing included); or as
    /// exactly --input-len token ids, nothing to tokenize.
    #[arg(long, value_enum, value_name = "FORM", default_value_t = PromptFormArg::Text)]
    pub prompts: PromptFormArg,

    /// Tokens generated per request, exactly (`ignore_eos`).
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub output_len: u32,

    /// First check the answers: a fixed prompt set at temperature 0, token for token against the
    /// model's reference (its first accepted run); a mismatch fails (exit 1) and stops the bench.
    #[arg(long)]
    pub gate: bool,

    /// The gate only, no load.
    #[arg(long, conflicts_with = "gate")]
    pub gate_only: bool,

    /// What the gate holds the answers against: the model's stored reference, or one node
    /// serving it alone (at --single-node-endpoint, launched by you).
    #[arg(long, value_enum, default_value_t = GateReferenceArg::Stored)]
    pub reference: GateReferenceArg,

    /// The endpoint of one node serving the same model alone (with --reference single-node).
    #[arg(long, value_name = "URL", required_if_eq("reference", "single-node"))]
    pub single_node_endpoint: Option<String>,

    /// How far a token's log-probability may move from the reference's, in nats.
    #[arg(long, value_name = "NATS", default_value_t = 0.1)]
    pub logprob_tolerance: f64,

    /// Also draw output tokens/s against concurrency and the TTFT percentiles, this result beside
    /// the kept results of the same setup on other images, into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Read the endpoint's API key from FILE [default: the STRIX_API_KEY environment variable, as
    /// `launch` and `status` read it].
    /// It travels only in the Authorization header, never a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,

    /// The service measured (its name, as clients send it) [default: the one that serves; with
    /// several, name one].
    #[arg(long, value_name = "NAME")]
    pub model: Option<ServiceName>,

    /// Measure this endpoint instead of what `launch` serves (one that strix-toolbox did not
    /// start): needs --server and the model's identity (--gguf or --hub-model).
    #[arg(long, value_name = "URL", requires = "server")]
    pub endpoint: Option<String>,

    /// The engine behind --endpoint.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub server: Option<EngineRef>,

    /// The GGUF file --endpoint serves (its sha256 names the model).
    #[arg(long, value_name = "FILE", conflicts_with = "hub_model")]
    pub gguf: Option<PathBuf>,

    /// The Hub model --endpoint serves, at its commit: ORG/NAME@COMMIT.
    #[arg(long, value_name = "ORG/NAME@COMMIT")]
    pub hub_model: Option<String>,

    /// The image behind --endpoint, as results are keyed [default: none].
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,

    /// The model name to send to --endpoint [default: the first /v1/models lists].
    #[arg(long, value_name = "NAME")]
    pub served_model: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PromptFormArg {
    Text,
    TokenIds,
}

impl From<PromptFormArg> for PromptForm {
    fn from(arg: PromptFormArg) -> PromptForm {
        match arg {
            PromptFormArg::Text => PromptForm::Text,
            PromptFormArg::TokenIds => PromptForm::TokenIds,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GateReferenceArg {
    Stored,
    SingleNode,
}

#[derive(Debug, Clone, Args)]
pub struct BenchHistoryArgs {
    /// Only results on images whose reference or digest contains this.
    #[arg(long, value_name = "TEXT")]
    pub image: Option<String>,

    /// Only results of this engine.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub server: Option<EngineRef>,

    /// Only results of models whose identity contains this (`org/name`, `file.gguf`).
    #[arg(long, value_name = "TEXT")]
    pub model: Option<String>,

    /// Only results with this concurrency level.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,

    /// Only accepted results (not those a canary rejected).
    #[arg(long)]
    pub accepted: bool,

    /// At most N results.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Draw the listed results into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct BenchCompareArgs {
    /// The result to compare against (an id `bench history` shows, or 4+ of its first digits).
    #[arg(value_name = "A")]
    pub a: String,

    /// The result compared.
    #[arg(value_name = "B")]
    pub b: String,

    /// Draw both into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// The most results a `bench --plot` draws beside this one.
const PLOT_OTHERS: usize = 9;

/// `bench` (this machine) or `cluster bench` (every node; the requests from the first, the
/// cluster's head).
pub async fn run(args: &BenchArgs, nodes: &[&dyn Node], paths: &Paths, out: &Output) -> Result<i32> {
    let request = request(args)?;
    let store = BenchStore::open(paths)?;
    let report = bench(nodes, &request, &store, out.reporter().as_ref()).await?;
    out.reporter().finish();
    if let (Some(path), Some(result)) = (&args.plot, &report.result) {
        let mut results = vec![result.clone()];
        let same_setup =
            |other: &BenchResult| other.id != result.id && other.key.on_image(&result.key.image) == result.key;
        let history = store.list(&HistoryFilter { accepted_only: true, ..HistoryFilter::default() })?;
        results.extend(history.results.into_iter().filter(same_setup).take(PLOT_OTHERS));
        plot::write(path, &results)?;
    }
    out.report(&report);
    Ok(if report.passed() { 0 } else { 1 })
}

pub fn history(args: &BenchHistoryArgs, paths: &Paths, out: &Output) -> Result<i32> {
    let filter = HistoryFilter {
        image: args.image.clone(),
        engine: args.server,
        model: args.model.clone(),
        concurrency: args.concurrency,
        accepted_only: args.accepted,
        limit: args.limit,
    };
    let history = BenchStore::open(paths)?.list(&filter)?;
    if let Some(path) = &args.plot {
        plot::write(path, &history.results)?;
    }
    out.report(&history);
    Ok(0)
}

pub fn compare_results(args: &BenchCompareArgs, paths: &Paths, out: &Output) -> Result<i32> {
    let store = BenchStore::open(paths)?;
    let (a, b) = (store.find(&args.a)?, store.find(&args.b)?);
    if let Some(path) = &args.plot {
        plot::write(path, &[a.clone(), b.clone()])?;
    }
    out.report(&compare(&a, &b));
    Ok(0)
}

fn request(args: &BenchArgs) -> Result<BenchRequest> {
    let serving = match (&args.endpoint, args.server) {
        (Some(url), Some(server)) => Serving::Endpoint {
            url: url.clone(),
            engine: server,
            model: identity(args)?,
            image: args.image.clone().unwrap_or_else(|| "none".into()),
            served_model: args.served_model.clone(),
        },
        (Some(_), None) => {
            let names: Vec<&str> = ENGINES.iter().map(|engine| engine.name()).collect();
            return Err(Error::Usage(format!("--endpoint needs --server ({})", names.join(" or "))));
        }
        (None, _) => Serving::Launched { service: args.model.clone() },
    };
    let gate = (args.gate || args.gate_only).then(|| match (args.reference, &args.single_node_endpoint) {
        (GateReferenceArg::SingleNode, Some(url)) => GateReference::SingleNode { url: url.clone() },
        _ => GateReference::Stored,
    });
    Ok(BenchRequest {
        serving,
        api_key: super::secrets::api_key(args.api_key_file.as_deref())?,
        concurrency: args.concurrency.clone(),
        requests: args.requests,
        input_len: args.input_len,
        output_len: args.output_len,
        prompt_form: args.prompts.into(),
        gate,
        logprob_tolerance: args.logprob_tolerance,
        load: !args.gate_only,
    })
}

/// The model behind `--endpoint`: a GGUF by its content, or a Hub repo at a commit.
fn identity(args: &BenchArgs) -> Result<ModelIdentity> {
    if let Some(path) = &args.gguf {
        return Ok(ModelIdentity::Gguf {
            name: path
                .file_name()
                .map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned()),
            sha256: sha256_of(path)?,
        });
    }
    match args.hub_model.as_deref().and_then(|model| model.split_once('@')) {
        Some((repo, commit)) if !repo.is_empty() && !commit.is_empty() => {
            Ok(ModelIdentity::Hub { repo: repo.to_string(), commit: commit.to_string() })
        }
        _ => Err(Error::Usage(
            "--endpoint needs the model's identity: --gguf FILE (the file it serves) or --hub-model ORG/NAME@COMMIT"
                .into(),
        )),
    }
}

fn sha256_of(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer).map_err(|e| Error::read(path, e))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect())
}

/// One column per level, one row per figure, as vLLM names them.
fn figures_table(out: &Output, levels: &[LevelResult]) {
    let columns: Vec<String> = levels.iter().map(|level| format!("concurrency {}", level.concurrency)).collect();
    let Some(first) = levels.first() else { return };
    let rows: Vec<Row> = named(&first.figures)
        .iter()
        .enumerate()
        .map(|(index, (name, _, _))| {
            let cells = levels.iter().map(|level| (None, number(named(&level.figures)[index].1))).collect();
            (name.to_string(), cells)
        })
        .collect();
    out.node_table(&columns, &rows);
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e12 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

impl Render for BenchReport {
    fn render(&self, out: &Output) {
        if let Some(gate) = &self.gate {
            render_gate(gate, out);
        }
        if let Some(result) = &self.result {
            out.line(&format!(
                "{} {}: {} with {} on {}, image {}, {} → {} tokens, {} requests per level",
                out.paint("bench", Style::Bold),
                result.id,
                result.key.model,
                result.key.engine,
                result.key.layout(),
                result.key.image,
                result.key.input_len,
                result.key.output_len,
                result.requests
            ));
            figures_table(out, &result.levels);
            for level in result.levels.iter().filter(|level| !level.errors.is_empty()) {
                out.warn(&format!("concurrency {}: {}", level.concurrency, level.errors.join("; ")));
            }
        }
        if let Some(path) = &self.saved {
            out.line(&format!("kept in {}", path.display()));
        }
    }
}

fn render_gate(gate: &GateReport, out: &Output) {
    let head = format!("gate (prompt set v{}, {})", gate.prompt_set, gate.model);
    match &gate.verdict {
        None if gate.unchecked() => out.line(&format!("{} {head}: {}", out.paint("!", Style::Warn), gate.reference)),
        None => out.line(&format!(
            "{} {head}: no reference yet; these answers are now the model's reference",
            out.paint("✓", Style::Ok)
        )),
        Some(verdict) if verdict.passed => {
            out.line(&format!(
                "{} {head}: {} tokens the same as {}{}{}",
                out.paint("✓", Style::Ok),
                verdict.compared_tokens,
                gate.reference,
                verdict.max_logprob_delta.map_or(String::new(), |delta| format!(
                    " (log-probabilities within {delta:.4} nats, tolerance {})",
                    verdict.logprob_tolerance
                )),
                ties(verdict.ties.len())
            ));
            for tie in &verdict.ties {
                out.line(&format!("  {tie}"));
            }
        }
        Some(verdict) => {
            out.line(&format!(
                "{} {head}: answers differ from {}{}",
                out.paint("✗", Style::Fail),
                gate.reference,
                ties(verdict.ties.len())
            ));
            for mismatch in &verdict.mismatches {
                let what = match mismatch.kind {
                    MismatchKind::Token => format!("token {} differs", mismatch.index),
                    MismatchKind::Length => format!("ends differently at token {}", mismatch.index),
                    MismatchKind::Logprob { delta } => format!("token {} moved {delta:.3} nats", mismatch.index),
                };
                out.line(&format!("  prompt {:?}: {what}", mismatch.prompt));
                out.line(&format!(
                    "    reference (image {}): {:?}",
                    mismatch.reference_image, mismatch.reference_context
                ));
                out.line(&format!(
                    "    this      (image {}): {:?}",
                    mismatch.candidate_image, mismatch.candidate_context
                ));
            }
        }
    }
}

impl Render for History {
    fn render(&self, out: &Output) {
        if self.results.is_empty() {
            out.line("no bench results kept yet (`strix-toolbox bench` keeps one per run)");
        }
        for result in &self.results {
            let verdict = match &result.verdict {
                Acceptance::Accepted => out.paint("accepted", Style::Ok),
                Acceptance::Rejected { reason } => out.paint(&format!("rejected: {reason}"), Style::Fail),
            };
            let levels: Vec<String> = result
                .levels
                .iter()
                .map(|level| {
                    format!(
                        "c={} {:.1} tok/s TTFT p50 {:.0} ms",
                        level.concurrency, level.figures.output_throughput, level.figures.ttft_ms.p50
                    )
                })
                .collect();
            out.line(&format!(
                "{}  {}  image {}  {} {}  {}  in {} out {}  {}",
                out.paint(&result.id, Style::Bold),
                result.taken_at,
                result.key.short_image(),
                result.key.engine,
                result.key.model,
                result.key.layout(),
                result.key.input_len,
                result.key.output_len,
                verdict
            ));
            out.line(&format!("          {}", levels.join(" · ")));
        }
        for file in &self.unreadable {
            out.warn(&format!("{}: {}", file.path.display(), file.why));
        }
    }
}

impl Render for Comparison {
    fn render(&self, out: &Output) {
        out.line(&format!("{} B = {} against A = {} (ratio B/A)", out.paint("compare", Style::Bold), self.b, self.a));
        for difference in &self.differences {
            out.line(&format!("  {difference}"));
        }
        for level in &self.levels {
            out.line(&out.paint(&format!("concurrency {}", level.concurrency), Style::Bold));
            let width = level.figures.iter().map(|figure| figure.name.len()).max().unwrap_or(0);
            for figure in &level.figures {
                let ratio = figure.ratio.map_or("—".to_string(), |ratio| format!("{ratio:.3}×"));
                let style = match (figure.ratio, figure.improved()) {
                    (Some(ratio), _) if (ratio - 1.0).abs() < 1e-9 => Style::Dim,
                    (_, true) => Style::Ok,
                    (Some(_), false) => Style::Warn,
                    (None, false) => Style::Dim,
                };
                out.line(&format!(
                    "  {:<width$}  {:>12}  {:>12}  {}",
                    figure.name,
                    number(figure.a),
                    number(figure.b),
                    out.paint(&ratio, style)
                ));
            }
        }
        if !self.unmatched.is_empty() {
            let levels: Vec<String> = self.unmatched.iter().map(u32::to_string).collect();
            out.warn(&format!("concurrency levels only one of them has: {}", levels.join(", ")));
        }
    }
}
