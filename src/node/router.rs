//! The cluster's router, the node's side (the cluster's head): what it serves ([`RouterLook`]),
//! and a change of its routes ([`RouterUpdate`]): the routes file rewritten whole, the router
//! started when it does not run (`strix-toolbox router`, a process of this binary on the host,
//! detached, in a session of its own, its output in `router.log`, its pid in `router.json`), and
//! the change proven from the router itself before the call returns (its `/health/NAME` routes a
//! new service, answers 404 for a removed one; with the last route gone, it has exited). One
//! change at a time: a lock beside the routes.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::router::routes::{Route, RouterFiles, RouterProcess, Routes};
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
/// How long a launch or stop waits for another's change of the routes.
const LOCK_LIMIT: Duration = Duration::from_secs(120);
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
}

/// A change of the routes: a service added (the router started for it when none runs), services
/// removed (the router exits with the last route).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<Route>,
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
    let mut state = RouterState {
        routes: files.read_routes()?.routes,
        api_key: key.is_some(),
        key_matches: same_key(key.as_ref(), look.api_key.as_ref()),
        health: BTreeMap::new(),
        process,
    };
    if let (true, Some(process)) = (look.health, &state.process) {
        state.health = match get(local(process.listen), "/health", None, ASK_LIMIT).await {
            HttpAnswer::Status(_, body) => each_health(&body),
            other => state.routes.iter().map(|route| (route.name.clone(), format!("the router: {other}"))).collect(),
        };
    }
    Ok(state)
}

pub async fn router_update(settings: &Settings, update: &RouterUpdate) -> Result<RouterState> {
    let files = RouterFiles::of(&settings.paths)?;
    let process = running(&files)?;
    if update.add.is_none() && process.is_none() && files.routes_bytes()?.is_none() {
        // Nothing was ever routed here: nothing to remove.
        return router_look(settings, &RouterLook::default()).await;
    }
    files.make_dir()?;
    let _lock = lock(&files).await?;
    let routes = files.read_routes()?;
    let process = running(&files)?;
    if let (Some(process), Some(route)) = (&process, &update.add) {
        refuse_another_router(&files, process, update, &route.name)?;
    }
    let removed: Vec<String> =
        if update.remove_all { routes.names().iter().map(|n| n.to_string()).collect() } else { update.remove.clone() };
    let mut next = routes.without(&removed);
    if let Some(route) = &update.add {
        next = next.with(route.clone());
    }
    if let Err(error) = change(&files, process, update, &removed, &next).await {
        // A route the router did not take goes again (the launch then stops its service).
        if let Some(route) = &update.add {
            let back = next.without(std::slice::from_ref(&route.name));
            files.write_routes(&back)?;
            if back.routes.is_empty() {
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
    if next.routes.is_empty() {
        if let Some(process) = &process {
            wait_for_exit(process).await;
        }
        return files.write_key(None);
    }
    // Removals alone need no router: with none running, the file is all there is to change.
    let process = match (process, &update.add) {
        (Some(process), _) => process,
        (None, Some(_)) => start(files, update)?,
        (None, None) => return Ok(()),
    };
    for name in removed {
        shows(files, &process, name, false).await?;
    }
    if let Some(route) = &update.add {
        shows(files, &process, &route.name, true).await?;
    }
    Ok(())
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

/// The routes' lock, waited for (a launch or stop elsewhere changes them for seconds).
async fn lock(files: &RouterFiles) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(files.lock_path())
        .map_err(|error| Error::read(files.lock_path(), error))?;
    let deadline = Instant::now() + LOCK_LIMIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => tokio::time::sleep(POLL).await,
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::toolbox(
                    "router",
                    format!("another launch or stop changed the router's routes for over {} s", LOCK_LIMIT.as_secs()),
                    "try again once it ends",
                ))
            }
            Err(std::fs::TryLockError::Error(error)) => return Err(Error::read(files.lock_path(), error)),
        }
    }
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
    fn only_a_live_router_of_ours_counts_as_running() {
        assert!(!is_router(std::process::id()), "this test is no router");
        assert!(!is_router(u32::MAX - 1));
    }
}
