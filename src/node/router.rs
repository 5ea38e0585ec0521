//! The cluster's router, the node's side (the cluster's head): what it serves ([`RouterLook`]),
//! and a change of its routes ([`RouterUpdate`]): the routes file rewritten whole, the router
//! started when it does not run (`strix-toolbox router`, a process of this binary on the host,
//! detached, in a session of its own, its output in `router.log`, its pid in `router.json`), and
//! the change proven from the router itself before the call returns (its `/health/NAME` routes a
//! new service or one registered to start on demand, answers 404 for a removed one; with the last
//! route and registration gone, it has exited). One change at a time: a lock beside the routes.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::router::routes::{Registered, Route, RouterFiles, RouterProcess, Routes};
use crate::secret::Secret;
use crate::serving::http::{get, HttpAnswer};
use crate::serving::probe::last_line;
use crate::serving::service_name::ServiceName;
use crate::settings::Settings;

/// How long a change may take to show in the router (it reads its routes every 500 ms; a first
/// start binds at once).
const CHANGE_LIMIT: Duration = Duration::from_secs(20);
/// How long a router whose last route went gets to finish the answers under way and exit before
/// SIGTERM, and after it.
const EXIT_LIMIT: Duration = Duration::from_secs(20);
/// Between two looks at the router while a change shows.
const POLL: Duration = Duration::from_millis(100);
/// Each request to the router from its own node.
const ASK_LIMIT: Duration = Duration::from_secs(5);

/// What the router serves, asked on its node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterLook {
    /// The key a launch would serve with: whether the running router wants the same is said
    /// (`key_matches`), never the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    /// Also ask the router its `/health` (each route's engine, through the router).
    #[serde(default)]
    pub health: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterState {
    /// The running router (None: none runs).
    pub process: Option<RouterProcess>,
    /// Its routes, by name.
    pub routes: Vec<Route>,
    /// It wants an API key.
    pub api_key: bool,
    /// It wants the key asked about (or, neither having one, none).
    pub key_matches: bool,
    /// Each route's engine as the router reaches it: `ok`, or why not (asked only with `health`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub health: BTreeMap<String, String>,
    /// The services registered to start on demand, each with its state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_demand: Vec<OnDemandState>,
}

/// A service registered to start on demand, as the router's head sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnDemandState {
    pub name: String,
    pub engine: String,
    pub model: String,
    /// Its nodes, its head first.
    pub nodes: Vec<String>,
    /// No request for this long: stopped (None: only for another's room).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    /// `serving`, `starting`, `stopping` or `stopped`: the router's word when it was asked
    /// (`health`), else what the routes file says (routed: serving; else stopped).
    pub state: String,
    /// The GPU memory its plan puts on each of its nodes, in bytes, in the same order.
    pub planned_bytes: Vec<u64>,
}

impl RouterState {
    /// The service `name` is registered to start on demand and does not serve: the router
    /// stopped it (or has not started it) on purpose.
    pub fn stopped_on_demand(&self, name: &str) -> bool {
        self.on_demand.iter().any(|s| s.name == name) && !self.routes.iter().any(|r| r.name == name)
    }
}

/// The router's own metrics (`GET /metrics` on its node), for `cluster metrics`, `top` and the
/// watch's `--metrics`: its exposition, or None when no router runs here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterScrape {}

/// What the router's `/metrics` said, or why it said nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterExposition {
    /// No router runs on this node.
    None,
    Metrics(String),
    Failed(String),
}

pub async fn router_scrape(settings: &Settings, _ask: &RouterScrape) -> Result<RouterExposition> {
    let files = RouterFiles::of(&settings.paths)?;
    let Some(process) = running(&files)? else { return Ok(RouterExposition::None) };
    Ok(match get(local(process.listen), "/metrics", None, ASK_LIMIT).await {
        HttpAnswer::Status(200, text) => RouterExposition::Metrics(text),
        other => RouterExposition::Failed(format!("the router on {}: {other}", process.listen)),
    })
}

/// A change of the routes: a service added or registered to start on demand (the router started
/// for it when none runs), services removed, their registrations with them (the router exits
/// with the last route and registration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Route>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub register: Option<Registered>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Every route goes (`stop --all`).
    #[serde(default)]
    pub remove_all: bool,
    /// Where the router listens when this starts it (a running one must listen there already);
    /// a change that adds nothing needs none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// The endpoint's key: a router this starts wants it; a running one must want the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
}

