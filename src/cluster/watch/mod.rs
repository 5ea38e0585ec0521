//! `cluster watch`: keep the cluster's services serving. Every `--interval` the watch looks at
//! every service that has a record ([`observe`]), hands the look to the watch's state machine
//! ([`crate::watch::Watcher`]: serving, loading, stalled, failing, node down, node rebooted,
//! paused, given up), and does what it says: nothing, a relaunch of the whole service from its
//! record ([`relaunch`]: log tails saved, every rank stopped, the nodes' memory free, launched
//! again), or give up (its state says why, for `cluster status`; `--on-give-up` runs). Each
//! change is a line of its event log ([`events`]) and of its output.
//!
//! The watch never starts what has no record: a service found (or launched again by its
//! operator) is first seen serving before it is judged (a launch may still be under way), a
//! service whose record is gone was stopped by its operator and is no longer watched, and one
//! whose record has another start time was launched again (`--replace`) and is read anew. One
//! watch per cluster ([`lock`]); `--pause` ([`pause`]) holds it for maintenance. Ctrl-C or
//! SIGTERM end it (exit 130 or 143) between looks, or mid-relaunch after the launch's own cleanup.

pub mod clock;
pub mod dir;
pub mod events;
pub mod give_up;
pub mod install;
pub mod lock;
pub mod observe;
pub mod pause;
pub mod relaunch;
pub mod saved_logs;
pub mod state;

use std::collections::BTreeMap;
use std::path::PathBuf;

use self::clock::now;
use self::dir::WatchDir;
use self::events::{EventLog, WatchAction, WatchEvent};
use self::give_up::run_on_give_up;
use self::lock::WatchLock;
use self::observe::{observe, service_nodes, ClusterLook};
use self::relaunch::{stopped_on_demand, Relaunch, RelaunchSecrets, Relaunched};
use self::state::{SavedWatch, WatchedService};
use crate::cluster::interrupt::Interrupt;
use crate::cluster::metrics::{ClusterReading, MetricsAsk};
use crate::cluster::{with_nodes, ClusterSettings};
use crate::error::{Error, Result};
use crate::serving::record::ServingRecord;
use crate::serving::service_name::ServiceName;
use crate::watch::{
    watch_families, Decision, LookOutcome, Moment, NodeObservation, Observation, ProbeOutcome, Start, State,
    WatchPolicy, Watcher,
};

/// What the watch is asked.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The services to watch (none: every service recorded).
    pub services: Vec<ServiceName>,
    pub policy: WatchPolicy,
    /// `--on-give-up`: the operator's command, run by `sh -c`.
    pub on_give_up: Option<String>,
    pub dir: WatchDir,
    pub secrets: RelaunchSecrets,
    /// Where the watch leaves what its last look read, for `--metrics` (None: not served).
    pub exposition: Option<WatchExposition>,
}

/// The cluster's metrics as the watch's last look read them (every node's telemetry, every
/// engine's own) and the watch's own of every service it follows, in Prometheus's text format;
/// None before its first look has ended.
pub type WatchExposition = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// A service the watch follows.
struct Tracked {
    /// The head's record of the launch watched.
    record: ServingRecord,
    watcher: Watcher,
    /// Found, or launched again by its operator, and not yet seen serving: not judged until its
    /// first probe passes or `--grace` runs out.
    settling_since: Option<Moment>,
    /// The watch relaunched it: the next record (a new start time) is its own, not an operator's.
    adopt_next: bool,
    /// The state last said (an event is written when it changes).
    said: Option<State>,
    /// The last fault relaunched for.
    last_fault: Option<String>,
    service_dir: PathBuf,
}

/// One service as one look found it.
struct Found {
    name: String,
    /// Its head's record now (None: its head answered without one, or did not answer).
    record: Option<ServingRecord>,
    /// None: its head answered without its record (its operator stopped it).
    observation: Option<Observation>,
}

/// Watch until a signal comes: the error it ends with is [`Error::Interrupted`] (or what kept
/// it from starting).
pub async fn watch(settings: &ClusterSettings, request: &WatchRequest, emit: &dyn Fn(&WatchEvent)) -> Result<()> {
    request.policy.check()?;
    let _lock = WatchLock::take(&request.dir)?;
    let log = EventLog::at(request.dir.events_path());
    let reporter = settings.reporter.clone();
    let say = move |event: WatchEvent| {
        if let Err(error) = log.append(&event) {
            reporter.warning(&format!("the watch's event log: {error}"));
        }
        emit(&event);
    };
    let interrupt = Interrupt::watch();
    let mut tracked: BTreeMap<String, Tracked> = BTreeMap::new();
    loop {
        if let Some(signal) = interrupt.came() {
            return Err(Error::Interrupted { during: "the watch".into(), signal });
        }
        let began = tokio::time::Instant::now();
        // A look only reads: Ctrl-C drops it where it stands (under load one can take a while).
        let looking = async { Ok(look(settings, request, &tracked).await) };
        let (found, reading) = interrupt.unless_it_comes("the watch", looking).await?;
        for found in found {
            judge(settings, request, &mut tracked, found, &interrupt, &say).await?;
        }
        if let Some(shared) = &request.exposition {
            let families = tracked
                .iter()
                .flat_map(|(name, followed)| watch_families(name, &followed.record.model, &followed.watcher))
                .collect();
            let text = reading.exposition_with(families);
            // A scrape that panicked while holding it poisoned nothing it could not read again.
            *shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(text);
        }
        // Looks begin every interval (a look or relaunch longer than that: the next at once), so a
        // look's probe deadline of one interval ends a stalled one's next look within two.
        let pause = tokio::time::sleep_until(began + request.policy.interval);
        interrupt
            .unless_it_comes("the watch", async {
                pause.await;
                Ok(())
            })
            .await?;
    }
}

