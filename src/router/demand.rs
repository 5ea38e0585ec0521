//! Services started on demand (`cluster launch --on-demand`): registered, not running, until a
//! request names one. Then the router starts it, once: every request for it meanwhile joins the
//! same start and waits for it (at most the service's `wait_seconds`, then a 503 while the start
//! goes on). Before a start, when the service's nodes cannot hold it beside what runs there (by
//! the plan's figures: [`crate::serving::room`]), the services started on demand that idle longest
//! on those nodes are stopped first; a service launched otherwise is never stopped for one. A
//! service with no request for its `idle_seconds` is stopped. One start or stop at a time.
//!
//! What starts and stops a service on its nodes is the [`Starter`] (the cluster's launch and
//! stop, over the same calls as `cluster launch` and `cluster stop`); the router keeps the state:
//! a service serves while its route is in the table; a stop takes its route out of the table and
//! the routes file first (so nothing sends it more, and the watch, seeing it registered without
//! a route, knows it was stopped on purpose), waits for the requests under way, then stops it.
//! A start that failed answers the requests for it with its reason for [`FAILED_HOLD`], then the
//! next request tries again.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::{self, BoxFuture, FutureExt};
use tokio::time::Instant;

use super::metrics::StopReason;
use super::routes::Registered;
use super::service::Shared;
use super::table::{RoutingTable, Upstream};
use crate::error::Result;
use crate::serving::room::{to_stop, Held, NoRoom};

/// The states a service started on demand is in, as `/v1/models`, `/health` and the metrics say.
pub const STATES: [&str; 4] = ["serving", "starting", "stopping", "stopped"];
/// Between two looks for services idle past their `idle_seconds`.
const IDLE_LOOK: Duration = Duration::from_secs(1);
/// Between two looks at the requests under way of a service being stopped.
const DRAIN_LOOK: Duration = Duration::from_millis(100);
/// How long a failed start's reason answers the requests for it before one starts it again: a
/// model that cannot start is not launched again for every request.
const FAILED_HOLD: Duration = Duration::from_secs(10);

/// What starts and stops services on their nodes.
#[async_trait]
pub trait Starter: Send + Sync {
    /// Every service that runs on `service`'s nodes now, on each, with what its record says it
    /// holds there.
    async fn held(&self, service: &Registered) -> Result<Vec<Held>>;
    /// Launch `service` as it was registered, its route written once it serves: where its engine
    /// answers.
    async fn start(&self, service: &Registered) -> Result<SocketAddr>;
    /// Stop `service` on its nodes (its route is gone already).
    async fn stop(&self, service: &Registered) -> Result<()>;
}

/// A start under way: every request for the service waits on the same one.
type Start = future::Shared<BoxFuture<'static, std::result::Result<Upstream, Arc<str>>>>;

#[derive(Clone)]
enum Phase {
    /// Serving (its route in the table) or stopped (none).
    Settled,
    Starting(Start),
    Stopping,
}

struct Entry {
    registered: Registered,
    phase: Phase,
    /// When its last request ended (or it was registered, or started).
    last_used: Instant,
    /// Its requests under way.
    in_flight: usize,
    /// Its last start failed, when and why.
    failed: Option<(Instant, Arc<str>)>,
}

/// Every service registered to start on demand, and what the router is doing with each.
pub struct Demand {
    starter: Option<Arc<dyn Starter>>,
    entries: Mutex<BTreeMap<String, Entry>>,
    /// Held by each start (room made, then the launch) and each stop: one at a time.
    placement: tokio::sync::Mutex<()>,
}

/// Why a request for a service started on demand got no upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotServing {
    /// Its start did not serve within its wait (it goes on).
    StillStarting(Duration),
    /// Its start failed: why.
    Failed(Arc<str>),
}

