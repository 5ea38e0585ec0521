//! What the router of a cluster serves, kept on the cluster's head under its state directory
//! (`$XDG_STATE_HOME/strix-toolbox/router/`): `routes.json`, every service that serves (its name,
//! where its engine answers, the engine, the model, its nodes, since when), written by the launch
//! once the service is proven and by the stop, and every service registered to start on demand
//! ([`Registered`]); `api-key` (0600), the endpoint's key, the router's alone; `keys.json`
//! (0600), the keys per user by their hashes ([`super::keys`]); `router.json`, the running
//! router's pid and address; `router.log`, what it said. One change at a time: a lock beside them.
//!
//! ```json
//! {"routes": [{"name": "coder", "upstream": "192.168.2.3:8001", "engine": "llama.cpp",
//!   "model": "/models/coder.gguf", "nodes": ["node3"], "since": "2026-11-24T10:00:00Z"}],
//!  "on_demand": [{"name": "coder", "engine": "llama.cpp", "model": "/models/coder.gguf",
//!   "nodes": ["node3"], "room": [{"planned": 1073741824, "usable": 34359738368}],
//!   "idle_seconds": 600, "wait_seconds": 300, "since": "2026-11-24T10:00:00Z", "launch": {…}}]}
//! ```

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::keys::KeyBook;
use super::table::{RoutingTable, Upstream};
use crate::error::{Error, Result};
use crate::paths::Paths;
use crate::secret::Secret;
use crate::serving::room::Room;

/// The largest routes, keys or key file read (a route is a few hundred bytes).
const MAX_FILE_BYTES: u64 = 1 << 20;
/// How long a change of the routes waits for another's (a launch or stop changes them for seconds).
const LOCK_LIMIT: Duration = Duration::from_secs(120);
/// Between two tries of the lock.
const LOCK_POLL: Duration = Duration::from_millis(100);

/// One service the router sends requests to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// The service's name: what clients send as `model`.
    pub name: String,
    /// Where its engine answers (on the link, or the loopback).
    pub upstream: SocketAddr,
    /// The engine, as records name it (`vllm`, `llama.cpp`).
    pub engine: String,
    pub model: String,
    /// Its nodes, the service's head first.
    pub nodes: Vec<String>,
    /// When it was launched (RFC 3339).
    pub since: String,
}

/// A service registered to start on demand (`cluster launch --on-demand`): the router starts it
/// when a request names it, stops it after `idle_seconds` without one, or for another's room.
/// While it serves it has its [`Route`] too; stopped, only this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    /// The service's name: what clients send as `model`.
    pub name: String,
    /// The engine, as records name it.
    pub engine: String,
    pub model: String,
    /// Its nodes, the service's head first.
    pub nodes: Vec<String>,
    /// Per node, in the same order: what the plan puts there and what the node has for serving
    /// (None: nothing; a head whose server has no GPU of its own).
    pub room: Vec<Option<Room>>,
    /// No request for this long: stopped (None: it stops only for another's room).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_seconds: Option<u64>,
    /// How long a request waits for its start before a 503 (the start goes on).
    pub wait_seconds: u64,
    /// When it was registered (RFC 3339).
    pub since: String,
    /// What a start launches, as the cluster's launch reads it; the router keeps it as it came.
    pub launch: serde_json::Value,
}

impl Registered {
    /// Its nodes where its plan puts something, each with its room there.
    pub fn needs(&self) -> Vec<(String, Room)> {
        self.nodes.iter().zip(&self.room).filter_map(|(node, room)| Some((node.clone(), (*room)?))).collect()
    }

    pub fn idle(&self) -> Option<Duration> {
        self.idle_seconds.map(Duration::from_secs)
    }

    pub fn wait(&self) -> Duration {
        Duration::from_secs(self.wait_seconds)
    }
}

/// The routes file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routes {
    pub routes: Vec<Route>,
    /// The services registered to start on demand, serving or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_demand: Vec<Registered>,
}

impl Routes {
    /// The table the router serves: each route's engine, which wants no key (it listens on the
    /// link or the loopback; the endpoint's key is checked at the router).
    pub fn table(&self) -> RoutingTable {
        self.routes.iter().map(|route| (route.name.clone(), Upstream::new(route.upstream))).collect()
    }

    /// `route` in place of any of the same name.
    pub fn with(mut self, route: Route) -> Routes {
        self.routes.retain(|r| r.name != route.name);
        self.routes.push(route);
        self.routes.sort_by(|a, b| a.name.cmp(&b.name));
        self
    }

    /// `registered` in place of any registration of the same name.
    pub fn with_registered(mut self, registered: Registered) -> Routes {
        self.on_demand.retain(|r| r.name != registered.name);
        self.on_demand.push(registered);
        self.on_demand.sort_by(|a, b| a.name.cmp(&b.name));
        self
    }