/// One look at every service watched: what it found of each, and the cluster's reading (every
/// node's telemetry and engines) for `--metrics`.
async fn look(
    settings: &ClusterSettings,
    request: &WatchRequest,
    tracked: &BTreeMap<String, Tracked>,
) -> (Vec<Found>, ClusterReading) {
    let began = now();
    let paused = pause::is_paused(&request.dir);
    let wanted = |name: &str| request.services.is_empty() || request.services.iter().any(|s| s.as_str() == name);
    let ask = MetricsAsk {
        api_key: request.secrets.api_key.clone(),
        scrape_limit: request.policy.probe_deadline(),
        probe: Vec::new(),
    };
    with_nodes(settings, async |nodes, unreachable| {
        let look = ClusterLook::take(nodes, unreachable, &settings.nodes, &wanted, &ask).await;
        // The look ends when its probes have answered or run out of time: what it saw held until then.
        let at = now();
        let heads = look.heads();
        let mut found = Vec::new();
        for (name, record) in heads.iter().filter(|(name, _)| wanted(name)) {
            let observation = observe(&look, record, paused, began, at);
            found.push(Found { name: name.clone(), record: Some(record.clone()), observation: Some(observation) });
        }
        for (name, followed) in tracked.iter().filter(|(name, _)| !heads.contains_key(*name)) {
            let on = service_nodes(&followed.record, &settings.nodes);
            let head_answered = on.first().is_some_and(|head| look.answered(head));
            // Its head does not answer: the service is there as far as anyone knows; a node down.
            let observation = (!head_answered).then(|| Observation {
                began,
                at,
                paused,
                nodes: on
                    .iter()
                    .map(|node| NodeObservation {
                        node: node.clone(),
                        reachable: look.answered(node),
                        boot_id: None,
                        gpu_hangs: Vec::new(),
                    })
                    .collect(),
                ranks: Vec::new(),
                probe: ProbeOutcome::Skipped,
                progress: None,
            });
            found.push(Found { name: name.clone(), record: None, observation });
        }
        (found, look.reading)
    })
    .await
}

/// Follow what one look found of one service, and act on it.
async fn judge(
    settings: &ClusterSettings,
    request: &WatchRequest,
    tracked: &mut BTreeMap<String, Tracked>,
    found: Found,
    interrupt: &Interrupt,
    say: &dyn Fn(WatchEvent),
) -> Result<()> {
    let at = now();
    let name = found.name.clone();
    let Some(observation) = found.observation else {
        // Its head answered without its record: its operator stopped it.
        if let Some(gone) = tracked.remove(&name) {
            if gone.watcher.given_up().is_none() {
                state::forget(&gone.service_dir);
                let why = "its record is gone: its operator stopped it; no longer watched";
                say(WatchEvent::now(&name, gone.watcher.state(), WatchAction::Dropped, Some(why.into())));
            }
        }
        return Ok(());
    };
    let followed = match (tracked.remove(&name), found.record) {
        (Some(mut followed), Some(record)) if record.started != followed.record.started => {
            if followed.adopt_next {
                followed.adopt_next = false;
            } else {
                // `launch --replace` by its operator: no failure; the new launch is read anew.
                followed.watcher = Watcher::new(request.policy.clone(), Start::Loading(at));
                followed.settling_since = Some(at);
                say(WatchEvent::now(
                    &name,
                    State::Loading,
                    WatchAction::Reread,
                    Some(format!("launched again by its operator at {}: watching that launch", record.started)),
                ));
                followed.said = Some(State::Loading);
            }
            followed.record = record;
            followed
        }
        (Some(followed), _) => followed,
        (None, Some(record)) => start_following(request, &settings.nodes, &name, record, at, say)?,
        (None, None) => return Ok(()),
    };
    let mut followed = followed;
    if let Some(since) = followed.settling_since {
        let serving = observation.probe == ProbeOutcome::Passed;
        if serving || at.since(since) >= request.policy.grace {
            followed.settling_since = None;
        } else {
            save(&followed, &name, State::Loading);
            tracked.insert(name, followed);
            return Ok(());
        }
    }
    let step = followed.watcher.observe(&observation);
    for news in &step.news {
        say(WatchEvent::now(&name, step.state, WatchAction::GpuHang, Some(news.clone())));
    }
    if matches!(step.action, Decision::Relaunch(_)) && stopped_on_demand(settings, &name).await {
        // The router stopped it on purpose (idle, or for another's room): it starts on a request.
        state::forget(&followed.service_dir);
        let why = "the router stopped it (started on demand): not relaunched; a request starts it again";
        say(WatchEvent::now(&name, step.state, WatchAction::Dropped, Some(why.into())));
        return Ok(());
    }
    if let Some(why) = act(settings, request, &mut followed, &name, step, interrupt, say).await? {
        state::forget(&followed.service_dir);
        say(WatchEvent::now(&name, followed.watcher.state(), WatchAction::Dropped, Some(why)));
        return Ok(());
    }
    save(&followed, &name, followed.watcher.state());
    tracked.insert(name, followed);
    Ok(())
}