impl Demand {
    pub fn new(starter: Option<Arc<dyn Starter>>) -> Demand {
        Demand { starter, entries: Mutex::new(BTreeMap::new()), placement: tokio::sync::Mutex::new(()) }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The registrations as the routes file has them now: new ones settled (their idle time from
    /// now), gone ones forgotten (a start under way ends by itself).
    pub fn update(&self, registered: &[Registered]) {
        let mut entries = self.entries();
        entries.retain(|name, _| registered.iter().any(|r| &r.name == name));
        for each in registered {
            match entries.get_mut(&each.name) {
                Some(entry) if entry.registered != *each => {
                    // Registered again, otherwise: a start tries it afresh.
                    entry.registered = each.clone();
                    entry.failed = None;
                }
                Some(_) => {}
                None => {
                    let entry = Entry {
                        registered: each.clone(),
                        phase: Phase::Settled,
                        last_used: Instant::now(),
                        in_flight: 0,
                        failed: None,
                    };
                    entries.insert(each.name.clone(), entry);
                }
            }
        }
    }

    pub fn is_registered(&self, name: &str) -> bool {
        self.entries().contains_key(name)
    }

    pub fn registered(&self, name: &str) -> Option<Registered> {
        self.entries().get(name).map(|entry| entry.registered.clone())
    }

    /// Each registered service's name and state, by name.
    pub fn states(&self, table: &RoutingTable) -> Vec<(String, &'static str)> {
        self.entries().iter().map(|(name, entry)| (name.clone(), state_of(entry, table.get(name).is_some()))).collect()
    }

    /// `name`'s state, when it is registered.
    pub fn state(&self, name: &str, table: &RoutingTable) -> Option<&'static str> {
        self.entries().get(name).map(|entry| state_of(entry, table.get(name).is_some()))
    }

    /// A request for `name` begins: counted under way until the guard goes.
    pub fn begin(self: &Arc<Self>, name: &str) -> Option<InFlight> {
        let mut entries = self.entries();
        let entry = entries.get_mut(name)?;
        entry.in_flight += 1;
        Some(InFlight { demand: self.clone(), name: name.to_string() })
    }

    /// The services that may be stopped for `name`'s room: those started on demand that serve
    /// and are doing nothing else, idle longest first (those with requests under way last).
    fn stoppable(&self, name: &str, table: &RoutingTable) -> Vec<String> {
        let entries = self.entries();
        let mut serving: Vec<(&String, &Entry)> = entries
            .iter()
            .filter(|(other, entry)| {
                *other != name && table.get(other).is_some() && matches!(entry.phase, Phase::Settled)
            })
            .collect();
        serving.sort_by_key(|(_, entry)| (entry.in_flight > 0, entry.last_used));
        serving.into_iter().map(|(name, _)| name.clone()).collect()
    }

    fn in_flight(&self, name: &str) -> usize {
        self.entries().get(name).map_or(0, |entry| entry.in_flight)
    }

    /// `name`'s start ended: settled, just used when it serves now, its failure kept when not.
    fn settle(&self, name: &str, outcome: &std::result::Result<Upstream, Arc<str>>) {
        if let Some(entry) = self.entries().get_mut(name) {
            entry.phase = Phase::Settled;
            match outcome {
                Ok(_) => {
                    entry.last_used = Instant::now();
                    entry.failed = None;
                }
                Err(why) => entry.failed = Some((Instant::now(), why.clone())),
            }
        }
    }
}

fn state_of(entry: &Entry, routed: bool) -> &'static str {
    match entry.phase {
        Phase::Starting(_) => "starting",
        Phase::Stopping => "stopping",
        Phase::Settled if routed => "serving",
        Phase::Settled => "stopped",
    }
}

/// One request under way to a service started on demand; its end is its service's last use.
pub struct InFlight {
    demand: Arc<Demand>,
    name: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(entry) = self.demand.entries().get_mut(&self.name) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.last_used = Instant::now();
        }
    }
}

/// Where `name` (registered to start on demand) answers: at once when it serves, else once the
/// start (this request's, or one under way) has made it serve, within its wait.
pub async fn serving(shared: &Arc<Shared>, name: &str) -> std::result::Result<Upstream, NotServing> {
    let (start, wait) = {
        let mut entries = shared.demand.entries();
        let Some(entry) = entries.get_mut(name) else {
            return Err(NotServing::Failed(format!("`{name}` is no longer registered").into()));
        };
        let wait = entry.registered.wait();
        match &entry.phase {
            Phase::Settled => {
                if let Some(upstream) = shared.table.snapshot().get(name) {
                    return Ok(upstream.clone());
                }
                if let Some((_, why)) = entry.failed.as_ref().filter(|(at, _)| at.elapsed() < FAILED_HOLD) {
                    return Err(NotServing::Failed(why.clone()));
                }
                let start = begin_start(shared.clone(), name.to_string());
                entry.phase = Phase::Starting(start.clone());
                (start, wait)
            }
            Phase::Starting(start) => (start.clone(), wait),
            // A stop under way holds the placement: this start follows it.
            Phase::Stopping => {
                let start = begin_start(shared.clone(), name.to_string());
                entry.phase = Phase::Starting(start.clone());
                (start, wait)
            }
        }
    };
    match tokio::time::timeout(wait, start).await {
        Err(_) => Err(NotServing::StillStarting(wait)),
        Ok(Err(why)) => Err(NotServing::Failed(why)),
        Ok(Ok(upstream)) => Ok(upstream),
    }
}

/// The start of `name`, running by itself (whoever waits for it, or not).
fn begin_start(shared: Arc<Shared>, name: String) -> Start {
    let task = tokio::spawn(async move {
        let outcome = make_room_and_start(&shared, &name).await;
        shared.demand.settle(&name, &outcome);
        if let Err(why) = &outcome {
            shared.reporter.warning(&format!("router: {why}"));
        }
        outcome
    });
    async move { task.await.unwrap_or_else(|error| Err(format!("the start ended early: {error}").into())) }
        .boxed()
        .shared()
}

