//! A service launched again from its record (the watch's relaunch, the canary's serve-again)
//! serves what served: the recorded weights on the recorded image. What the nodes hold now
//! decides nothing: a Hub model is served at the recorded commit, not at what `main` (or the
//! operator's `--revision`) names in the caches since a `model pull`; a Hub GGUF is pulled at the
//! commit it was pulled at; and whatever the launch finds must be the recorded weights (a GGUF by
//! its content) on the recorded image, else nothing starts and the error names both. A relaunch
//! never pulls a commit the caches lost (a watch would download for minutes inside its grace,
//! after the operator chose to remove it) and never serves on another image (the canary proves
//! an image; nothing else switches one).

use super::request::LaunchRequest;
use crate::error::{Error, Result};
use crate::model::identity::ModelIdentity;
use crate::model::repo_id::RepoId;
use crate::model::revision::{Commit, Revision};
use crate::model::source::ModelSource;
use crate::serving::engine_args::{EngineArgs, REVISION};
use crate::serving::record::ServingRecord;

/// What a relaunch must serve again, exactly, as its record says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinned {
    /// The weights it served (None: a model given as a directory, a record from before
    /// identities were recorded: nothing to hold the launch to).
    pub identity: Option<ModelIdentity>,
    /// The Hub commit its GGUF was pulled at (a Hub GGUF: `identity` is the file's content).
    pub gguf_commit: Option<Commit>,
    /// The toolbox image it served on: the registry digest, else the image id (None: unrecorded).
    pub image: Option<String>,
    /// That image's id, which every node says alike (None: a record from before it was kept).
    pub image_id: Option<String>,
}

impl Pinned {
    pub fn of(record: &ServingRecord) -> Pinned {
        Pinned {
            identity: record.identity.clone(),
            gguf_commit: record.gguf_commit.as_deref().and_then(Commit::parse),
            image: Some(record.image.clone()).filter(|image| !image.is_empty()),
            image_id: record.image_id.clone(),
        }
    }

    /// The commit the model is read at: a Hub model's recorded commit, a Hub GGUF's.
    fn commit(&self, source: &ModelSource) -> Option<Commit> {
        match (source, &self.identity) {
            (ModelSource::Hub(repo), Some(ModelIdentity::Hub { repo: served, commit })) if served == repo.as_str() => {
                Commit::parse(commit)
            }
            (ModelSource::HubGguf { .. }, _) => self.gguf_commit.clone(),
            _ => None,
        }
    }

    /// The relaunch on another image than the one it served on: refused before anything starts
    /// (`runs` and `runs_id`: the image the service's head's toolbox runs now, as a pull names it
    /// and by its id). Images are the same by their ids, which every node says alike; a record
    /// from before ids were kept, by its reference.
    pub(super) fn refuse_another_image(
        &self,
        request: &LaunchRequest,
        runs: Option<&str>,
        runs_id: Option<&str>,
    ) -> Result<()> {
        let same = match (self.image_id.as_deref(), runs_id) {
            (Some(served), Some(now)) => served == now,
            _ => match (self.image.as_deref(), runs) {
                (Some(served), Some(now)) => served == now,
                _ => true,
            },
        };
        let (Some(served), Some(runs)) = (self.image.as_deref(), runs) else { return Ok(()) };
        if same {
            return Ok(());
        }
        let service = &request.service;
        Err(Error::Toolbox {
            name: request.toolbox.clone(),
            message: format!(
                "{service} served on image {served}, and toolbox {} runs image {runs} now: a relaunch serves on the \
                 image it served on, never another (only the canary changes what an image serves); nothing was \
                 started",
                request.toolbox
            ),
            fix: Some(format!(
                "serve it on the image that runs now by launching it again yourself (`strix-toolbox cluster launch {} \
                 --name {service} --replace` with its flags), or put the nodes back on the image it served on \
                 (`strix-toolbox cluster refresh --image REPOSITORY@{served}`)",
                request.model
            )),
        })
    }