pub async fn router_look(settings: &Settings, look: &RouterLook) -> Result<RouterState> {
    let files = RouterFiles::of(&settings.paths)?;
    let process = running(&files)?;
    let key = files.read_key()?.filter(|_| process.is_some());
    let routes = files.read_routes()?;
    let on_demand = routes
        .on_demand
        .iter()
        .map(|registered| OnDemandState {
            name: registered.name.clone(),
            engine: registered.engine.clone(),
            model: registered.model.clone(),
            nodes: registered.nodes.clone(),
            idle_seconds: registered.idle_seconds,
            state: if routes.names().contains(&registered.name.as_str()) { "serving" } else { "stopped" }.into(),
            planned_bytes: registered.room.iter().map(|room| room.map_or(0, |room| room.planned)).collect(),
        })
        .collect();
    let mut state = RouterState {
        routes: routes.routes,
        api_key: key.is_some(),
        key_matches: same_key(key.as_ref(), look.api_key.as_ref()),
        health: BTreeMap::new(),
        process,
        on_demand,
    };
    if let (true, Some(process)) = (look.health, &state.process) {
        state.health = match get(local(process.listen), "/health", None, ASK_LIMIT).await {
            HttpAnswer::Status(_, body) => each_health(&body),
            other => state.routes.iter().map(|route| (route.name.clone(), format!("the router: {other}"))).collect(),
        };
        // The router's own word for those not serving (starting, stopping, stopped).
        for service in &mut state.on_demand {
            if let Some(said) = state.health.get(&service.name).and_then(|said| on_demand_state(said)) {
                service.state = said.into();
            }
        }
    }
    Ok(state)
}

/// The state a service started on demand is in, from what the router's `/health` says of it.
fn on_demand_state(said: &str) -> Option<&'static str> {
    ["starting", "stopping", "stopped"].into_iter().find(|state| said.starts_with(&format!("{state} (")))
}

pub async fn router_update(settings: &Settings, update: &RouterUpdate) -> Result<RouterState> {
    let files = RouterFiles::of(&settings.paths)?;
    let process = running(&files)?;
    let adds = update.added();
    if adds.is_none() && process.is_none() && files.routes_bytes()?.is_none() {
        // Nothing was ever routed here: nothing to remove.
        return router_look(settings, &RouterLook::default()).await;
    }
    let _lock = files.lock().await?;
    let routes = files.read_routes()?;
    let process = running(&files)?;
    if let (Some(process), Some(name)) = (&process, adds) {
        refuse_another_router(&files, process, update, name)?;
    }
    let removed: Vec<String> = if update.remove_all {
        let mut every: Vec<String> = routes.names().iter().map(|n| n.to_string()).collect();
        every.extend(routes.on_demand.iter().map(|r| r.name.clone()));
        every
    } else {
        update.remove.clone()
    };
    let mut next = routes.without(&removed);
    if let Some(route) = &update.add {
        next = next.with(route.clone());
    }
    if let Some(registered) = &update.register {
        next = next.with_registered(registered.clone());
    }
    if let Err(error) = change(&files, process, update, &removed, &next).await {
        // What the router did not take goes again (a launch then stops its service).
        if let Some(name) = adds {
            let back = next.without(&[name.to_string()]);
            files.write_routes(&back)?;
            if back.is_empty() {
                if let Some(process) = running(&files)? {
                    wait_for_exit(&process).await;
                }
                files.write_key(None)?;
            }
        }
        return Err(error);
    }
    router_look(settings, &RouterLook { api_key: update.api_key.clone(), health: false }).await
}

/// The routes `next` written, and shown by the router: started for them when none runs and they
/// add a route, exited when none is left.
async fn change(
    files: &RouterFiles,
    process: Option<RouterProcess>,
    update: &RouterUpdate,
    removed: &[String],
    next: &Routes,
) -> Result<()> {
    files.write_routes(next)?;
    if next.is_empty() {
        if let Some(process) = &process {
            wait_for_exit(process).await;
        }
        return files.write_key(None);
    }
    // Removals alone need no router: with none running, the file is all there is to change.
    let process = match (process, update.added()) {
        (Some(process), _) => process,
        (None, Some(_)) => start(files, update)?,
        (None, None) => return Ok(()),
    };
    for name in removed {
        shows(files, &process, name, false).await?;
    }
    if let Some(name) = update.added() {
        shows(files, &process, name, true).await?;
    }
    Ok(())
}

