//! `refresh [latest|dev]`: pull (or build) the image, then create or update the toolbox atomically:
//! `cluster refresh` on a cluster of one node, this machine.

use crate::commands::arg_values::{bounded, MAX_KEEP, MAX_SECONDS};
use crate::manager::ManagerChoice;
use clap::Args;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::refresh::refresh_nodes;
use crate::cluster::spread::SpreadSettings;
use crate::error::{Error, Result};
use crate::node::ssh::shell_quote;
use crate::node::Node;
use crate::ops::refresh::{ImageSource, RefreshReport, RefreshRequest};
use crate::output::{Output, Render, Style};
use crate::serving::engine::EngineRef;

/// What a refresh makes, and how: shared by `refresh` and `cluster refresh`.
#[derive(Debug, Clone, Args)]
pub struct RefreshOptions {
    /// Image channel: vLLM's latest or dev (asked on a terminal when omitted; latest otherwise);
    /// llama.cpp's are the tags of kyuz0/amd-strix-halo-toolboxes [default: vulkan-radv].
    #[arg(value_name = "CHANNEL")]
    pub channel: Option<String>,

    /// The serving engine the toolbox is for: its image, channels, devices and checks.
    #[arg(long, value_enum, value_name = "ENGINE", default_value_t = EngineRef::default())]
    pub engine: EngineRef,

    /// Image repository (the channel becomes its tag) [default: the engine's:
    /// docker.io/kyuz0/vllm-therock-gfx1151, or docker.io/kyuz0/amd-strix-halo-toolboxes].
    #[arg(long, env = "IMAGE_REPO")]
    pub image_repo: Option<String>,

    /// Full image reference; overrides --image-repo and the channel's tag.
    #[arg(long, value_name = "REF")]
    pub image: Option<String>,

    /// Toolbox name [default: vllm for latest, vllm-dev for dev; llama for vulkan-radv,
    /// llama-CHANNEL for another channel].
    #[arg(long, env = "TOOLBOX_NAME")]
    pub name: Option<String>,

    /// Who owns the toolbox.
    #[arg(long, value_enum, default_value_t = ManagerChoice::Auto)]
    pub manager: ManagerChoice,

    /// How many older pinned images of this repository to keep for rollback.
    #[arg(long, default_value_t = 2, value_parser = bounded::<usize>(0, MAX_KEEP))]
    pub keep: usize,

    /// Recreate even when the image and the container spec are unchanged.
    #[arg(long)]
    pub force: bool,

    /// Print the plan and the equivalent commands; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Extra environment for the toolbox, KEY=VALUE (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,

    /// Swap the new toolbox in without first verifying it from the inside.
    #[arg(long)]
    pub no_verify: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub options: RefreshOptions,

    /// Build the image locally with this RCCL artifact, then refresh from it.
    #[arg(long, value_name = "FILE")]
    pub rccl: Option<PathBuf>,

    /// When another refresh of this toolbox is running, fail at once instead of waiting for it.
    #[arg(long)]
    pub no_wait: bool,

    /// How long to wait for another refresh of this toolbox to finish (`cluster refresh` never
    /// waits: a busy node fails it at once, before any node changes).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = crate::apply::lock::DEFAULT_WAIT.as_secs(),
        conflicts_with = "no_wait",
        value_parser = bounded::<u64>(0, MAX_SECONDS)
    )]
    pub wait: u64,
}

pub async fn run(args: &RefreshArgs, node: &dyn Node, out: &Output) -> Result<i32> {
    let lock_wait = if args.no_wait { Duration::ZERO } else { Duration::from_secs(args.wait) };
    let request = request(&args.options, args.rccl.clone(), lock_wait, out)?;
    let refreshed = refresh_nodes(&[node], &request, &SpreadSettings::default(), out.reporter().as_ref()).await?;
    // The node's own report, as `refresh` has always shown it.
    let report = refreshed.nodes.into_iter().next().map(|node| node.report);
    out.report(&report.ok_or_else(|| Error::Internal("a refresh of one node reported no node".into()))?);
    Ok(0)
}

