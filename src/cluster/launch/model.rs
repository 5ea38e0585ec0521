//! The model before anything starts: a Hub model looked up in the cache of every node that loads
//! it and pulled (from the Hub once) when a node lacks it; a Hub GGUF's file(s) on the head alone.
//! A dry run only looks.

use super::pinned::{not_in_every_cache, pinned_commit, revision_asked};
use super::request::LaunchRequest;
use crate::cluster::hub_gguf::{gguf_on_head, HeadGguf};
use crate::cluster::model::{cached_everywhere, ensure_everywhere, CachedEverywhere, ModelPullRequest};
use crate::error::Result;
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::model::revision::Revision;
use crate::model::source::ModelSource;
use crate::node::Node;
use crate::reporter::Reporter;
use crate::serving::state::ServeCheckReport;

/// A Hub model (None for a path), with the revision asked for (a relaunch's: the commit it
/// served) and whether the cache of every node that loads it has it.
pub(super) struct ModelLookup {
    repo: RepoId,
    revision: Option<Revision>,
    cached: Option<CachedEverywhere>,
}

pub(super) async fn look_up_model(nodes: &[&dyn Node], request: &LaunchRequest) -> Result<Option<ModelLookup>> {
    let ModelSource::Hub(repo) = &request.source else { return Ok(None) };
    let revision = revision_asked(request)?;
    let cached = cached_everywhere(nodes, repo, revision.as_ref().unwrap_or(&Revision::main())).await?;
    Ok(Some(ModelLookup { repo: repo.clone(), revision, cached }))
}

/// A Hub model in every node's cache before anything starts: pulled when a node lacks it (a dry
/// run only looks); a relaunch's commit is never pulled: its absence is the relaunch's failure.
pub(super) async fn model_in_every_cache(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    model: Option<ModelLookup>,
    reporter: &dyn Reporter,
) -> Result<Option<(RepoId, Option<CachedEverywhere>)>> {
    let Some(ModelLookup { repo, revision, cached }) = model else { return Ok(None) };
    if request.only_looks() || cached.is_some() {
        return Ok(Some((repo, cached)));
    }
    if let Some(commit) = pinned_commit(request) {
        return Err(not_in_every_cache(request, &repo, &commit));
    }
    let pull = ModelPullRequest {
        toolbox: request.toolbox.clone(),
        repo: repo.clone(),
        revision,
        hub_env: request.hub_env.clone(),
        hf_token: request.hf_token.clone(),
        gguf: None,
    };
    Ok(Some((repo, Some(ensure_everywhere(nodes, &pull, reporter).await?))))
}

/// A Hub GGUF: its file(s) alone, on the head alone (a dry run downloads nothing); a relaunch's
/// at the commit it was pulled at.
pub(super) async fn gguf_on_the_head(
    nodes: &[&dyn Node],
    request: &LaunchRequest,
    reporter: &dyn Reporter,
) -> Result<Option<HeadGguf>> {
    let ModelSource::HubGguf { repo, pick } = &request.source else { return Ok(None) };
    if request.only_looks() {
        return Ok(None);
    }
    let pull = ModelPullRequest {
        toolbox: request.toolbox.clone(),
        repo: repo.clone(),
        revision: pinned_commit(request).map(|commit| Revision::parse(commit.as_str())).transpose()?,
        hub_env: request.hub_env.clone(),
        hf_token: request.hf_token.clone(),
        gguf: Some(pick.clone()),
    };
    Ok(Some(gguf_on_head(nodes[0], &pull, reporter).await?))
}

/// The model's identity as the checks found it before anything starts: a GGUF file's hash on the
/// head, a Hub model's commit in every node's cache; None when it is not known yet (a dry run
/// hashes nothing, a model still to be pulled, a Hub GGUF read on the head later).
pub(super) fn identity(
    head: &ServeCheckReport,
    model: Option<&ModelLookup>,
    request: &LaunchRequest,
) -> Option<ModelIdentity> {
    match &request.source {
        ModelSource::Path(path) => Some(ModelIdentity::Gguf {
            name: std::path::Path::new(path).file_name()?.to_string_lossy().into_owned(),
            sha256: head.sha256.clone()?,
        }),
        ModelSource::Hub(_) => {
            let model = model?;
            let cached = model.cached.as_ref()?;
            Some(ModelIdentity::Hub { repo: model.repo.to_string(), commit: cached.commit.to_string() })
        }
        _ => None,
    }
}
