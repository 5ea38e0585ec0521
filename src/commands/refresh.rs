//! `refresh [latest|dev]`: pull (or build) the image, then create or update the toolbox atomically:
//! `cluster refresh` on a cluster of one node, this machine.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{RefreshArgs, RefreshOptions};
use crate::cluster::refresh::refresh_nodes;
use crate::cluster::spread::SpreadSettings;
use crate::error::{Error, Result};
use crate::node::ssh::shell_quote;
use crate::node::Node;
use crate::ops::refresh::{ImageSource, RefreshReport, RefreshRequest};
use crate::output::{Output, Render, Style};
use crate::serving::engine::EngineRef;

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
