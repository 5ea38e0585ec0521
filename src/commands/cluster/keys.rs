//! `cluster keys add NAME [--models A,B] [--rpm N] [--tpm N] | list | rm NAME`: the keys per user
//! at the cluster's endpoint, asked of the cluster's head alone. `add` prints the new key once
//! (on stdout, alone on its line; with --json, as `key`): it is kept nowhere else.

use crate::commands::arg_values::bounded;
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::cluster::keys::{add_key, list_keys, remove_key, KeyAsk};
use crate::cluster::{with_our_nodes, ClusterSettings};
use crate::error::Result;
use crate::node::router_keys::KeysReport;
use crate::output::{Output, Render, Style};

/// `cluster keys`.
#[derive(Debug, Clone, Subcommand)]
pub enum KeysCommand {
    /// Make a key named NAME and print it, once: only its SHA-256 is kept, on the cluster's head.
    Add(KeysAddArgs),
    /// Every key by name, with its models and rates (never a key).
    List,
    /// Remove the key NAME: refused from the next second on.
    Rm(KeysRmArgs),
}

/// `cluster keys add NAME`.
#[derive(Debug, Clone, Args)]
pub struct KeysAddArgs {
    /// Its name (letters, digits, `.`, `_`, `-`): in `keys list`, the router's metrics and refusals.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// The services it may use, by name [default: every one].
    #[arg(long, value_name = "A,B,...", value_delimiter = ',')]
    pub models: Vec<String>,

    /// Requests a minute it may send [default: no limit].
    #[arg(long, value_name = "N", value_parser = bounded::<u64>(1, u32::MAX as u64))]
    pub rpm: Option<u64>,

    /// Tokens a minute its answers may count (the engines' usage, prompt and completion) [default:
    /// no limit].
    #[arg(long, value_name = "N", value_parser = bounded::<u64>(1, u64::MAX >> 1))]
    pub tpm: Option<u64>,
}

/// `cluster keys rm NAME`.
#[derive(Debug, Clone, Args)]
pub struct KeysRmArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// A key just made, as it is shown: the one time its value is.
#[derive(Serialize)]
struct NewKey {
    name: String,
    key: String,
    #[serde(flatten)]
    keys: KeysReport,
}

pub(super) async fn run(cluster: &ClusterSettings, command: &KeysCommand, out: &Output) -> Result<i32> {
    // The keys live with the router, on the cluster's head: only it is asked.
    let head = ClusterSettings { nodes: cluster.nodes.iter().take(1).cloned().collect(), ..cluster.clone() };
    with_our_nodes(&head, "no key was changed", async |nodes| {
        match command {
            KeysCommand::Add(args) => {
                let ask = KeyAsk { name: args.name.clone(), models: args.models.clone(), rpm: args.rpm, tpm: args.tpm };
                let (key, keys) = add_key(nodes[0], &ask).await?;
                out.report(&NewKey { name: ask.name, key: key.expose().to_string(), keys });
            }
            KeysCommand::List => out.report(&list_keys(nodes[0]).await?),
            KeysCommand::Rm(args) => out.report(&remove_key(nodes[0], &args.name).await?),
        }
        Ok(0)
    })
    .await
}

impl Render for NewKey {
    fn render(&self, out: &Output) {
        out.line(&self.key);
        out.line(&format!(
            "{} key {} made: shown this once, only its hash is kept ({}). Clients send it as `Authorization: \
             Bearer KEY` (the openai client's api_key).",
            out.paint("✓", Style::Ok),
            self.name,
            self.keys.file
        ));
    }
}

impl Render for KeysReport {
    fn render(&self, out: &Output) {
        if self.keys.is_empty() {
            out.line("no key per user (`strix-toolbox cluster keys add NAME` makes one)");
            return;
        }
        out.line(&format!("{:<20} {:<30} {:>8} {:>10}  CREATED", "NAME", "MODELS", "RPM", "TPM"));
        for key in &self.keys {
            let models = if key.models.is_empty() { "(every one)".to_string() } else { key.models.join(",") };
            let rate = |rate: Option<u64>| rate.map_or("-".to_string(), |n| n.to_string());
            out.line(&format!(
                "{:<20} {:<30} {:>8} {:>10}  {}",
                key.name,
                models,
                rate(key.rpm),
                rate(key.tpm),
                key.created
            ));
        }
    }
}
