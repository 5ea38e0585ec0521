//! `refresh [latest|dev]`: pull (or build) the image, then create or update the toolbox atomically.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use serde::Serialize;

use crate::apply::{apply, interruptible};
use crate::build::{build_image, BuildRequest, Provenance};
use crate::cli::{GlobalOptions, RefreshArgs};
use crate::engine::{self, CreateRequest, Engine, EngineInfo, ImageInfo};
use crate::engine_probe::Installed;
use crate::error::{Error, Result};
use crate::host::{HostFacts, HostRoot};
use crate::labels;
use crate::lock::ToolboxLock;
use crate::manager::{self, Manager};
use crate::pin::pin_tag;
use crate::plan::{
    old_name, plan_refresh, provenance_labels, registry_digest, spec_hash, temp_name, Action, CurrentState,
    DesiredToolbox, RefreshPlan,
};
use crate::rccl;
use crate::reference::{default_name, parse_channel, validate_container_name, ImageRef};
use crate::spec::{parse_env, SpecOptions, ToolboxSpec};
use crate::ui::{Style, Ui};

/// What a refresh did (or, dry, would do): the `--json` output, and what the text shows.
#[derive(Debug, Serialize)]
struct RefreshSummary<'a> {
    name: &'a str,
    image: &'a str,
    image_id: &'a str,
    digest: Option<String>,
    pin: Option<&'a str>,
    action: Action,
    reason: &'a str,
    manager: &'static str,
    engine: &'static str,
    dry_run: bool,
    steps: Vec<PlannedStep>,
    container_args: Vec<String>,
    warnings: Vec<String>,
}

impl<'a> RefreshSummary<'a> {
    fn new(
        desired: &'a DesiredToolbox,
        plan: &'a RefreshPlan,
        manager: &dyn Manager,
        info: &EngineInfo,
        spec: &ToolboxSpec,
        dry_run: bool,
    ) -> Self {
        RefreshSummary {
            name: &desired.name,
            image: &desired.request.image,
            image_id: &desired.image.id,
            digest: registry_digest(&desired.image, &desired.repository),
            pin: desired.pin.as_deref(),
            action: plan.action,
            reason: &plan.reason,
            manager: manager.kind().as_str(),
            engine: info.kind.program(),
            dry_run,
            steps: plan
                .steps
                .iter()
                .map(|s| PlannedStep { description: s.describe(), commands: s.commands(info.kind, manager) })
                .collect(),
            container_args: spec.container_args(info.kind),
            warnings: Vec::new(),
        }
    }
}

#[derive(Debug, Serialize)]
struct PlannedStep {
    description: String,
    commands: Vec<Vec<String>>,
}

/// What the user asked for, validated before anything is touched.
pub struct Target {
    pub name: String,
    pub image_ref: String,
}

/// Where the image comes from.
pub enum ImageSource {
    /// Pull it from its registry (the usual refresh).
    Pull,
    /// Use the local copy as it is (rollback to a pin).
    Local,
    /// Build it here with this RCCL artifact.
    Build(std::path::PathBuf),
}

/// One refresh, whoever asked for it (`refresh` or `rollback`).
pub struct RefreshJob {
    pub target: Target,
    pub source: ImageSource,
    pub manager: crate::cli::ManagerChoice,
    pub keep: usize,
    pub force: bool,
    pub dry_run: bool,
    pub env: Vec<String>,
}