/// A service seen for the first time: taken up where a watch before left it when its record is
/// still the same launch (its budget, or its giving up), else afresh, settling first.
fn start_following(
    request: &WatchRequest,
    cluster: &[String],
    name: &str,
    record: ServingRecord,
    at: Moment,
    say: &dyn Fn(WatchEvent),
) -> Result<Tracked> {
    let service_dir = request.dir.service_dir(&ServiceName::parse(name)?)?;
    let saved = state::load(&service_dir).filter(|saved| saved.shown.record_started == record.started);
    let (watcher, settling_since) = match saved {
        Some(saved) if saved.watcher.policy() == &request.policy => (saved.watcher, None),
        _ => (Watcher::new(request.policy.clone(), Start::Serving), Some(at)),
    };
    let state = if settling_since.is_some() { State::Loading } else { watcher.state() };
    let why = format!("{} on {} since {}", record.model, service_nodes(&record, cluster).join(", "), record.started);
    say(WatchEvent::now(name, state, WatchAction::Watching, Some(why)));
    Ok(Tracked { record, watcher, settling_since, adopt_next: false, said: Some(state), last_fault: None, service_dir })
}

/// Do what the step says: nothing (a changed state is said), relaunch (again while the budget
/// allows, when a relaunch fails), or give up. Some(why) when the service is no longer the
/// watch's: its operator stopped it or launched it again before the relaunch began.
async fn act(
    settings: &ClusterSettings,
    request: &WatchRequest,
    followed: &mut Tracked,
    name: &str,
    first: LookOutcome,
    interrupt: &Interrupt,
    say: &dyn Fn(WatchEvent),
) -> Result<Option<String>> {
    let was_given_up = followed.said == Some(State::GivenUp);
    let mut step = first;
    // Each relaunch spends one restart: at most the budget's, and one more to give up.
    for attempt in 0..=request.policy.max_restarts {
        match step.action.clone() {
            Decision::Nothing => {
                if followed.said != Some(step.state) {
                    say(WatchEvent::now(name, step.state, WatchAction::Changed, None));
                    followed.said = Some(step.state);
                }
                return Ok(None);
            }
            Decision::GiveUp(reason) => {
                if !was_given_up {
                    let ran = match &request.on_give_up {
                        Some(command) => format!("; {}", run_on_give_up(command, name, &reason).await),
                        None => String::new(),
                    };
                    say(WatchEvent::now(name, State::GivenUp, WatchAction::GiveUp, Some(format!("{reason}{ran}"))));
                }
                followed.said = Some(State::GivenUp);
                return Ok(None);
            }
            Decision::Relaunch(fault) => {
                followed.last_fault = Some(fault.reason());
                save(followed, name, step.state);
                let relaunch = Relaunch {
                    settings,
                    policy: &request.policy,
                    secrets: &request.secrets,
                    interrupt,
                    service_dir: &followed.service_dir,
                    emit: say,
                    read_again: attempt == 0,
                };
                step = match relaunch.run(&followed.record, &fault).await? {
                    Relaunched::Serving => {
                        followed.watcher.started(now());
                        followed.adopt_next = true;
                        say(WatchEvent::now(name, State::Loading, WatchAction::Relaunched, None));
                        followed.said = Some(State::Loading);
                        return Ok(None);
                    }
                    Relaunched::Failed(why) => {
                        say(WatchEvent::now(name, step.state, WatchAction::RelaunchFailed, Some(why.clone())));
                        followed.watcher.relaunch_failed(now(), &why)
                    }
                    Relaunched::MemoryNeverFree(why) => followed.watcher.give_up(why),
                    Relaunched::Withdrawn(why) => return Ok(Some(why)),
                };
            }
        }
    }
    Ok(None)
}

/// The service's state file, as `cluster status` reads it.
fn save(followed: &Tracked, name: &str, state: State) {
    let watcher = &followed.watcher;
    let saved = SavedWatch {
        shown: WatchedService {
            service: name.to_string(),
            state,
            given_up: watcher.given_up().is_some(),
            reason: watcher.given_up().map(str::to_string).or_else(|| followed.last_fault.clone()),
            restarts: watcher.tally().restarts,
            updated: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            watch_pid: std::process::id(),
            record_started: followed.record.started.clone(),
            watching: true,
        },
        watcher: watcher.clone(),
    };
    // The watch goes on without it; `cluster status` then shows the last state written.
    let _ = state::save(&followed.service_dir, &saved);
}