    /// Without the services named in `names`: their routes and their registrations.
    pub fn without(mut self, names: &[String]) -> Routes {
        self.routes.retain(|r| !names.contains(&r.name));
        self.on_demand.retain(|r| !names.contains(&r.name));
        self
    }

    /// Without `name`'s route, registered still (the router stopped it: it starts on demand).
    pub fn without_route(mut self, name: &str) -> Routes {
        self.routes.retain(|r| r.name != name);
        self
    }

    /// The names of the services that serve.
    pub fn names(&self) -> Vec<&str> {
        self.routes.iter().map(|route| route.name.as_str()).collect()
    }

    pub fn registered(&self, name: &str) -> Option<&Registered> {
        self.on_demand.iter().find(|r| r.name == name)
    }

    /// Nothing serves and nothing is registered: the router has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty() && self.on_demand.is_empty()
    }
}

/// The running router, as it was started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterProcess {
    pub pid: u32,
    /// Where it listens.
    pub listen: SocketAddr,
    /// When it started (RFC 3339).
    pub started: String,
}

/// The router's files on its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterFiles {
    dir: PathBuf,
}

impl RouterFiles {
    /// Under this node's own state directory (apart from other nodes' that share the home).
    pub fn of(paths: &Paths) -> Result<RouterFiles> {
        Ok(RouterFiles::in_dir(&paths.node_state_dir("the router's routes")?.join("router")))
    }

    pub fn in_dir(dir: &Path) -> RouterFiles {
        RouterFiles { dir: dir.to_path_buf() }
    }

    /// The directory they are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn routes_path(&self) -> PathBuf {
        self.dir.join("routes.json")
    }

    pub fn key_path(&self) -> PathBuf {
        self.dir.join("api-key")
    }

    /// The keys per user, by their hashes.
    pub fn keys_path(&self) -> PathBuf {
        self.dir.join("keys.json")
    }

    pub fn process_path(&self) -> PathBuf {
        self.dir.join("router.json")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("router.log")
    }

    /// The file whose lock one change of the routes holds (two launches at once take turns).
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join("lock")
    }

    /// The directory, made when missing.
    pub fn make_dir(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.write_error(&self.dir, e))
    }

    /// The routes file's bytes as they are now; None when there is none.
    pub fn routes_bytes(&self) -> Result<Option<Vec<u8>>> {
        read_bounded(&self.routes_path())
    }

    /// The routes (none when there is no routes file).
    pub fn read_routes(&self) -> Result<Routes> {
        match self.routes_bytes()? {
            Some(bytes) => parse_routes(&bytes, &self.routes_path()),
            None => Ok(Routes::default()),
        }
    }

    /// Write the routes atomically: the router reads either the old file or the new one whole.
    pub fn write_routes(&self, routes: &Routes) -> Result<()> {
        let text = serde_json::to_string_pretty(routes)
            .map_err(|e| Error::Internal(format!("cannot encode the routes: {e}")))?;
        self.write_file(&self.routes_path(), text.as_bytes())
    }

    /// The keys file's bytes as they are now; None when there is none.
    pub fn keys_bytes(&self) -> Result<Option<Vec<u8>>> {
        read_bounded(&self.keys_path())
    }

    /// The keys per user (none when there is no keys file).
    pub fn read_keys(&self) -> Result<KeyBook> {
        match self.keys_bytes()? {
            Some(bytes) => KeyBook::parse(&bytes, &self.keys_path()),
            None => Ok(KeyBook::default()),
        }
    }

    /// Write the keys atomically, 0600.
    pub fn write_keys(&self, keys: &KeyBook) -> Result<()> {
        let text =
            serde_json::to_string_pretty(keys).map_err(|e| Error::Internal(format!("cannot encode the keys: {e}")))?;
        self.write_file(&self.keys_path(), text.as_bytes())
    }

    /// The lock one change of the routes or keys holds, waited for (another launch or stop
    /// changes them for seconds); released when dropped.
    pub async fn lock(&self) -> Result<std::fs::File> {
        self.make_dir()?;
        let path = self.lock_path();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| Error::read(path.clone(), error))?;
        let deadline = Instant::now() + LOCK_LIMIT;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(LOCK_POLL).await
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::toolbox(
                        "router",
                        format!(
                            "another launch or stop changed the router's routes for over {} s",
                            LOCK_LIMIT.as_secs()
                        ),
                        "try again once it ends",
                    ))
                }
                Err(std::fs::TryLockError::Error(error)) => return Err(Error::read(path, error)),
            }
        }
    }

    /// The routes changed by `change`, under the lock, written whole: what they are now.
    pub async fn change_routes(&self, change: impl FnOnce(Routes) -> Routes) -> Result<Routes> {
        let _lock = self.lock().await?;
        let next = change(self.read_routes()?);
        self.write_routes(&next)?;
        Ok(next)
    }

    /// The endpoint's key, if the router wants one.
    pub fn read_key(&self) -> Result<Option<Secret>> {
        let Some(bytes) = read_bounded(&self.key_path())? else { return Ok(None) };
        let text = String::from_utf8(bytes).map_err(|_| {
            Error::host(
                self.key_path().display().to_string(),
                format!("{} is not text", self.key_path().display()),
                "stop every service (`strix-toolbox cluster stop --all`) and launch again with the key",
            )
        })?;
        Ok(Some(Secret::new(text.trim_end_matches(['\r', '\n']).to_string())))
    }

    /// Keep the endpoint's key (0600), or none.
    pub fn write_key(&self, key: Option<&Secret>) -> Result<()> {
        match key {
            Some(key) => self.write_file(&self.key_path(), key.expose().as_bytes()),
            None => match std::fs::remove_file(self.key_path()) {
                Ok(()) => Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(error) => Err(self.write_error(&self.key_path(), error)),
            },
        }
    }

    /// The router that was started last, if one was.
    pub fn read_process(&self) -> Result<Option<RouterProcess>> {
        let Some(bytes) = read_bounded(&self.process_path())? else { return Ok(None) };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            Error::host(
                self.process_path().display().to_string(),
                format!("{} is not the router's pid and address ({e})", self.process_path().display()),
                format!("remove it (`rm {}`)", self.process_path().display()),
            )
        })
    }

    pub fn write_process(&self, process: &RouterProcess) -> Result<()> {
        let text = serde_json::to_string(process)
            .map_err(|e| Error::Internal(format!("cannot encode the router's process: {e}")))?;
        self.write_file(&self.process_path(), text.as_bytes())
    }

    /// Write `path` in the directory atomically, 0600 (a temporary file's mode).
    fn write_file(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        crate::paths::write_atomically(&self.dir, path, bytes)
    }

    fn write_error(&self, path: &Path, error: std::io::Error) -> Error {
        crate::paths::write_error(path, error)
    }
}

