//! `refresh`: facts → spec → (pull or build) → plan → apply, for one toolbox on this node.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::apply::lock::ToolboxLock;
use crate::apply::{apply, interruptible, listen_for_signals};
use crate::container_engine::absent::AbsentEngine;
use crate::container_engine::find::{carried_digests, find_image, not_present_after_pull, FoundImage};
use crate::container_engine::{ContainerEngine, CreateRequest, EngineInfo, EngineKind, ImageInfo};
use crate::error::{Error, Result};
use crate::host::limits::{read_process, ProcessLimits};
use crate::host::{HostFacts, HostRoot};
use crate::image::reference::{validate_container_name, ImageRef};
use crate::labels;
use crate::manager::{self, Manager, ManagerChoice, ManagerKind};
use crate::ops::build::{build_image, BuildRequest, Provenance};
use crate::ops::rccl::check_against;
use crate::plan::pin::pin_tag;
use crate::plan::{
    old_name, plan_refresh, provenance_labels, spec_hash, temp_name, Action, CurrentState, DesiredToolbox, RefreshPlan,
};
use crate::rccl;
use crate::reporter::Reporter;
use crate::serving::engine::EngineRef;
use crate::settings::Settings;
use crate::spec::{parse_env, SpecOptions, ToolboxSpec};
use crate::spread::pull::{pull_through_head, PulledFrom, SpreadSource};
use crate::spread::resolve::resolve_upstream;
use crate::verify::Expected;

/// Where the image comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageSource {
    /// Pull it from its registry (the usual refresh).
    Pull,
    /// Use the local copy as it is (rollback to a pin).
    Local,
    /// Build it here with this RCCL artifact.
    Build(PathBuf),
}

/// One refresh, whoever asked for it (`refresh`, `rollback`, a cluster node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshRequest {
    /// The toolbox's name.
    pub name: String,
    /// The image reference to make it from.
    pub image_ref: String,
    pub source: ImageSource,
    pub manager: ManagerChoice,
    /// Older pins to keep for rollback.
    pub keep: usize,
    pub force: bool,
    pub dry_run: bool,
    /// The user's `--env KEY=VALUE` pairs.
    pub env: Vec<String>,
    /// Stop before the swap, leaving the replacement under its temporary name: a cluster refresh
    /// stages every node first, then swaps them together.
    pub stage_only: bool,
    /// Verify the replacement from the inside before it is swapped in (off: `--no-verify`).
    pub verify: bool,
    /// How long to wait for another refresh of this toolbox to finish; 0 fails at once (a
    /// cluster's node refresh, and what a head that does not send it means).
    #[serde(default)]
    pub lock_wait_seconds: u64,
    /// Pull the image from the head's registry over the cluster link, not from upstream (a
    /// cluster refresh's spread; the image must be named by digest).
    #[serde(default)]
    pub spread: Option<SpreadSource>,
    /// The serving engine the toolbox is for: its spec, and its ENGINE label (a head from before
    /// profiles sends none: vLLM).
    #[serde(default)]
    pub serving: EngineRef,
}

impl RefreshRequest {
    /// Refuse bad names, references and `--env` pairs before anything is touched.
    pub fn validate(&self) -> Result<()> {
        validate_container_name(&self.name)?;
        ImageRef::parse(&self.image_ref)?;
        parse_env(&self.env).map(drop)
    }
}

#[cfg(test)]
impl RefreshRequest {
    /// A unit test's refresh of toolbox `name` from `image_ref`: pulled, native, not verified,
    /// never waiting.
    pub fn for_tests(name: &str, image_ref: &str) -> RefreshRequest {
        RefreshRequest {
            name: name.into(),
            image_ref: image_ref.into(),
            source: ImageSource::Pull,
            manager: ManagerChoice::Native,
            keep: 2,
            force: false,
            dry_run: false,
            env: Vec::new(),
            stage_only: false,
            verify: false,
            lock_wait_seconds: 0,
            spread: None,
            serving: EngineRef::default(),
        }
    }
}

/// What a refresh did (or, dry, would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshReport {
    pub name: String,
    pub image: String,
    pub image_id: String,
    pub digest: Option<String>,
    pub pin: Option<String>,
    pub action: Action,
    pub reason: String,
    pub manager: ManagerKind,
    pub engine: EngineKind,
    pub dry_run: bool,
    /// The image is pulled from its registry first (a dry run only says so).
    pub pull: bool,
    pub steps: Vec<PlannedStep>,
    pub container_args: Vec<String>,
    pub warnings: Vec<String>,
    /// The replacement waiting under its temporary name for the swap (`stage_only`).
    pub staged: Option<String>,
    /// Set when no engine answered this dry run: why, and what the plan assumed instead (an
    /// empty engine with the facts `detect` guesses).
    #[serde(default)]
    pub engine_guessed: Option<String>,
    /// Where the image was pulled from (None: it was here already, or a dry run).
    #[serde(default)]
    pub pulled: Option<PulledFrom>,
    /// The image the toolbox ran before this refresh, by digest (`repo@sha256:…`): what a refresh
    /// back to it takes (a canary's rollback). None: no toolbox, or its image had no digest.
    #[serde(default)]
    pub previous: Option<String>,
}

