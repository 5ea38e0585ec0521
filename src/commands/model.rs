//! `model pull|list` on this node, and `cluster model pull|list` on every node: the same pull
//! (`cluster::model`), over this machine or over ssh.

use crate::check::Status;
use crate::cluster::model::{model_list, model_pull, ModelListReport, ModelPullReport, ModelPullRequest, NodeModels};
use crate::error::Result;
use crate::model::gguf_pick::GgufPick;
use crate::model::hub_env::forwarded_hub_env;
use crate::model::list::ModelList;
use crate::model::repo_id::RepoId;
use crate::model::revision::Revision;
use crate::model::source::ModelSource;
use crate::node::Node;
use crate::output::{Output, Render, Row, Style};
use crate::reporter::Bytes;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Clone, Subcommand)]
pub enum ModelCommand {
    /// Download MODEL into the Hugging Face cache with huggingface_hub in the toolbox (in a
    /// cluster, the head's) and check every file against its hash; in a cluster every other node
    /// then gets the same snapshot over the cluster link (only the files it lacks or holds wrong).
    Pull(ModelPullArgs),
    /// The cached models (in a cluster, each node's): revisions and refs, commit, files, size,
    /// complete or not (`--verify`: every file hashed).
    List(ModelListArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ModelPullArgs {
    /// The model's Hugging Face id (`org/name`); `org/name:QUANT` pulls only that GGUF's file(s),
    /// picked as `llama-server -hf` picks them.
    #[arg(value_name = "MODEL")]
    pub model: String,

    /// Only this GGUF file of the repository (its path there; of a split model, the first part).
    #[arg(long, value_name = "NAME.gguf")]
    pub file: Option<String>,

    /// A branch, tag or commit [default: main].
    #[arg(long, value_name = "REVISION")]
    pub revision: Option<String>,

    /// Read the Hugging Face token from FILE [default: the HF_TOKEN environment variable]. It
    /// reaches huggingface_hub through its environment, never a command line, a log or a report.
    #[arg(long, value_name = "FILE")]
    pub hf_token_file: Option<PathBuf>,

    /// The toolbox whose huggingface_hub downloads.
    #[arg(long, env = "TOOLBOX_NAME", default_value = "vllm")]
    pub name: String,
}

#[derive(Debug, Clone, Args)]
pub struct ModelListArgs {
    /// Only this model.
    #[arg(value_name = "MODEL")]
    pub model: Option<String>,

    /// Hash every file against its name (reads every byte: minutes for a large model).
    #[arg(long)]
    pub verify: bool,
}

/// A model command, its arguments checked (before any node is asked).
pub enum ModelRequest {
    Pull(ModelPullRequest),
    List(ModelList),
}

impl ModelRequest {
    /// MODEL is checked as huggingface_hub's `validate_repo_id` would, and so is `--revision`.
    pub fn parse(command: &ModelCommand) -> Result<ModelRequest> {
        Ok(match command {
            ModelCommand::Pull(args) => {
                let (repo, gguf) = repo_and_gguf(&args.model, args.file.as_deref())?;
                ModelRequest::Pull(ModelPullRequest {
                    toolbox: args.name.clone(),
                    repo,
                    revision: args.revision.as_deref().map(Revision::parse).transpose()?,
                    hub_env: forwarded_hub_env(std::env::vars()),
                    hf_token: super::secrets::hf_token(args.hf_token_file.as_deref())?,
                    gguf,
                })
            }
            ModelCommand::List(args) => ModelRequest::List(ModelList {
                repo: args.model.as_deref().map(RepoId::parse).transpose()?,
                verify: args.verify,
            }),
        })
    }
}

/// The repository MODEL names, and the GGUF of it (`:QUANT`, `--file`) when only that is wanted.
fn repo_and_gguf(model: &str, file: Option<&str>) -> Result<(RepoId, Option<GgufPick>)> {
    let source = if file.is_some() { ModelSource::gguf(model, file)? } else { ModelSource::of(model) };
    match source {
        ModelSource::HubGguf { repo, pick } => Ok((repo, Some(pick))),
        ModelSource::Hub(repo) => Ok((repo, None)),
        // Not a Hub id: the id's own error says why.
        ModelSource::Path(_) => Ok((RepoId::parse(model)?, None)),
    }
}

/// Run `request` on `nodes` (the head first); `unreachable` are the nodes that could not be
/// asked, with why.
pub async fn run(
    request: &ModelRequest,
    nodes: &[&dyn Node],
    unreachable: Vec<(String, String)>,
    out: &Output,
) -> Result<i32> {
    match request {
        ModelRequest::Pull(pull) => {
            out.report(&model_pull(nodes, pull, out.reporter().as_ref()).await?);
            Ok(0)
        }
        ModelRequest::List(list) => {
            let mut report = model_list(nodes, list).await;
            report.nodes.extend(unreachable.into_iter().map(|(node, error)| NodeModels {
                node,
                cache: None,
                error: Some(error),
            }));
            out.report(&report);
            let bad = report.nodes.iter().any(|node| {
                node.error.is_some()
                    || node
                        .cache
                        .iter()
                        .flat_map(|c| &c.repos)
                        .flat_map(|r| &r.revisions)
                        .any(|r| r.verified == Some(false))
            });
            Ok(i32::from(bad))
        }
    }
}

impl Render for ModelPullReport {
    fn render(&self, out: &Output) {
        out.line(&format!(
            "{} {} at {} ({}): {} file(s), {}",
            out.paint("✓", Style::Ok),
            self.repo,
            self.commit,
            self.revision,
            self.files,
            Bytes(self.bytes)
        ));
        let head = &self.head;
        let repaired = |files: &[String]| {
            if files.is_empty() {
                String::new()
            } else {
                format!("; {} was wrong and was fetched again", files.join(", "))
            }
        };
        out.line(&format!(
            "  {}  {} from the Hub (huggingface_hub {}), every file verified{}",
            out.paint(&head.node, Style::Bold),
            Bytes(head.downloaded_bytes),
            head.hub_version,
            repaired(&head.repaired)
        ));
        if let Some(first) = self.gguf_files.first() {
            let parts = if self.gguf_files.len() > 1 {
                format!(" (and {} more part(s))", self.gguf_files.len() - 1)
            } else {
                String::new()
            };
            out.line(&format!("  GGUF {}{parts}: llama.cpp serves it from the head's cache", first.path));
        }
        for node in &self.nodes {
            out.line(&format!(
                "  {}  {} over the cluster link ({} file(s)), {} kept{}",
                out.paint(&node.node, Style::Bold),
                Bytes(node.fetched_bytes),
                node.fetched,
                node.kept,
                repaired(&node.repaired)
            ));
        }
        out.line(&format!(
            "Hub: {} once; cluster link: {}; {:.0} s. vLLM finds it offline (HF_HUB_OFFLINE=1) with --revision {}",
            Bytes(self.head.downloaded_bytes),
            Bytes(self.link_bytes),
            self.seconds,
            self.commit
        ));
    }
}

impl Render for ModelListReport {
    fn render(&self, out: &Output) {
        let names: Vec<String> = self.nodes.iter().map(|n| n.node.clone()).collect();
        // Every (model, commit) any node has, with every ref any node gives it.
        let mut rows: Vec<(String, String, Vec<String>)> = Vec::new();
        for cache in self.nodes.iter().filter_map(|n| n.cache.as_ref()) {
            for repo in &cache.repos {
                for revision in &repo.revisions {
                    let key = (repo.repo.to_string(), revision.commit.to_string());
                    match rows.iter_mut().find(|(r, c, _)| (r, c) == (&key.0, &key.1)) {
                        Some((_, _, refs)) => {
                            for name in &revision.refs {
                                if !refs.contains(name) {
                                    refs.push(name.clone());
                                }
                            }
                        }
                        None => rows.push((key.0, key.1, revision.refs.clone())),
                    }
                }
            }
        }
        rows.sort();
        if rows.is_empty() {
            out.line("no model in any node's Hugging Face cache");
        }
        let table: Vec<Row> = rows
            .iter()
            .map(|(repo, commit, refs)| {
                let label = format!(
                    "{repo}@{}{}",
                    &commit[..12],
                    if refs.is_empty() { String::new() } else { format!(" ({})", refs.join(", ")) }
                );
                let cells = self.nodes.iter().map(|node| cell(node, repo, commit)).collect();
                (label, cells)
            })
            .collect();
        if !table.is_empty() {
            out.node_table(&names, &table);
        }
        for node in &self.nodes {
            if let Some(error) = &node.error {
                out.line(&format!("{} {}: {error}", out.paint("error", Style::Fail), node.node));
            }
            let problems = node.cache.iter().flat_map(|c| &c.repos).flat_map(|r| {
                r.revisions.iter().filter(|v| !v.missing.is_empty() || !v.bad.is_empty()).map(move |v| (r, v))
            });
            for (repo, revision) in problems {
                let mut said = Vec::new();
                if !revision.missing.is_empty() {
                    said.push(format!("missing {}", revision.missing.join(", ")));
                }
                if !revision.bad.is_empty() {
                    said.push(format!("wrong hash: {}", revision.bad.join(", ")));
                }
                out.warn(&format!(
                    "{}: {}@{}: {}. Fix: `strix-toolbox cluster model pull {} --revision {}`",
                    node.node,
                    repo.repo,
                    revision.commit.short(),
                    said.join("; "),
                    repo.repo,
                    revision.commit
                ));
            }
        }
    }
}

/// One node's cell for a model at a commit.
fn cell(node: &NodeModels, repo: &str, commit: &str) -> (Option<Status>, String) {
    let Some(cache) = &node.cache else { return (Some(Status::Fail), "unreachable".into()) };
    let found = cache
        .repos
        .iter()
        .filter(|r| r.repo.as_str() == repo)
        .flat_map(|r| &r.revisions)
        .find(|r| r.commit.as_str() == commit);
    let Some(revision) = found else { return (None, "-".into()) };
    let size = format!("{} file(s), {}", revision.files, Bytes(revision.bytes));
    match (revision.complete, revision.verified) {
        (_, Some(false)) => (Some(Status::Fail), format!("{} bad: {size}", revision.bad.len())),
        (false, _) => (Some(Status::Warn), format!("incomplete: {size}")),
        (true, Some(true)) => (Some(Status::Pass), format!("verified: {size}")),
        (true, None) => (Some(Status::Pass), size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_of_a_quant_or_a_file_is_only_that_gguf() {
        let (repo, gguf) = repo_and_gguf("acme/tiny-GGUF:Q8_0", None).unwrap();
        assert_eq!((repo.as_str(), gguf), ("acme/tiny-GGUF", Some(GgufPick::Quant("Q8_0".into()))));
        let (_, gguf) = repo_and_gguf("acme/tiny-GGUF", Some("t-F16.gguf")).unwrap();
        assert_eq!(gguf, Some(GgufPick::File("t-F16.gguf".into())));
        assert_eq!(repo_and_gguf("acme/tiny", None).unwrap().1, None, "the whole repository");
        assert!(repo_and_gguf("/models/x", None).is_err(), "no Hub id");
    }
}