    /// The relaunch about to serve other weights than it served (`found`: what the launch found
    /// where it reads the model): refused before anything starts.
    pub(super) fn refuse_other_weights(&self, request: &LaunchRequest, found: Option<&ModelIdentity>) -> Result<()> {
        let Some(served) = &self.identity else { return Ok(()) };
        if found == Some(served) {
            return Ok(());
        }
        let now = found.map_or_else(|| "weights it cannot name".to_string(), ToString::to_string);
        let service = &request.service;
        Err(Error::Host {
            what: request.model.clone(),
            message: format!(
                "{service} served {served}, and its relaunch found {now}: a relaunch serves the weights that served, \
                 never others; nothing was started"
            ),
            fix: Some(format!(
                "put those weights back where the launch reads them, or serve what is there now by launching it again \
                 yourself (`strix-toolbox cluster launch {} --name {service} --replace` with its flags)",
                request.model
            )),
        })
    }
}

/// The commit a relaunch reads its model at (None: a launch as asked, or nothing pinned).
pub(super) fn pinned_commit(request: &LaunchRequest) -> Option<Commit> {
    request.pinned.as_ref()?.commit(&request.source)
}

/// The revision the launch reads a Hub model at: the pinned commit, else the operator's
/// `--revision` (None: `main`).
pub(super) fn revision_asked(request: &LaunchRequest) -> Result<Option<Revision>> {
    match pinned_commit(request) {
        Some(commit) => Revision::parse(commit.as_str()).map(Some),
        None => request.extra.value(REVISION).map(Revision::parse).transpose(),
    }
}

/// The engine's arguments without the operator's `--revision` when a commit is pinned: the
/// engine is then given the commit (vLLM's `--revision COMMIT`), never a branch or tag that
/// names another commit in the caches since.
pub(super) fn without_asked_revision(request: &LaunchRequest, extra: EngineArgs) -> EngineArgs {
    if pinned_commit(request).is_none() {
        return extra;
    }
    extra.without(&[REVISION])
}