/// A plan step and its equivalent command lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedStep {
    pub description: String,
    pub commands: Vec<Vec<String>>,
}

pub async fn refresh(settings: &Settings, request: &RefreshRequest) -> Result<RefreshReport> {
    request.validate()?;
    // Ctrl-C and SIGTERM are noted from here, before the first wait on the network: one that
    // comes while the registry is asked stops the refresh at its next interruptible step.
    listen_for_signals();
    // Asked first: the registry answers while the node's facts are read and its engine reached.
    let upstream = AskedDigest::ask(settings, request);
    // The GPU is required once the image is known: a CPU image (its device label) needs none.
    let node = read_node(settings)?;
    match settings.connect().await {
        Ok(connection) => refresh_with(settings, &node, connection.engine(), request, upstream).await,
        // A dry run changes nothing, so it can plan without an engine: against an empty one.
        Err(Error::ContainerEngineUnavailable { message, .. }) if request.dry_run => {
            let engine = AbsentEngine::guessed(settings.engine);
            let mut report = refresh_with(settings, &node, &engine, request, upstream).await?;
            report.engine_guessed = Some(format!("{message}: planned for {}", engine.describe()));
            Ok(report)
        }
        Err(error) => Err(error),
    }
}

/// The node's facts, GPU or none.
pub fn read_node(settings: &Settings) -> Result<(HostRoot, HostFacts)> {
    let root = settings.open_host_root()?;
    let facts = HostFacts::read(&root)?;
    Ok((root, facts))
}