/// The routes in `bytes` (the file at `path`).
pub fn parse_routes(bytes: &[u8], path: &Path) -> Result<Routes> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::host(
            path.display().to_string(),
            format!("{} is not the router's routes ({e})", path.display()),
            "stop every service (`strix-toolbox cluster stop --all`), which removes it, and launch them again",
        )
    })
}

/// A file's bytes, at most [`MAX_FILE_BYTES`] of them; None when there is no such file.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    match std::fs::File::open(path).and_then(|file| file.take(MAX_FILE_BYTES).read_to_end(&mut bytes)) {
        Ok(_) => Ok(Some(bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(Error::read(path.to_path_buf(), error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn route(name: &str, port: u16) -> Route {
        Route {
            name: name.into(),
            upstream: SocketAddr::from(([192, 168, 2, 3], port)),
            engine: "llama.cpp".into(),
            model: format!("/models/{name}.gguf"),
            nodes: vec!["node3".into()],
            since: "2026-11-24T10:00:00Z".into(),
        }
    }

    #[test]
    fn routes_are_added_replaced_and_removed_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let files = RouterFiles::in_dir(&dir.path().join("router"));
        assert_eq!(files.read_routes().unwrap(), Routes::default(), "no file: no routes");
        let routes = Routes::default().with(route("coder", 8001)).with(route("chat", 8002)).with(route("coder", 8003));
        assert_eq!(routes.names(), ["chat", "coder"]);
        files.write_routes(&routes).unwrap();
        let read = files.read_routes().unwrap();
        assert_eq!(read, routes);
        assert_eq!(read.table().get("coder").map(|u| u.address.port()), Some(8003));
        assert!(read.table().get("coder").is_some_and(|u| u.api_key.is_none()), "the engines get no key");
        assert_eq!(read.without(&["coder".into()]).names(), ["chat"]);
        std::fs::write(files.routes_path(), "{not json").unwrap();
        assert!(files.read_routes().unwrap_err().to_string().contains("not the router's routes"));
    }

    #[test]
    fn the_key_is_kept_0600_and_read_without_its_newline() {
        let dir = tempfile::tempdir().unwrap();
        let files = RouterFiles::in_dir(dir.path());
        assert_eq!(files.read_key().unwrap(), None);
        files.write_key(Some(&Secret::new("sk-1".into()))).unwrap();
        let mode = std::fs::metadata(files.key_path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(files.key_path(), "sk-2\n").unwrap();
        assert_eq!(files.read_key().unwrap().map(|k| k.expose().to_string()), Some("sk-2".into()));
        files.write_key(None).unwrap();
        files.write_key(None).unwrap();
        assert_eq!(files.read_key().unwrap(), None);
    }
}