/// The refresh the options ask for (built from `rccl` when given), on this node or every node;
/// `lock_wait` is how long it waits for another refresh of the same toolbox.
pub fn request(
    options: &RefreshOptions,
    rccl: Option<PathBuf>,
    lock_wait: Duration,
    out: &Output,
) -> Result<RefreshRequest> {
    let (name, image_ref) = target(options, out)?;
    let request = RefreshRequest {
        name,
        image_ref,
        source: rccl.map_or(ImageSource::Pull, ImageSource::Build),
        manager: options.manager,
        keep: options.keep,
        force: options.force,
        dry_run: options.dry_run,
        env: options.env.clone(),
        stage_only: false,
        verify: !options.no_verify,
        lock_wait_seconds: lock_wait.as_secs(),
        spread: None,
        serving: options.engine,
    };
    request.validate()?;
    Ok(request)
}

/// The toolbox's name and image reference; the channel is asked on a terminal when not given.
fn target(options: &RefreshOptions, out: &Output) -> Result<(String, String)> {
    let engine = options.engine;
    let channel = match &options.channel {
        Some(channel) => engine.parse_channel(channel)?,
        // A full --image names its own tag, and an engine with one recommended tag asks nothing.
        None if options.image.is_some() || !engine.profile().toolbox.ask_channel => {
            engine.profile().toolbox.channels[0]
        }
        None => ask_channel(engine, out)?,
    };
    let name = options.name.clone().unwrap_or_else(|| engine.toolbox_for(channel));
    let repo = options.image_repo.as_deref().unwrap_or(engine.profile().toolbox.image_repo);
    let image_ref = options.image.clone().unwrap_or_else(|| format!("{repo}:{channel}"));
    Ok((name, image_ref))
}

/// On a terminal, ask which of the engine's channels (its first is the default); otherwise the
/// first.
fn ask_channel(engine: EngineRef, out: &Output) -> Result<&'static str> {
    let channels = engine.profile().toolbox.channels;
    let default = channels[0];
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok(default);
    }
    out.prompt(&format!("Channel? [{}] ({default}): ", channels.join("/")));
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| {
        Error::host("stdin", format!("cannot read the answer: {e}"), format!("give the channel: `refresh {default}`"))
    })?;
    match answer.trim() {
        "" => Ok(default),
        other => engine.parse_channel(other),
    }
}

/// The text form: the plan with its commands for a dry run, else one line of outcome (on stderr:
/// a refresh's output is the toolbox, not text).
impl Render for RefreshReport {
    fn render(&self, out: &Output) {
        for warning in &self.warnings {
            out.warn(warning);
        }
        if self.dry_run {
            out.line(&format!("{} (dry run; nothing changed)", out.paint("Plan", Style::Bold)));
            if let Some(guessed) = &self.engine_guessed {
                out.line(&format!("  {} {guessed}", out.paint("note:", Style::Dim)));
            }
            if self.pull {
                out.line(&format!("  0. pull {0}\n       {1} pull {0}", self.image, self.engine.program()));
            }
            for (index, step) in self.steps.iter().enumerate() {
                out.line(&format!("  {}. {}", index + 1, step.description));
                for command in &step.commands {
                    out.line(&format!("       {}", typed(command)));
                }
            }
            out.line(&format!("Result would be: {} ({})", self.action.as_str(), self.reason));
            return;
        }
        out.status(&format!(
            "{} {} {} ({}) from {} [{}]",
            out.paint("✓", Style::Ok),
            self.name,
            self.action.as_str(),
            self.reason,
            self.image,
            self.pin.as_deref().unwrap_or("unpinned")
        ));
        out.status(&format!("  enter it with: strix-toolbox enter {}", self.name));
    }
}

/// `argv` as it would be typed into a shell: what the shell would change is quoted (an `=` only
/// matters in the first word, so `--env A=b` stays readable).
fn typed(argv: &[String]) -> String {
    let words: Vec<String> = argv
        .iter()
        .enumerate()
        .map(|(index, arg)| {
            let without_equals = arg.replace('=', "");
            if index > 0 && !without_equals.is_empty() && shell_quote(&without_equals) == without_equals {
                arg.clone()
            } else {
                shell_quote(arg)
            }
        })
        .collect();
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::typed;

    #[test]
    fn commands_read_back_as_their_argv() {
        let argv: Vec<String> =
            ["podman", "create", "--env", "A=b", "--label", "id=(not pulled yet)", "--entrypoint", "[\"sleep\"]", "x"]
                .map(String::from)
                .into();
        assert_eq!(typed(&argv), "podman create --env A=b --label 'id=(not pulled yet)' --entrypoint '[\"sleep\"]' x");
        assert_eq!(typed(&["A=b".to_string(), "=".to_string()]), "'A=b' '='");
    }
}