/// The pipeline on an engine already connected: facts → spec → (pull) → plan → apply.
/// `upstream` is the registry's digest for the tag asked for, when it was asked.
pub async fn refresh_with(
    settings: &Settings,
    (root, facts): &(HostRoot, HostFacts),
    engine: &dyn ContainerEngine,
    request: &RefreshRequest,
    upstream: AskedDigest,
) -> Result<RefreshReport> {
    let reporter = settings.reporter.as_ref();
    let extra_env = parse_env(&request.env)?;
    let info = engine.info().await?;
    let manager = manager::choose(request.manager, info.kind, &settings.installed, settings.paths.home())?;

    let options = SpecOptions::new(&info, request.serving.needs(&request.image_ref), extra_env);
    let spec = ToolboxSpec::new(root, facts, &options);
    check_memlock(root, facts, &spec, &info)?;

    // A dry run changes nothing: it neither waits for another refresh nor holds one up.
    let _lock = if request.dry_run {
        None
    } else {
        let wait = Duration::from_secs(request.lock_wait_seconds);
        let waiting = ToolboxLock::wait_for(&settings.paths, &request.name, wait, reporter);
        Some(interruptible(&format!("waiting for the other refresh of {}", request.name), waiting).await?)
    };

    // Pull first (the newest base, for a local build too); a dry run only looks. An image that
    // is already here as its registry names it now cannot be newer upstream: no pull. Named by
    // digest (cluster nodes get `repo@sha256:…`, so a no-op cluster refresh asks the registry
    // once, on the head), or by a tag whose digest the registry gives now; meanwhile the engine
    // says what the toolbox is (a no-op is then a manifest HEAD beside a few inspects).
    let asked = ImageRef::parse(&request.image_ref)?;
    let early_state = matches!(request.source, ImageSource::Pull);
    let (pinned_here, current_early) =
        tokio::try_join!(image_here(engine, &asked, &request.image_ref, upstream), async {
            if early_state {
                current_state(engine, &request.name, &asked).await.map(Some)
            } else {
                Ok(None)
            }
        })?;
    let pulls = !matches!(request.source, ImageSource::Local) && pinned_here.is_none();
    let mut pulled = None;
    let mut pull_warning = None;
    if !request.dry_run && pulls {
        let pulling = async {
            match &request.spread {
                Some(source) => pull_through_head(&settings.paths, engine, &request.image_ref, source, reporter).await,
                None => engine.pull(&request.image_ref, reporter).await.map(|()| (PulledFrom::Upstream, None)),
            }
        };
        let (from, warning) = interruptible(&format!("pulling {}", request.image_ref), pulling).await?;
        (pulled, pull_warning) = (Some(from), warning);
        reporter.finish();
    }
    let image_ref = match &request.source {
        ImageSource::Build(artifact) if request.dry_run => {
            rccl::inspect_artifact(artifact)?.ensure_gfx1151()?;
            local_build_tag(&request.image_ref)?
        }
        ImageSource::Build(artifact) => build_locally(engine, artifact, &request.image_ref, reporter).await?,
        ImageSource::Pull | ImageSource::Local => request.image_ref.clone(),
    };
    // The pinned image found above is the one to use, unless a build made another.
    let found = match (pinned_here, &request.source) {
        (Some(image), ImageSource::Pull) => Some(image),
        _ => find_image(engine, &image_ref).await?,
    };
    let image_known = found.is_some();
    let (image, engine_ref) = match found {
        Some(found) => (found.info, found.engine_ref),
        None if request.dry_run => {
            (ImageInfo { id: "(not pulled yet)".into(), ..Default::default() }, image_ref.clone())
        }
        None => return Err(not_present_after_pull(engine.kind().program(), &image_ref)),
    };

    let image_name = ImageRef::parse(&image_ref)?;
    let image_labels = image.labels.clone();
    // A GPU image (every image but one whose device label says CPU) needs the node's GPU; a dry
    // run that has not pulled the image cannot tell, and says so.
    let mut gpu_warning = None;
    if !labels::computes_on_cpu(&image_labels) {
        match facts.require_gpu(root) {
            Err(error) if request.dry_run && !image_known => {
                gpu_warning =
                    Some(format!("{error} (unless {image_ref} is a CPU image: it is not pulled yet to tell)"));
            }
            checked => checked?,
        }
    }
    let mut desired = desired_toolbox(&request.name, &image_ref, &image_name, image, &spec, manager.as_ref(), &info);
    // The engine is given a reference it resolves (docker: the image's id, when only another
    // registry's name carries its digest); the labels keep the one asked for.
    desired.request.image = engine_ref;
    let (serving, programs) = (request.serving.name(), request.serving.profile().image_programs);
    desired.verify = request.verify.then(|| Expected::new(facts, &spec, &image_labels, serving, programs));
    desired.request.labels.extend(labels::encode_user_env(&request.env).map(|env| (labels::USER_ENV.to_string(), env)));
    desired.request.labels.insert(labels::ENGINE.to_string(), request.serving.name().to_string());
    // Read again when a pull changed what is here (a tag moved back by `image_here` changes no
    // pin, which is what the image list is read for).
    let current = match current_early {
        Some(current) if pulled.is_none() => current,
        _ => current_state(engine, &request.name, &image_name).await?,
    };
    let mut plan = plan_refresh(&desired, &current, request.keep, request.force);
    if request.stage_only {
        plan = plan.staging_only();
    }

    let mut report = report(&desired, &plan, manager.as_ref(), &info, &spec, request, pulls);
    report.image = image_ref.clone();
    report.pulled = pulled;
    report.previous = current.container.as_ref().and_then(|toolbox| {
        let digest = toolbox.labels.get(labels::IMAGE_DIGEST)?;
        Some(format!("{}@{digest}", ImageRef::parse(toolbox.labels.get(labels::IMAGE_REF)?).ok()?.repository))
    });
    report.warnings.extend(pull_warning);
    report.warnings.extend(gpu_warning);
    if !request.dry_run {
        report.warnings.extend(apply(&desired.name, &plan, engine, manager.as_ref(), reporter).await?.warnings);
    }
    if plan.replaces_running {
        let tense = if request.dry_run { "would stop" } else { "stopped" };
        report.warnings.push(format!("{} was running: replacing it {tense} its processes", desired.name));
    }
    Ok(report)
}

/// The image `asked` (`reference`) names, when this node has it already: named by digest and
/// here, or named by a tag whose digest in its registry now (`upstream`) an image here carries.
/// The tag is moved to that image if it named another, as a pull would. None: pull it (the
/// registry did not answer either: the engine's pull then decides, as it always did).
async fn image_here(
    engine: &dyn ContainerEngine,
    asked: &ImageRef,
    reference: &str,
    upstream: AskedDigest,
) -> Result<Option<FoundImage>> {
    if asked.digest.is_some() {
        return find_image(engine, reference).await;
    }
    if !upstream.asked() {
        return Ok(None);
    }
    let (tagged, digest) = tokio::join!(engine.image_inspect(reference), upstream.digest(reference));
    let Some(digest) = digest? else { return Ok(None) };
    let path = asked.path();
    let carries = |image: &ImageInfo| carried_digests(image, &path).any(|carried| carried == digest);
    if let Some(info) = tagged?.filter(|info| carries(info)) {
        return Ok(Some(FoundImage { info, engine_ref: reference.to_string() }));
    }
    let Some(found) = find_image(engine, &format!("{}@{digest}", asked.repository)).await? else { return Ok(None) };
    if let Some(tag) = &asked.tag {
        engine.image_tag(&found.info.id, &asked.repository, tag).await?;
    }
    Ok(Some(FoundImage { engine_ref: reference.to_string(), ..found }))
}