/// The commit `service` served, which not every node of it has whole in its cache any more: the
/// relaunch fails rather than pull it or serve another.
pub(super) fn not_in_every_cache(request: &LaunchRequest, repo: &RepoId, commit: &Commit) -> Error {
    let service = &request.service;
    Error::Host {
        what: format!("{repo}@{}", commit.short()),
        message: format!(
            "{service} served {repo} at commit {commit}, which not every node of it has whole in its cache any more: \
             a relaunch serves the revision that served, never another; nothing was started"
        ),
        fix: Some(format!(
            "`strix-toolbox cluster model pull {repo} --revision {commit}` puts it back on every node (`strix-toolbox \
             cluster model list {repo}` shows which lacks it), or serve what the caches have now by launching it \
             again yourself (`strix-toolbox cluster launch {repo} --name {service} --replace` with its flags)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::super::model::{look_up_model, model_in_every_cache};
    use super::*;
    use crate::cluster::canary::tests::llama_launch;
    use crate::cluster::testing::{as_nodes, nodes, TestNode};
    use crate::model::blob::BlobName;
    use crate::model::cache::HubCache;
    use crate::paths::Paths;
    use crate::reporter::Silent;
    use crate::serving::engine::Backend;
    use crate::serving::record::Role;
    use crate::serving::vllm::VLLM;

    const MODEL: &str = "org/tiny";

    fn commit(digit: char) -> Commit {
        Commit::parse(&digit.to_string().repeat(40)).unwrap()
    }

    fn hub(commit: &Commit) -> ModelIdentity {
        ModelIdentity::Hub { repo: MODEL.into(), commit: commit.to_string() }
    }

    fn gguf(sha: char) -> ModelIdentity {
        ModelIdentity::Gguf { name: "tiny-Q8_0.gguf".into(), sha256: sha.to_string().repeat(64) }
    }

    /// vLLM serving MODEL from the Hub, launched again from a record that says `pinned`.
    fn relaunch(extra: &[&str], pinned: Option<Pinned>) -> LaunchRequest {
        LaunchRequest {
            engine: VLLM,
            source: ModelSource::of(MODEL),
            extra: EngineArgs::new(extra.iter().map(|word| word.to_string()).collect()),
            pinned,
            ..llama_launch(MODEL)
        }
    }

    fn pinned_to(identity: ModelIdentity) -> Option<Pinned> {
        Some(Pinned { identity: Some(identity), ..Pinned::default() })
    }

    #[test]
    fn the_record_pins_its_weights_and_image() {
        let head = std::net::Ipv4Addr::LOCALHOST;
        let endpoint = ServingRecord::endpoint_of(head, 8000);
        let mut record = ServingRecord::new(
            "t",
            "llama",
            "org/t-GGUF:Q8_0",
            "t",
            VLLM,
            Backend::Single,
            Role::Single,
            1,
            8001,
            head,
            head,
            &endpoint,
        );
        assert_eq!(Pinned::of(&record), Pinned::default(), "nothing recorded, nothing pinned");
        record.identity = Some(gguf('a'));
        (record.gguf_commit, record.image) = (Some(commit('c').to_string()), "sha256:old".into());
        let pinned = Pinned::of(&record);
        assert_eq!(
            pinned,
            Pinned {
                identity: Some(gguf('a')),
                gguf_commit: Some(commit('c')),
                image: Some("sha256:old".into()),
                image_id: None
            }
        );
        // The commit the model is read at, by where it comes from.
        let hub_gguf = ModelSource::of("org/t-GGUF:Q8_0");
        assert_eq!(pinned.commit(&hub_gguf), Some(commit('c')), "a Hub GGUF's, at its pull");
        assert_eq!(pinned.commit(&ModelSource::of("/models/t.gguf")), None, "a path has none");
        let served = Pinned { identity: Some(hub(&commit('1'))), ..Pinned::default() };
        assert_eq!(served.commit(&ModelSource::of(MODEL)), Some(commit('1')));
        assert_eq!(served.commit(&ModelSource::of("org/other")), None, "another repository's commit is not its");
    }

    #[test]
    fn a_pinned_commit_wins_over_the_operators_revision_and_main() {
        let pinned = pinned_to(hub(&commit('1')));
        assert_eq!(revision_asked(&relaunch(&[], None)).unwrap(), None, "a launch as asked: main");
        assert_eq!(
            revision_asked(&relaunch(&["--revision", "v1"], None)).unwrap(),
            Some(Revision::parse("v1").unwrap())
        );
        let asked = relaunch(&["--revision", "v1", "--max-model-len", "4096", "--revision=v2"], pinned.clone());
        assert_eq!(revision_asked(&asked).unwrap().map(String::from), Some(commit('1').to_string()));
        // The engine is given the commit (vLLM's plan adds `--revision COMMIT`), not the tag.
        assert_eq!(without_asked_revision(&asked, asked.extra.clone()).words(), ["--max-model-len", "4096"]);
        let as_asked = relaunch(&["--revision", "v1"], None);
        assert_eq!(without_asked_revision(&as_asked, as_asked.extra.clone()).words(), ["--revision", "v1"]);
        // A record that names no commit (a directory, an older record) pins none.
        let unnamed = relaunch(&["--revision", "v1"], Some(Pinned::default()));
        assert_eq!(without_asked_revision(&unnamed, unnamed.extra.clone()).words(), ["--revision", "v1"]);
    }

    #[test]
    fn another_image_is_refused_naming_both_and_the_way_back() {
        let pinned = Pinned { image: Some("sha256:old".into()), ..Pinned::default() };
        let request = relaunch(&[], Some(pinned.clone()));
        assert!(pinned.refuse_another_image(&request, Some("sha256:old"), None).is_ok());
        let error = pinned.refuse_another_image(&request, Some("sha256:new"), None).unwrap_err();
        let said = format!("{error} {}", error.fix().unwrap_or_default());
        for part in [
            "sha256:old",
            "sha256:new",
            "nothing was started",
            "cluster launch org/tiny --name org/tiny",
            "--image REPOSITORY@sha256:old",
        ] {
            assert!(said.contains(part), "{part:?} in {said}");
        }
        assert!(
            Pinned::default().refuse_another_image(&request, Some("sha256:new"), None).is_ok(),
            "no image recorded"
        );
        // The same image named by another digest on the node that runs it now (its index's and
        // its platform manifest's, or none when it was loaded): the same by its id.
        let by_id =
            Pinned { image: Some("sha256:index".into()), image_id: Some("sha256:id1".into()), ..Pinned::default() };
        assert!(by_id.refuse_another_image(&request, Some("sha256:platform"), Some("sha256:id1")).is_ok());
        assert!(by_id.refuse_another_image(&request, Some("sha256:id1"), Some("sha256:id1")).is_ok());
        assert!(
            by_id.refuse_another_image(&request, Some("sha256:index"), Some("sha256:id2")).is_err(),
            "another image"
        );
    }

    #[test]
    fn other_weights_are_refused_naming_both() {
        let pinned = Pinned { identity: Some(gguf('a')), ..Pinned::default() };
        let request = relaunch(&[], Some(pinned.clone()));
        assert!(pinned.refuse_other_weights(&request, Some(&gguf('a'))).is_ok());
        let error = pinned.refuse_other_weights(&request, Some(&gguf('b'))).unwrap_err().to_string();
        assert!(error.contains("sha256:aaaaaaaaaaaa") && error.contains("sha256:bbbbbbbbbbbb"), "{error}");
        assert!(pinned.refuse_other_weights(&request, None).is_err(), "weights it cannot name are not the same");
        assert!(Pinned::default().refuse_other_weights(&request, Some(&gguf('b'))).is_ok(), "none recorded");
    }

    /// A snapshot of MODEL at `at` in `node`'s Hugging Face cache (its own home's), `main` naming
    /// it when `main`: as a pull leaves it.
    fn cached(node: &TestNode, at: &Commit, main: bool) {
        let home = node.host_root.parent().unwrap();
        let cache = HubCache::of(&Paths::under(home)).unwrap();
        assert!(cache.root().starts_with(home), "HF_HOME or HF_HUB_CACHE is set: {}", cache.root().display());
        let repo = cache.repo(&crate::model::repo_id::RepoId::parse(MODEL).unwrap());
        let weights = format!("weights at {at}");
        let blob = BlobName::parse(&format!("{:x}", Sha256::digest(weights.as_bytes()))).unwrap();
        std::fs::create_dir_all(repo.blobs_dir()).unwrap();
        std::fs::write(repo.blob(&blob), weights).unwrap();
        repo.write_link(at, "model.safetensors", &blob).unwrap();
        if main {
            repo.write_ref(&Revision::main(), at).unwrap();
        }
    }

    /// The commit the launch finds in every cache (it would pull when one lacks it).
    async fn found(cluster: &[TestNode], request: &LaunchRequest) -> Result<Option<Commit>> {
        let nodes = as_nodes(cluster);
        let lookup = look_up_model(&nodes, request).await?;
        let found = model_in_every_cache(&nodes, request, lookup, &Silent).await?;
        Ok(found.and_then(|(_, cached)| Some(cached?.commit)))
    }

    #[tokio::test]
    async fn a_relaunch_serves_the_recorded_commit_from_every_cache_or_fails() {
        let cluster = nodes(&["node1", "node2"]);
        // Launched at 1; a pull since moved main to 2 on every node.
        for node in &cluster {
            cached(node, &commit('1'), false);
            cached(node, &commit('2'), true);
        }
        assert_eq!(found(&cluster, &relaunch(&[], None)).await.unwrap(), Some(commit('2')), "a launch: main");
        let again = relaunch(&["--revision", "main"], pinned_to(hub(&commit('1'))));
        assert_eq!(found(&cluster, &again).await.unwrap(), Some(commit('1')), "the relaunch: what served");

        // node2's cache lost it: the relaunch fails, pulling nothing and serving nothing else.
        std::fs::remove_dir_all(
            HubCache::of(&Paths::under(cluster[1].host_root.parent().unwrap()))
                .unwrap()
                .repo(&crate::model::repo_id::RepoId::parse(MODEL).unwrap())
                .snapshot_dir(&commit('1')),
        )
        .unwrap();
        let error = found(&cluster, &again).await.unwrap_err();
        let said = format!("{error} {}", error.fix().unwrap_or_default());
        for part in [
            format!("at commit {}", commit('1')),
            "nothing was started".into(),
            format!("cluster model pull org/tiny --revision {}", commit('1')),
        ] {
            assert!(said.contains(&part), "{part:?} in {said}");
        }
    }
}
