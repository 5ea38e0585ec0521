//! `launch MODEL` on this node, and `cluster launch MODEL` on every node: the same launch (see
//! `cluster::launch`), over this machine or over ssh.

use std::time::Duration;

use crate::cli::LaunchArgs;
use crate::cluster::launch::{launch, LaunchReport, LaunchRequest};
use crate::cluster::ssh::shell_quote;
use crate::error::{Error, Result};
use crate::node::Node;
use crate::output::{Style, Ui};
use crate::serving::secret::Secret;
use crate::spec::parse_env;

/// Launch on `nodes` and render the report; the exit code.
pub async fn run(args: &LaunchArgs, nodes: &[&dyn Node], ui: &Ui) -> Result<i32> {
    let request = request(args)?;
    let progress = ui.progress();
    let report = launch(nodes, &request, &progress).await?;
    if ui.json {
        ui.print_json(&report);
    } else {
        print_report(&report, ui);
    }
    Ok(0)
}

fn request(args: &LaunchArgs) -> Result<LaunchRequest> {
    Ok(LaunchRequest {
        toolbox: args.name.clone(),
        model: args.model.clone(),
        tp: args.tp,
        port: args.port,
        timeout: Duration::from_secs(args.timeout.max(1)),
        replace: args.replace,
        dry_run: args.dry_run,
        extra: args.extra.clone(),
        env: parse_env(&args.env)?,
        hf_token: hf_token(args)?,
    })
}

/// `--hf-token-file FILE`, else `HF_TOKEN` from the environment; never from the command line.
fn hf_token(args: &LaunchArgs) -> Result<Option<Secret>> {
    let token = match &args.hf_token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
            let token = text.trim().to_string();
            if token.is_empty() {
                return Err(Error::Usage(format!("{} holds no token", path.display())));
            }
            Some(token)
        }
        None => std::env::var("HF_TOKEN").ok().filter(|t| !t.trim().is_empty()),
    };
    Ok(token.map(Secret::new))
}

fn print_report(report: &LaunchReport, ui: &Ui) {
    if report.dry_run {
        println!("{} (dry run; nothing started)", ui.paint("Launch plan", Style::Bold));
        for node in &report.nodes {
            println!("{} ({:?}, {})", ui.paint(&node.node, Style::Bold), node.role, node.link_ip);
            for command in &node.commands {
                let env: Vec<String> = command.env.iter().map(|(k, v)| shell_quote(&format!("{k}={v}"))).collect();
                let argv: Vec<String> = command.argv.iter().map(|a| shell_quote(a)).collect();
                println!("  env {} \\\n      {}", env.join(" "), argv.join(" "));
            }
        }
        println!("endpoint would be {}", report.endpoint);
        return;
    }
    let nodes = report.nodes.len();
    println!(
        "{} serving {} at {} (tensor parallel {} over {nodes} node{}, {:.0} s)",
        ui.paint("✓", Style::Ok),
        report.model,
        report.endpoint,
        report.tp,
        if nodes == 1 { "" } else { "s" },
        report.seconds_to_serve.unwrap_or_default()
    );
    println!("  try: {}", report.curl_example());
}