/// The registry's digest for the tag a refresh pulls, asked ahead of everything else (its own
/// task), through the registry API with this node's login: a manifest HEAD, where a pull
/// through the engine costs its whole pull machinery for the same answer.
pub struct AskedDigest(Option<tokio::task::JoinHandle<Result<String>>>);

impl AskedDigest {
    /// Nothing asked: the engine's pull finds out.
    pub fn not_asked() -> AskedDigest {
        AskedDigest(None)
    }

    /// Asked when `request` pulls a tag from its registry (not a dry run, not from the head's
    /// registry, not a reference by digest).
    pub fn ask(settings: &Settings, request: &RefreshRequest) -> AskedDigest {
        let by_tag = ImageRef::parse(&request.image_ref).is_ok_and(|image| image.digest.is_none());
        if !by_tag || request.dry_run || request.spread.is_some() || request.source != ImageSource::Pull {
            return AskedDigest::not_asked();
        }
        let (settings, reference) = (settings.clone(), request.image_ref.clone());
        AskedDigest(Some(tokio::spawn(async move {
            resolve_upstream(&settings, &reference).await.map(|upstream| upstream.digest)
        })))
    }

    /// A digest already known (a unit test's registry).
    #[cfg(test)]
    pub fn known(answer: Result<String>) -> AskedDigest {
        AskedDigest(Some(tokio::spawn(async move { answer })))
    }

    fn asked(&self) -> bool {
        self.0.is_some()
    }

    /// The answer for `reference`; None when the registry could not give it. Ctrl-C or SIGTERM
    /// stops the wait (and the asking, when `self` is dropped): a registry that accepts and never
    /// answers holds nobody up.
    async fn digest(mut self, reference: &str) -> Result<Option<String>> {
        let Some(asking) = self.0.as_mut() else { return Ok(None) };
        let during = format!("asking the registry for {reference}'s digest");
        match interruptible(&during, async { Ok(asking.await) }).await? {
            Ok(Ok(digest)) => Ok(Some(digest)),
            Ok(Err(interrupted @ Error::Interrupted { .. })) => Err(interrupted),
            Ok(Err(_)) | Err(_) => Ok(None),
        }
    }
}

impl Drop for AskedDigest {
    fn drop(&mut self) {
        if let Some(asking) = self.0.take() {
            asking.abort();
        }
    }
}

fn report(
    desired: &DesiredToolbox,
    plan: &RefreshPlan,
    manager: &dyn Manager,
    info: &EngineInfo,
    spec: &ToolboxSpec,
    request: &RefreshRequest,
    pull: bool,
) -> RefreshReport {
    RefreshReport {
        name: desired.name.clone(),
        image: desired.request.image.clone(),
        image_id: desired.image.id.clone(),
        digest: desired.request.labels.get(labels::IMAGE_DIGEST).cloned(),
        pin: desired.pin.clone(),
        action: plan.action,
        reason: plan.reason.clone(),
        manager: manager.kind(),
        engine: info.kind,
        dry_run: request.dry_run,
        pull,
        steps: plan
            .steps
            .iter()
            .map(|s| PlannedStep { description: s.describe(), commands: s.commands(info.kind, manager) })
            .collect(),
        container_args: spec.engine_flags(info.kind),
        warnings: Vec::new(),
        staged: request.stage_only.then(|| plan.staged_name().map(str::to_string)).flatten(),
        engine_guessed: None,
        pulled: None,
        previous: None,
    }
}

fn desired_toolbox(
    name: &str,
    image_ref: &str,
    image_name: &ImageRef,
    image: ImageInfo,
    spec: &ToolboxSpec,
    manager: &dyn Manager,
    engine: &EngineInfo,
) -> DesiredToolbox {
    let mut request = CreateRequest { name: name.to_string(), image: image_ref.to_string(), ..Default::default() };
    spec.add_to(&mut request);
    manager.complete(&mut request, engine);
    let hash = spec_hash(manager.kind(), &request);
    let pin = pin_tag(&image);
    let repository = image_name.repository.clone();
    request.labels.extend(provenance_labels(
        name,
        image_ref,
        &image,
        &repository,
        pin.as_deref(),
        manager.kind(),
        &hash,
    ));
    DesiredToolbox { name: name.to_string(), repository, image, request, spec_hash: hash, pin, verify: None }
}