async fn make_room_and_start(shared: &Arc<Shared>, name: &str) -> std::result::Result<Upstream, Arc<str>> {
    let demand = &shared.demand;
    let starter = demand.starter.clone().ok_or_else(|| Arc::from("this router has no way to start services"))?;
    let _placement = demand.placement.lock().await;
    let registered = demand.registered(name).ok_or_else(|| Arc::from(format!("`{name}` is no longer registered")))?;
    if let Some(upstream) = shared.table.snapshot().get(name) {
        return Ok(upstream.clone());
    }
    let failed = |why: String| {
        shared.metrics.start_failed(name);
        Arc::from(format!("`{name}` could not be started: {why}"))
    };
    let held: Vec<Held> = starter
        .held(&registered)
        .await
        .map_err(|e| failed(e.to_string()))?
        .into_iter()
        .filter(|h| h.service != name)
        .collect();
    let stoppable = demand.stoppable(name, &shared.table.snapshot());
    let room = to_stop(&registered.needs(), &held, &stoppable).map_err(|NoRoom(why)| {
        failed(format!("no room on its nodes ({why}); a service launched without --on-demand is never stopped for one"))
    })?;
    for other in room {
        shared.reporter.line(&format!("router: stopping {other} (idle longest) to make room for {name}"));
        stop(shared, &other, StopReason::Room).await.map_err(|e| failed(format!("stopping {other} for room: {e}")))?;
    }
    // A start's seconds are its launch's: the stops that made room are counted as stops.
    let began = Instant::now();
    shared.reporter.line(&format!("router: starting {name} on {}", registered.nodes.join(", ")));
    let address = starter.start(&registered).await.map_err(|e| failed(e.to_string()))?;
    let upstream = Upstream::new(address);
    shared.route(name, upstream.clone()).await;
    let took = began.elapsed();
    shared.metrics.started(name, took);
    shared.reporter.line(&format!("router: {name} serves at {address} ({:.1} s)", took.as_secs_f64()));
    Ok(upstream)
}

/// Stop `name` (the placement held): its route out of the table and the file, its requests
/// under way waited for (at most the bounds' `drain`), then its processes.
async fn stop(shared: &Arc<Shared>, name: &str, why: StopReason) -> Result<()> {
    let demand = &shared.demand;
    let Some(registered) = demand.registered(name) else { return Ok(()) };
    let began = Instant::now();
    if let Some(entry) = demand.entries().get_mut(name) {
        entry.phase = Phase::Stopping;
    }
    let outcome = async {
        shared.unroute(name).await?;
        let deadline = Instant::now() + shared.bounds.drain;
        while demand.in_flight(name) > 0 && Instant::now() < deadline {
            tokio::time::sleep(DRAIN_LOOK).await;
        }
        let starter = demand.starter.clone().ok_or_else(|| crate::error::Error::Internal("no starter".into()))?;
        starter.stop(&registered).await
    }
    .await;
    // A start asked meanwhile took the phase: it is its own now.
    if let Some(entry) = demand.entries().get_mut(name) {
        if matches!(entry.phase, Phase::Stopping) {
            entry.phase = Phase::Settled;
        }
    }
    if outcome.is_ok() {
        shared.metrics.stopped(name, why);
        let took = began.elapsed().as_secs_f64();
        shared.reporter.line(&format!("router: stopped {name} ({}, {took:.1} s)", why.name()));
    }
    outcome
}

/// Stop every service started on demand that has had no request for its `idle_seconds`, until
/// `stop` says true: looked at every [`IDLE_LOOK`], each stopped when no start or stop is under way.
pub async fn stop_the_idle(shared: Arc<Shared>, mut stopping: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(IDLE_LOOK) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        for name in idle(&shared) {
            let Ok(_placement) = shared.demand.placement.try_lock() else { break };
            // Looked at again with the placement held: a request may have come meanwhile.
            if !idle(&shared).contains(&name) {
                continue;
            }
            if let Err(error) = stop(&shared, &name, StopReason::Idle).await {
                shared.reporter.warning(&format!("router: {name} idle, but its stop failed: {error}"));
            }
        }
    }
}

/// The services that serve, have no request under way, and none for their `idle_seconds`.
fn idle(shared: &Shared) -> Vec<String> {
    let table = shared.table.snapshot();
    let entries = shared.demand.entries();
    entries
        .iter()
        .filter(|(name, entry)| {
            let idle = entry.registered.idle();
            table.get(name).is_some()
                && matches!(entry.phase, Phase::Settled)
                && entry.in_flight == 0
                && idle.is_some_and(|idle| entry.last_used.elapsed() >= idle)
        })
        .map(|(name, _)| name.clone())
        .collect()
}
