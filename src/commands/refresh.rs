//! `refresh [latest|dev]`: pull (or build) the image, then create or update the toolbox atomically.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use crate::cli::{RefreshArgs, RefreshOptions};
use crate::error::{Error, Result};
use crate::image::reference::{default_name, parse_channel};
use crate::ops::refresh::{refresh, ImageSource, RefreshReport, RefreshRequest};
use crate::output::{Style, Ui};
use crate::settings::Settings;

pub async fn run(args: &RefreshArgs, settings: &Settings) -> Result<i32> {
    let report = refresh(settings, &request(&args.options, args.rccl.clone())?).await?;
    if settings.ui.json {
        settings.ui.print_json(&report);
    } else {
        print_report(&report, &settings.ui);
    }
    Ok(0)
}

/// The refresh the options ask for (built from `rccl` when given), on this node or every node.
pub fn request(options: &RefreshOptions, rccl: Option<PathBuf>) -> Result<RefreshRequest> {
    let (name, image_ref) = target(options)?;
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
    };
    request.validate()?;
    Ok(request)
}

/// The toolbox's name and image reference; the channel is asked on a terminal when not given.
fn target(options: &RefreshOptions) -> Result<(String, String)> {
    let channel = match &options.channel {
        Some(channel) => parse_channel(channel)?,
        // A full --image names its own tag: nothing to ask.
        None if options.image.is_some() => "latest",
        None => ask_channel()?,
    };
    let name = options.name.clone().unwrap_or_else(|| default_name(channel));
    let image_ref = options.image.clone().unwrap_or_else(|| format!("{}:{channel}", options.image_repo));
    Ok((name, image_ref))
}

/// On a terminal, ask which channel (latest is the default); otherwise latest.
fn ask_channel() -> Result<&'static str> {
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok("latest");
    }
    eprint!("Channel? [latest/dev] (latest): ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Error::Failed(format!("cannot read the answer: {e}")))?;
    match answer.trim() {
        "" => Ok("latest"),
        other => parse_channel(other),
    }
}

/// The text form: the plan with its commands for a dry run, else one line of outcome.
pub fn print_report(report: &RefreshReport, ui: &Ui) {
    for warning in &report.warnings {
        ui.warn(warning);
    }
    if report.dry_run {
        println!("{} (dry run; nothing changed)", ui.paint("Plan", Style::Bold));
        if report.pull {
            println!("  0. pull {0}\n       {1} pull {0}", report.image, report.engine.program());
        }
        for (index, step) in report.steps.iter().enumerate() {
            println!("  {}. {}", index + 1, step.description);
            for command in &step.commands {
                println!("       {}", command.join(" "));
            }
        }
        println!("Result would be: {} ({})", report.action.as_str(), report.reason);
        return;
    }
    eprintln!(
        "{} {} {} ({}) from {} [{}]",
        ui.paint("✓", Style::Ok),
        report.name,
        report.action.as_str(),
        report.reason,
        report.image,
        report.pin.as_deref().unwrap_or("unpinned")
    );
    eprintln!("  enter it with: strix-toolbox enter {}", report.name);
}