async fn current_state(engine: &dyn ContainerEngine, name: &str, image: &ImageRef) -> Result<CurrentState> {
    let managed = |c: Option<crate::container_engine::ContainerInfo>| {
        c.filter(|c| c.labels.get(labels::MANAGED).map(String::as_str) == Some("true"))
    };
    // Independent reads: ask for them together.
    let (old, new) = (old_name(name), temp_name(name));
    let (container, left_as_old, left_as_new, images) = tokio::try_join!(
        engine.container_inspect(name),
        engine.container_inspect(&old),
        engine.container_inspect(&new),
        engine.image_list(&image.repository),
    )?;
    Ok(CurrentState { container, left_as_old: managed(left_as_old), left_as_new: managed(left_as_new), images })
}

/// `refresh --rccl FILE`: overlay the artifact on the channel's image here, tagged
/// `localhost/NAME:TAG-rccl`, and return that reference. A rejected artifact stops before the build.
async fn build_locally(
    engine: &dyn ContainerEngine,
    artifact: &Path,
    base: &str,
    reporter: &dyn Reporter,
) -> Result<String> {
    let mut report = rccl::inspect_artifact(artifact)?;
    report.ensure_gfx1151()?;
    check_against(engine, &mut report, base, reporter).await?;
    report.ensure_gfx1151()?;
    let tag = local_build_tag(base)?;
    let source = artifact.display().to_string();
    let provenance = Provenance::new(None, None, Some(&source), artifact);
    let request = BuildRequest::new(&report, &provenance, base, std::slice::from_ref(&tag), false)?;
    interruptible("building the image", build_image(engine, &report, &request, reporter)).await?;
    Ok(tag)
}

/// `docker.io/kyuz0/vllm-therock-gfx1151:dev` → `localhost/vllm-therock-gfx1151:dev-rccl`.
fn local_build_tag(base: &str) -> Result<String> {
    let base_name = ImageRef::parse(base)?;
    let short_name = base_name.repository.rsplit('/').next().unwrap_or("image");
    Ok(format!("localhost/{short_name}:{}-rccl", base_name.tag.as_deref().unwrap_or("latest")))
}