fn resolve_target(args: &RefreshArgs) -> Result<Target> {
    let channel = match &args.channel {
        Some(channel) => parse_channel(channel)?,
        // A full --image names its own tag: nothing to ask.
        None if args.image.is_some() => "latest",
        None => ask_channel()?,
    };
    let name = args.name.clone().unwrap_or_else(|| default_name(channel));
    validate_container_name(&name)?;
    let image_ref = args.image.clone().unwrap_or_else(|| format!("{}:{channel}", args.image_repo));
    ImageRef::parse(&image_ref)?;
    Ok(Target { name, image_ref })
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

pub async fn run(global: &GlobalOptions, args: &RefreshArgs, ui: &Ui) -> Result<i32> {
    parse_env(&args.env)?;
    let job = RefreshJob {
        target: resolve_target(args)?,
        source: args.rccl.clone().map_or(ImageSource::Pull, ImageSource::Build),
        manager: args.manager,
        keep: args.keep,
        force: args.force,
        dry_run: args.dry_run,
        env: args.env.clone(),
    };
    let node = read_gpu_node(global)?;
    let connection = engine::connect(global.engine).await?;
    refresh_toolbox(global, &node, connection.engine(), &job, ui).await
}

/// The node's facts, refusing a node without a GPU before any engine is contacted.
pub fn read_gpu_node(global: &GlobalOptions) -> Result<(HostRoot, HostFacts)> {
    let root = HostRoot::open(&global.host_root)?;
    let facts = HostFacts::read(&root)?;
    facts.require_gpu(&root)?;
    Ok((root, facts))
}

/// The pipeline: facts → spec → (pull) → plan → apply.
pub async fn refresh_toolbox(
    global: &GlobalOptions,
    (root, facts): &(HostRoot, HostFacts),
    engine: &dyn Engine,
    job: &RefreshJob,
    ui: &Ui,
) -> Result<i32> {
    let target = &job.target;
    let extra_env = parse_env(&job.env)?;

    let installed = Installed::find();
    let info = engine.info().await?;
    let manager = manager::choose(job.manager, info.kind, &installed)?;

    let spec = ToolboxSpec::new(
        root,
        facts,
        &SpecOptions { engine: info.kind, rootless: info.rootless, runtime: info.runtime.clone(), extra_env },
    );
    check_memlock(facts, &info)?;

    let _lock = ToolboxLock::acquire(&target.name)?;

    // Pull first (the newest base, for a local build too); a dry run only looks.
    if !job.dry_run && !matches!(job.source, ImageSource::Local) {
        let progress = ui.progress();
        interruptible(&format!("pulling {}", target.image_ref), engine.pull(&target.image_ref, &progress)).await?;
        progress.finish();
    }
    let image_ref = match &job.source {
        ImageSource::Build(artifact) if job.dry_run => {
            rccl::inspect_artifact(artifact)?.ensure_gfx1151()?;
            local_build_tag(&target.image_ref)?
        }
        ImageSource::Build(artifact) => build_locally(engine, artifact, &target.image_ref, ui).await?,
        ImageSource::Pull | ImageSource::Local => target.image_ref.clone(),
    };
    let image = match engine.image_inspect(&image_ref).await? {
        Some(image) => image,
        None if job.dry_run => ImageInfo { id: "(not pulled yet)".into(), ..Default::default() },
        None => return Err(Error::Failed(format!("{image_ref} is not present after pulling it"))),
    };

    let image_name = ImageRef::parse(&image_ref)?;
    let mut desired = desired_toolbox(&target.name, &image_ref, &image_name, image, &spec, manager.as_ref(), &info);
    desired.request.labels.extend(labels::encode_user_env(&job.env).map(|env| (labels::USER_ENV.to_string(), env)));
    let current = current_state(engine, &target.name, &image_name).await?;
    let plan = plan_refresh(&desired, &current, job.keep, job.force);

    let mut summary = RefreshSummary::new(&desired, &plan, manager.as_ref(), &info, &spec, job.dry_run);
    if !job.dry_run {
        summary.warnings = apply(&plan, engine, manager.as_ref(), ui).await?.warnings;
    }
    if plan.replaces_running {
        let tense = if job.dry_run { "would stop" } else { "stopped" };
        summary.warnings.push(format!("{} was running: replacing it {tense} its processes", desired.name));
    }
    if global.json {
        ui.print_json(&summary);
    } else {
        print_summary(&summary, matches!(job.source, ImageSource::Pull), ui);
    }
    Ok(0)
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
    spec.apply_to(&mut request);
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
    DesiredToolbox { name: name.to_string(), repository, image, request, spec_hash: hash, pin }
}

async fn current_state(engine: &dyn Engine, name: &str, image: &ImageRef) -> Result<CurrentState> {
    let managed = |c: Option<crate::engine::ContainerInfo>| {
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
async fn build_locally(engine: &dyn Engine, artifact: &Path, base: &str, ui: &Ui) -> Result<String> {
    let report = rccl::inspect_artifact(artifact)?;
    report.ensure_gfx1151()?;
    let tag = local_build_tag(base)?;
    let source = artifact.display().to_string();
    let provenance = Provenance::new(None, None, Some(&source), artifact);
    let request = BuildRequest::new(&report, &provenance, base, std::slice::from_ref(&tag), false)?;
    let progress = ui.progress();
    interruptible("building the image", build_image(engine, &report, &request, &progress)).await?;
    Ok(tag)
}

/// `docker.io/kyuz0/vllm-therock-gfx1151:dev` → `localhost/vllm-therock-gfx1151:dev-rccl`.
fn local_build_tag(base: &str) -> Result<String> {
    let base_name = ImageRef::parse(base)?;
    let short_name = base_name.repository.rsplit('/').next().unwrap_or("image");
    Ok(format!("localhost/{short_name}:{}-rccl", base_name.tag.as_deref().unwrap_or("latest")))
}

/// RDMA pins memory: with a rootless engine the container inherits the hard memlock limit and
/// cannot raise it, so `--ulimit memlock=-1` makes it fail at start. Stop before creating anything.
fn check_memlock(facts: &HostFacts, info: &EngineInfo) -> Result<()> {
    let limited = facts.memlock.as_ref().is_some_and(|m| !m.hard_is_unlimited());
    if facts.rdma.present() && info.rootless && limited {
        let hard = facts.memlock.as_ref().and_then(|m| m.hard).unwrap_or(0);
        return Err(Error::Failed(format!(
            "the memlock hard limit is {hard} bytes and {} runs rootless: a toolbox with RDMA needs it \
             unlimited and would fail at start. Fix: create /etc/security/limits.d/99-rdma-memlock.conf with \
             `* soft memlock unlimited` and `* hard memlock unlimited`, log in again, and rerun",
            info.kind.program()
        )));
    }
    Ok(())
}

/// The text form: the plan with its commands for a dry run, else one line of outcome.
fn print_summary(summary: &RefreshSummary<'_>, pulled: bool, ui: &Ui) {
    for warning in &summary.warnings {
        ui.warn(warning);
    }
    if summary.dry_run {
        println!("{} (dry run; nothing changed)", ui.paint("Plan", Style::Bold));
        if pulled {
            println!("  0. pull {0}\n       {1} pull {0}", summary.image, summary.engine);
        }
        for (index, step) in summary.steps.iter().enumerate() {
            println!("  {}. {}", index + 1, step.description);
            for command in &step.commands {
                println!("       {}", command.join(" "));
            }
        }
        println!("Result would be: {} ({})", summary.action.as_str(), summary.reason);
        return;
    }
    eprintln!(
        "{} {} {} ({}) from {} [{}]",
        ui.paint("✓", Style::Ok),
        summary.name,
        summary.action.as_str(),
        summary.reason,
        summary.image,
        summary.pin.unwrap_or("unpinned")
    );
    eprintln!("  enter it with: strix-toolbox enter {}", summary.name);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineKind;
    use crate::host::{Memlock, RdmaFacts};

    fn node(hard: Option<u64>, rdma: bool) -> HostFacts {
        HostFacts {
            memlock: Some(Memlock { soft: hard, hard }),
            rdma: RdmaFacts {
                devices: if rdma { vec!["/dev/infiniband/uverbs0".into()] } else { vec![] },
                ports: vec![],
            },
            ..Default::default()
        }
    }

    fn engine(rootless: bool) -> EngineInfo {
        EngineInfo { kind: EngineKind::Podman, rootless, runtime: "crun".into(), version: String::new() }
    }

    #[test]
    fn rootless_rdma_with_a_memlock_limit_stops_before_creating_anything() {
        let error = check_memlock(&node(Some(8 << 20), true), &engine(true)).unwrap_err().to_string();
        assert!(error.contains("8388608") && error.contains("/etc/security/limits.d/"), "{error}");
    }

    #[test]
    fn memlock_is_fine_when_unlimited_rootful_or_without_rdma() {
        check_memlock(&node(None, true), &engine(true)).unwrap();
        check_memlock(&node(Some(8 << 20), true), &engine(false)).unwrap();
        check_memlock(&node(Some(8 << 20), false), &engine(true)).unwrap();
    }
}