impl RouterUpdate {
    /// The service this change routes or registers, if any.
    fn added(&self) -> Option<&str> {
        self.add.as_ref().map(|route| route.name.as_str()).or(self.register.as_ref().map(|r| r.name.as_str()))
    }
}

/// A running router serves the endpoint as it was started: the same address and key.
fn refuse_another_router(
    files: &RouterFiles,
    process: &RouterProcess,
    update: &RouterUpdate,
    name: &str,
) -> Result<()> {
    let Some(listen) = update.listen else { return Ok(()) };
    if process.listen != listen {
        return Err(Error::Usage(format!(
            "the cluster's router listens on {}, not {}: {name} joins it there. Fix: `--port {}`{} (or stop every \
             service first: `strix-toolbox cluster stop --all`)",
            process.listen,
            listen,
            process.listen.port(),
            if process.listen.ip().is_unspecified() {
                String::new()
            } else {
                format!(" --host {}", process.listen.ip())
            }
        )));
    }
    if !same_key(files.read_key()?.as_ref(), update.api_key.as_ref()) {
        return Err(Error::Usage(format!(
            "the cluster's endpoint wants another API key than {name} was launched with: one endpoint, one key. \
             Fix: launch it with the same --api-key-file (or STRIX_API_KEY)"
        )));
    }
    Ok(())
}

/// Both the same key, or both none: compared by their digests (no early exit on a byte).
fn same_key(a: Option<&Secret>, b: Option<&Secret>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            let (a, b): ([u8; 32], [u8; 32]) =
                (Sha256::digest(a.expose().as_bytes()).into(), Sha256::digest(b.expose().as_bytes()).into());
            a.iter().zip(&b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
        }
        _ => false,
    }
}

/// The recorded router, if it still runs (a pid that exited, or that another program took since,
/// is none).
fn running(files: &RouterFiles) -> Result<Option<RouterProcess>> {
    Ok(files.read_process()?.filter(|process| is_router(process.pid)))
}

/// Process `pid` runs (not a zombie) and is a router of ours (`… router --listen …`).
fn is_router(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
    if matches!(state, Some(Some('Z' | 'X')) | None) {
        return false;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    args.contains(&b"router".as_slice()) && args.contains(&b"--listen".as_slice())
}

/// Start the router for `update`: the key file first, then the process, then its record.
fn start(files: &RouterFiles, update: &RouterUpdate) -> Result<RouterProcess> {
    let listen = update.listen.ok_or_else(|| Error::Internal("a router started without its address".into()))?;
    files.write_key(update.api_key.as_ref())?;
    let program = std::env::current_exe().map_err(|error| {
        Error::host(
            "strix-toolbox",
            format!("cannot find this program to start the router: {error}"),
            "reinstall it (`strix-toolbox cluster install`)",
        )
    })?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(files.log_path())
        .map_err(|error| Error::read(files.log_path(), error))?;
    let err = log.try_clone().map_err(|error| Error::read(files.log_path(), error))?;
    let mut command = Command::new(&program);
    command.args(["router", "--listen", &listen.to_string(), "--dir"]).arg(files.dir());
    command.stdin(Stdio::null()).stdout(log).stderr(err);
    // SAFETY: setsid(2) between fork and exec only detaches the child into a session of its
    // own (the ssh session's end does not end it); it touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = command.spawn().map_err(|error| {
        Error::host(
            program.display().to_string(),
            format!("cannot start the router: {error}"),
            "check that this program runs on the node (`strix-toolbox --version`)",
        )
    })?;
    let process = RouterProcess {
        pid: child.id(),
        listen,
        started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    files.write_process(&process)?;
    Ok(process)
}

/// Until the router routes `name` (`routed`: `/health/NAME` answers anything but 404) or no
/// longer does (404); a router that exited meanwhile fails with its log's last line.
async fn shows(files: &RouterFiles, process: &RouterProcess, name: &str, routed: bool) -> Result<()> {
    let name = ServiceName::parse(name)?;
    let path = format!("/health/{}", name.file_safe());
    let deadline = Instant::now() + CHANGE_LIMIT;
    let mut answer = HttpAnswer::Refused;
    while Instant::now() < deadline {
        if !is_router(process.pid) {
            let said = last_line(&files.log_path()).unwrap_or_else(|| "(nothing)".into());
            return Err(Error::Command {
                program: "strix-toolbox router".into(),
                message: format!("the router on {} exited; its log ends: {said}", process.listen),
                fix: Some(format!("see {} on the cluster's head", files.log_path().display())),
            });
        }
        answer = get(local(process.listen), &path, None, ASK_LIMIT).await;
        match &answer {
            HttpAnswer::Status(404, _) if !routed => return Ok(()),
            HttpAnswer::Status(code, _) if routed && *code != 404 => return Ok(()),
            _ => tokio::time::sleep(POLL).await,
        }
    }
    Err(Error::Command {
        program: "strix-toolbox router".into(),
        message: format!(
            "the router on {} did not {} {name} within {} s (its /health/{name}: {answer})",
            process.listen,
            if routed { "take" } else { "drop" },
            CHANGE_LIMIT.as_secs()
        ),
        fix: Some(format!("see {} on the cluster's head", files.log_path().display())),
    })
}