/// RDMA pins memory, so an RDMA toolbox asks memlock unlimited, and the runtime sets that limit
/// as its engine may: beyond the engine's own hard limit only with CAP_SYS_RESOURCE in the initial
/// user namespace. A rootless engine never has it; a rootful one in a container started without
/// it (a node that is itself a container) has not either: the toolbox would be staged and fail at
/// start ("error setting rlimit"). The engine's own limits decide, asked whatever its mode: its
/// server's `/proc/PID` ([`EngineInfo::pid`]); else, rootless, this user's session's, which it
/// runs under. Refused before anything is created, with the numbers and the fix.
fn check_memlock(root: &HostRoot, facts: &HostFacts, spec: &ToolboxSpec, info: &EngineInfo) -> Result<()> {
    let asks_unlimited = spec.ulimits.iter().any(|limit| limit.name == "memlock" && limit.hard.is_none());
    let program = info.kind.program();
    let engine_limits = info.pid.and_then(|pid| {
        Some((format!("{program}'s service (pid {pid})"), read_process(root, &format!("/proc/{pid}"))?))
    });
    let session = || {
        let memlock = facts.memlock.clone()?;
        Some((format!("this session, which rootless {program} runs under"), ProcessLimits { memlock, raises: false }))
    };
    let Some((whose, limits)) = engine_limits.or_else(|| info.rootless.then(session).flatten()) else {
        return Ok(());
    };
    let Some(hard) = limits.memlock.hard.filter(|_| asks_unlimited && !limits.raises) else { return Ok(()) };
    let why = if info.rootless { "it runs rootless" } else { "it has no CAP_SYS_RESOURCE" };
    Err(Error::host(
        "memlock hard limit",
        format!(
            "the toolbox asks memlock unlimited (RDMA pins memory), but {whose} has a hard memlock limit of {hard} \
             bytes ({} MiB) and cannot raise it ({why}): the toolbox would fail at start; nothing was created",
            hard >> 20
        ),
        if info.rootless {
            format!("{}, and rerun", crate::doctor::memlock::FIX)
        } else {
            format!(
                "raise {program}'s hard memlock limit to unlimited: `LimitMEMLOCK=infinity` in its systemd unit \
                 (`systemctl edit {program}.service`, then restart it), or, a node that is itself a container, start \
                 it with `--ulimit memlock=-1` or `--cap-add SYS_RESOURCE`; then rerun"
            )
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Memlock;

    fn node(hard: Option<u64>) -> HostFacts {
        HostFacts { memlock: Some(Memlock { soft: hard, hard }), ..Default::default() }
    }

    fn engine(rootless: bool, pid: Option<u32>) -> EngineInfo {
        EngineInfo { kind: EngineKind::Podman, rootless, runtime: "crun".into(), version: String::new(), pid }
    }

    /// A toolbox spec with RDMA (memlock unlimited), or without.
    fn spec(rdma: bool) -> ToolboxSpec {
        let memlock = crate::container_engine::Ulimit { name: "memlock".into(), soft: None, hard: None };
        ToolboxSpec { ulimits: if rdma { vec![memlock] } else { Vec::new() }, ..Default::default() }
    }

    /// A node whose engine runs as pid 4242: its hard memlock (None: unlimited) and its CapEff.
    fn engine_node(hard: Option<u64>, caps: &str) -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        let proc_dir = dir.path().join("proc/4242");
        std::fs::create_dir_all(&proc_dir).unwrap();
        let hard = hard.map_or("unlimited".to_string(), |bytes| bytes.to_string());
        std::fs::write(proc_dir.join("limits"), format!("Max locked memory  {hard}  {hard}  bytes\n")).unwrap();
        std::fs::write(proc_dir.join("status"), format!("CapEff:\t{caps}\n")).unwrap();
        std::fs::write(proc_dir.join("uid_map"), "0 0 4294967295\n").unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        (dir, root)
    }

    /// Root's capabilities without CAP_SYS_RESOURCE (a container started without it), and with.
    const NO_SYS_RESOURCE: &str = "000001fffeffffff";
    const ALL: &str = "000001ffffffffff";

    #[test]
    fn rootless_rdma_with_a_memlock_limit_stops_before_creating_anything() {
        let none = HostRoot::system();
        let error = check_memlock(&none, &node(Some(8 << 20)), &spec(true), &engine(true, None)).unwrap_err();
        let error = error.to_string();
        assert!(error.contains("8388608") && error.contains("/etc/security/limits.d/"), "{error}");
        assert!(error.contains("rootless podman runs under") && error.contains("it runs rootless"), "{error}");
    }

    #[test]
    fn a_rootful_engine_that_cannot_raise_its_limit_is_refused_with_its_numbers_and_fix() {
        // The node's own session is unlimited: the engine's limits decide, not ours.
        let (_dir, root) = engine_node(Some(8 << 20), NO_SYS_RESOURCE);
        let error = check_memlock(&root, &node(None), &spec(true), &engine(false, Some(4242))).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Host);
        let text = error.to_string();
        assert!(text.contains("podman's service (pid 4242)") && text.contains("8388608 bytes (8 MiB)"), "{text}");
        assert!(text.contains("no CAP_SYS_RESOURCE") && text.contains("LimitMEMLOCK=infinity"), "{text}");
        // With CAP_SYS_RESOURCE it raises the limit itself; unlimited needs no raising.
        let (_dir, root) = engine_node(Some(8 << 20), ALL);
        check_memlock(&root, &node(Some(8 << 20)), &spec(true), &engine(false, Some(4242))).unwrap();
        let (_dir, root) = engine_node(None, NO_SYS_RESOURCE);
        check_memlock(&root, &node(Some(8 << 20)), &spec(true), &engine(false, Some(4242))).unwrap();
    }

    #[test]
    fn memlock_is_fine_when_unlimited_unasked_or_the_rootful_engine_is_not_found() {
        let none = HostRoot::system();
        check_memlock(&none, &node(None), &spec(true), &engine(true, None)).unwrap();
        check_memlock(&none, &node(Some(8 << 20)), &spec(false), &engine(true, None)).unwrap();
        let (_dir, root) = engine_node(Some(8 << 20), NO_SYS_RESOURCE);
        check_memlock(&root, &node(Some(8 << 20)), &spec(false), &engine(false, Some(4242))).unwrap();
        // A rootful engine whose process this node's /proc does not show: not judged.
        check_memlock(&root, &node(Some(8 << 20)), &spec(true), &engine(false, Some(999_999))).unwrap();
    }

    mod with_a_fake_engine {
        use super::*;
        use crate::container_engine::fake::{FakeEngine, RecordedCall};
        use crate::plan::temp_name;

        const LATEST: &str = "registry.test/vllm:latest";

        /// A CPU image the registry serves as `sha256:DDDD…`, created at `created` (its pin).
        fn published(id: &str, digit: char, created: &str) -> ImageInfo {
            let labels = [(labels::OCI_CREATED, created), (labels::DEVICE, "cpu")];
            ImageInfo {
                id: id.into(),
                repo_digests: vec![format!("registry.test/vllm@{}", digest(digit))],
                labels: labels.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect(),
                ..Default::default()
            }
        }

        fn digest(digit: char) -> String {
            format!("sha256:{}", digit.to_string().repeat(64))
        }

        fn request(name: &str) -> RefreshRequest {
            RefreshRequest::for_tests(name, LATEST)
        }

        /// A node with no devices (a tree of its own) and its facts: it takes the CPU images
        /// [`published`] makes.
        fn node() -> (tempfile::TempDir, (HostRoot, HostFacts)) {
            let dir = tempfile::tempdir().unwrap();
            let root = HostRoot::open(dir.path()).unwrap();
            (dir, (root, HostFacts::default()))
        }

        /// Refresh toolbox `name` from `LATEST` as published now, through the engine's pull.
        async fn refresh(engine: &FakeEngine, request: &RefreshRequest) -> RefreshReport {
            refresh_asking(engine, request, AskedDigest::not_asked()).await
        }

        /// The same, the registry having said `upstream` for the tag.
        async fn refresh_asking(engine: &FakeEngine, request: &RefreshRequest, upstream: AskedDigest) -> RefreshReport {
            let (dir, node) = node();
            refresh_with(&Settings::for_tests(dir.path()), &node, engine, request, upstream).await.unwrap()
        }

        /// The calls that changed a container.
        fn container_changes(calls: &[RecordedCall]) -> Vec<&RecordedCall> {
            calls
                .iter()
                .filter(|c| {
                    matches!(c, RecordedCall::Create(_) | RecordedCall::Rename { .. } | RecordedCall::Remove(_))
                })
                .collect()
        }

        fn image_id_of(engine: &FakeEngine, name: &str) -> Option<String> {
            engine.container(name).and_then(|c| c.labels.get(labels::IMAGE_ID).cloned())
        }

        #[tokio::test]
        async fn an_unchanged_image_is_a_no_op() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-unchanged";
            let first = refresh(&engine, &request(name)).await;
            assert_eq!(first.action, Action::Created);
            assert_eq!(first.pin.as_deref(), Some("20261101-100000"));
            let before = engine.calls().len();

            let second = refresh(&engine, &request(name)).await;
            assert_eq!(second.action, Action::Unchanged, "{}", second.reason);
            let calls = engine.calls();
            assert_eq!(calls[before..], [RecordedCall::Pull(LATEST.into())], "only the pull");
            assert_eq!(image_id_of(&engine, name).as_deref(), Some("sha256:one"));
        }

        #[tokio::test]
        async fn the_registry_s_digest_already_here_is_a_no_op_without_a_pull() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-digest-here";
            refresh(&engine, &request(name)).await;
            let before = engine.calls().len();

            let report = refresh_asking(&engine, &request(name), AskedDigest::known(Ok(digest('1')))).await;
            assert_eq!((report.action, report.pull), (Action::Unchanged, false), "{}", report.reason);
            assert_eq!(engine.calls()[before..], [], "no pull, no change");
            assert_eq!(report.image, LATEST, "the toolbox is still made from the tag");
        }

        #[tokio::test]
        async fn a_new_digest_in_the_registry_is_pulled_and_recreates_the_toolbox() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-digest-new";
            refresh(&engine, &request(name)).await;
            engine.publish(LATEST, published("sha256:two", '2', "2026-11-02T10:00:00Z"));
            let before = engine.calls().len();

            let report = refresh_asking(&engine, &request(name), AskedDigest::known(Ok(digest('2')))).await;
            assert_eq!(report.action, Action::Recreated, "{}", report.reason);
            assert_eq!(engine.calls()[before], RecordedCall::Pull(LATEST.into()));
            assert_eq!(image_id_of(&engine, name).as_deref(), Some("sha256:two"));
        }

        #[tokio::test]
        async fn a_registry_that_does_not_answer_leaves_it_to_the_engine_s_pull() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-registry-down";
            refresh(&engine, &request(name)).await;
            let before = engine.calls().len();
            let down = Error::Registry { reference: LATEST.into(), message: "unreachable".into(), fix: None };

            let report = refresh_asking(&engine, &request(name), AskedDigest::known(Err(down))).await;
            assert_eq!(report.action, Action::Unchanged, "{}", report.reason);
            assert_eq!(engine.calls()[before..], [RecordedCall::Pull(LATEST.into())], "the engine was asked instead");
        }

        #[tokio::test]
        async fn the_digest_here_under_another_tag_is_used_and_the_tag_moved_to_it() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-tag-moved";
            refresh(&engine, &request(name)).await;
            // The tag was moved here to another image; the registry's digest is still the first's.
            engine.add_image(ImageInfo { id: "sha256:local".into(), ..Default::default() });
            engine.image_tag("sha256:local", "registry.test/vllm", "latest").await.unwrap();
            let before = engine.calls().len();

            let report = refresh_asking(&engine, &request(name), AskedDigest::known(Ok(digest('1')))).await;
            assert_eq!(report.action, Action::Unchanged, "{}", report.reason);
            let tag_back = RecordedCall::ImageTag { id: "sha256:one".into(), reference: LATEST.into() };
            assert_eq!(engine.calls()[before..], [tag_back], "no pull; the tag names the registry's image again");
            assert_eq!(engine.image(LATEST).map(|image| image.id).as_deref(), Some("sha256:one"));
        }

        #[tokio::test]
        async fn a_missing_toolbox_or_a_changed_spec_is_still_seen_without_a_pull() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-digest-spec";
            refresh(&engine, &request(name)).await;
            let before = engine.calls().len();
            let with_env = RefreshRequest { env: vec!["A=b".into()], ..request(name) };
            let report = refresh_asking(&engine, &with_env, AskedDigest::known(Ok(digest('1')))).await;
            assert_eq!(report.action, Action::Recreated, "{}", report.reason);
            assert!(report.reason.contains("spec changed"), "{}", report.reason);

            let missing = "fake-refresh-digest-missing";
            let report = refresh_asking(&engine, &request(missing), AskedDigest::known(Ok(digest('1')))).await;
            assert_eq!(report.action, Action::Created, "{}", report.reason);
            let pulls = engine.calls()[before..].iter().filter(|call| matches!(call, RecordedCall::Pull(_))).count();
            assert_eq!(pulls, 0, "the image was here both times");
        }

        #[tokio::test]
        async fn a_new_image_recreates_the_toolbox() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-new-image";
            refresh(&engine, &request(name)).await;
            let old_id = engine.container(name).unwrap().id;

            engine.publish(LATEST, published("sha256:two", '2', "2026-11-02T10:00:00Z"));
            let report = refresh(&engine, &request(name)).await;
            assert_eq!(report.action, Action::Recreated);
            assert!(report.reason.contains("the image changed"), "{}", report.reason);
            assert_eq!(report.digest, Some(digest('2')));
            assert_eq!(image_id_of(&engine, name).as_deref(), Some("sha256:two"));
            assert_eq!(engine.container(&old_id), None, "the old toolbox is gone");
            assert_eq!(engine.container(&temp_name(name)), None);
            assert!(engine.image("registry.test/vllm:20261101-100000").is_some(), "the old pin is kept");
            assert!(engine.image("registry.test/vllm:20261102-100000").is_some(), "the new image is pinned");
        }

        #[tokio::test]
        async fn staging_stops_before_the_swap() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-staged";
            refresh(&engine, &request(name)).await;
            engine.publish(LATEST, published("sha256:two", '2', "2026-11-02T10:00:00Z"));
            let before = engine.calls().len();

            let report = refresh(&engine, &RefreshRequest { stage_only: true, ..request(name) }).await;
            assert_eq!(report.staged, Some(temp_name(name)));
            assert_eq!(image_id_of(&engine, &temp_name(name)).as_deref(), Some("sha256:two"));
            assert_eq!(image_id_of(&engine, name).as_deref(), Some("sha256:one"), "the old one still serves");
            let calls = engine.calls();
            assert_eq!(container_changes(&calls[before..]), [&RecordedCall::Create(temp_name(name))]);
        }

        #[tokio::test]
        async fn a_digest_already_here_is_not_pulled_again() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let name = "fake-refresh-by-digest";
            refresh(&engine, &request(name)).await;
            let before = engine.calls().len();
            let pinned = format!("registry.test/vllm@{}", digest('1'));
            let report = refresh(&engine, &RefreshRequest { image_ref: pinned, ..request(name) }).await;
            assert_eq!(report.action, Action::Unchanged, "{}", report.reason);
            assert_eq!(engine.calls()[before..], [], "no pull, no change");
        }

        #[tokio::test]
        async fn a_dry_run_changes_nothing() {
            let engine = FakeEngine::new();
            engine.publish(LATEST, published("sha256:one", '1', "2026-11-01T10:00:00Z"));
            let report = refresh(&engine, &RefreshRequest { dry_run: true, ..request("fake-refresh-dry") }).await;
            assert_eq!(report.action, Action::Created);
            assert!(report.pull && !report.steps.is_empty());
            assert_eq!(engine.calls(), [], "not even the pull");
        }

        #[tokio::test]
        async fn a_dry_run_without_an_engine_plans_against_an_empty_one() {
            let (dir, node) = node();
            let engine = AbsentEngine::guessed(EngineKind::Podman);
            let request = RefreshRequest { dry_run: true, ..request("absent-engine-dry") };
            let report =
                refresh_with(&Settings::for_tests(dir.path()), &node, &engine, &request, AskedDigest::not_asked())
                    .await
                    .unwrap();
            assert_eq!((report.action, report.pull), (Action::Created, true));
            let create = &report.steps[0].commands[0];
            assert_eq!(create[..4], ["podman", "create", "--name", "absent-engine-dry-strix-new"]);
            assert!(engine.describe().starts_with("an empty podman, "), "{}", engine.describe());
        }
    }
}