/// Until the router whose last route went has exited; SIGTERM after [`EXIT_LIMIT`].
async fn wait_for_exit(process: &RouterProcess) {
    for signal in [None, Some(libc::SIGTERM)] {
        if let (Some(signal), Ok(pid)) = (signal, i32::try_from(process.pid)) {
            // SAFETY: kill(2) on the router this node started (its pid checked as ours just before).
            unsafe { libc::kill(pid, signal) };
        }
        let deadline = Instant::now() + EXIT_LIMIT;
        while Instant::now() < deadline {
            if !is_router(process.pid) {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Where the router answers on its own node: its address, the loopback for every address.
fn local(listen: SocketAddr) -> SocketAddr {
    if listen.ip().is_unspecified() {
        SocketAddr::from((Ipv4Addr::LOCALHOST, listen.port()))
    } else {
        listen
    }
}

/// `{"services": {"a": "ok", "b": "connect failed: …"}}` → each route's.
fn each_health(body: &str) -> BTreeMap<String, String> {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    value["services"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, said)| (name.clone(), said.as_str().unwrap_or("?").to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_only_when_both_are_the_same_or_both_none() {
        let key = |text: &str| Secret::new(text.into());
        assert!(same_key(None, None));
        assert!(same_key(Some(&key("a")), Some(&key("a"))));
        assert!(!same_key(Some(&key("a")), Some(&key("b"))));
        assert!(!same_key(Some(&key("a")), None) && !same_key(None, Some(&key("a"))));
    }

    #[test]
    fn the_routers_health_reads_as_each_routes() {
        let body = r#"{"status": "unavailable", "failing": ["b"], "services": {"a": "ok", "b": "connect failed"}}"#;
        let health = each_health(body);
        assert_eq!((health["a"].as_str(), health["b"].as_str()), ("ok", "connect failed"));
        assert!(each_health("not json").is_empty());
        assert_eq!(local("0.0.0.0:8000".parse().unwrap()), "127.0.0.1:8000".parse().unwrap());
        assert_eq!(local("192.168.2.1:8000".parse().unwrap()), "192.168.2.1:8000".parse().unwrap());
    }

    #[test]
    fn a_service_on_demand_without_its_route_was_stopped_on_purpose() {
        let stopped = OnDemandState {
            name: "chat".into(),
            engine: "llama.cpp".into(),
            model: "/m/chat.gguf".into(),
            nodes: vec!["node1".into()],
            idle_seconds: None,
            state: "stopped".into(),
            planned_bytes: vec![1],
        };
        let route = Route {
            name: "coder".into(),
            upstream: "192.168.2.1:8001".parse().unwrap(),
            engine: "llama.cpp".into(),
            model: "/m/coder.gguf".into(),
            nodes: vec!["node1".into()],
            since: String::new(),
        };
        let coder = OnDemandState { name: "coder".into(), ..stopped.clone() };
        let state = RouterState { routes: vec![route], on_demand: vec![stopped, coder], ..RouterState::default() };
        assert!(state.stopped_on_demand("chat"), "registered, no route");
        assert!(!state.stopped_on_demand("coder"), "registered and routed: it serves");
        assert!(!state.stopped_on_demand("other"), "not on demand: the watch's to relaunch");
        assert_eq!(on_demand_state("starting (on demand)"), Some("starting"));
        assert_eq!(on_demand_state("stopped (starts on a request)"), Some("stopped"));
        assert_eq!(on_demand_state("connect failed: refused"), None);
    }

    #[test]
    fn only_a_live_router_of_ours_counts_as_running() {
        assert!(!is_router(std::process::id()), "this test is no router");
        assert!(!is_router(u32::MAX - 1));
    }
}
