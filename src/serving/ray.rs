//! Ray in a node's toolbox: start it (the head, or a worker joining it over the cluster link), and
//! ask the head which nodes the cluster has.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ops::toolbox::RunningToolbox;
use crate::serving::commands::{ray_head, ray_nodes, ray_worker, RAY_PORT};
use crate::serving::record::{ServingFiles, ServingRecord};
use crate::settings::Settings;

/// How long `ray start` may take: a worker that reaches the head joins in seconds; one that does
/// not would retry the GCS for about twelve minutes.
const RAY_START_SECONDS: &str = "90";
/// How long the readiness query may take (it connects a driver to the cluster).
const RAY_NODES_SECONDS: &str = "45";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum RayRole {
    Head,
    Worker { head_ip: Ipv4Addr },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RayStart {
    pub toolbox: String,
    pub role: RayRole,
    /// The serving environment (`serving::environment`), for Ray and every actor it starts.
    pub env: BTreeMap<String, String>,
    /// What this launch records on the node (written before anything starts, so a stop finds it).
    pub record: ServingRecord,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RayStarted {
    /// `ray start`'s last lines.
    pub said: Vec<String>,
}

pub async fn ray_start(settings: &Settings, request: &RayStart) -> Result<RayStarted> {
    let toolbox = RunningToolbox::open(settings, &request.toolbox).await?;
    let files = ServingFiles::of(&settings.paths, &toolbox.name)?;
    clear_stale_compile_cache(&files, &toolbox.image(), &request.env, settings.paths.cache_home())?;
    files.write(&ServingRecord { image: toolbox.image(), ..request.record.clone() })?;
    let link_ip = request.record.link_ip;
    let ray = match &request.role {
        RayRole::Head => ray_head(link_ip),
        RayRole::Worker { head_ip } => {
            reach_head(SocketAddr::from((*head_ip, RAY_PORT)), link_ip).await?;
            ray_worker(*head_ip, link_ip)
        }
    };
    let mut argv = vec!["timeout".to_string(), RAY_START_SECONDS.to_string()];
    argv.extend(ray);
    let report = toolbox.run(&argv, &request.env).await?;
    if report.success() {
        return Ok(RayStarted { said: report.last_lines(3) });
    }
    let said = report.last_lines(4).join(" | ");
    let could_not_join = said.contains("Failed to connect to GCS") || report.exit_code == 124;
    Err(Error::Command {
        program: "ray start".into(),
        message: format!("in toolbox {} on {link_ip} (exit {}): {said}", toolbox.name, report.exit_code),
        fix: could_not_join.then(|| {
            "it reached the head's port but could not join: a firewall may block Ray's other ports. Trust the \
             cluster link on every node (`sudo firewall-cmd --zone=trusted --change-interface=IFACE --permanent && \
             sudo firewall-cmd --reload`)"
                .to_string()
        }),
    })
}

/// A worker first knocks on the head's GCS port from its own network (the toolbox's, the host's):
/// a blocked port fails in seconds with the likely reason instead of Ray's twelve minutes of retries.
async fn reach_head(address: SocketAddr, link_ip: Ipv4Addr) -> Result<()> {
    let outcome = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(address)).await;
    let (why, fix) = match outcome {
        Ok(Ok(_)) => return Ok(()),
        Err(_) => (
            "nothing answered within 5 s: a firewall drops it (firewalld on the head, or on this node)".to_string(),
            format!(
                "trust the cluster link on both nodes (`sudo firewall-cmd --zone=trusted --change-interface=IFACE \
                 --permanent && sudo firewall-cmd --reload`), or open port {} and Ray's ports",
                address.port()
            ),
        ),
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => (
            "the head refused it: its Ray is not running there, or listens on another address".to_string(),
            "`strix-toolbox cluster logs --node HEAD` shows why the head's Ray is not up".to_string(),
        ),
        Ok(Err(error)) => (
            format!("{error}: the head's link address is wrong or the link is down"),
            "`strix-toolbox cluster doctor` checks the link, its subnet and MTU on every node".to_string(),
        ),
    };
    Err(Error::Host {
        what: "the cluster link".into(),
        message: format!("this node ({link_ip}) cannot reach the Ray head at {address}: {why}"),
        fix: Some(fix),
    })
}

/// vLLM's compiled graphs are only valid for the image that compiled them: when the toolbox runs
/// another image than at the last launch, its compile cache goes first (a stale one crashes).
pub(super) fn clear_stale_compile_cache(
    files: &ServingFiles,
    image: &str,
    env: &BTreeMap<String, String>,
    cache_home: Option<&Path>,
) -> Result<()> {
    let last = std::fs::read_to_string(files.last_image()).unwrap_or_default();
    if last.trim() == image {
        return Ok(());
    }
    if let Some(cache) = compile_cache(env, cache_home) {
        match std::fs::remove_dir_all(&cache) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(Error::host(
                    cache.display().to_string(),
                    format!("cannot clear vLLM's compile cache {} after an image change: {error}", cache.display()),
                    format!("remove it by hand (`rm -rf {}`)", cache.display()),
                ))
            }
        }
    }
    files.write_file(&files.last_image(), image.as_bytes())
}

/// `$VLLM_CACHE_ROOT/torch_compile_cache`, else under `CACHE_HOME/vllm` (the XDG cache home,
/// `~/.cache` by default: the toolbox shares this home at the same path).
fn compile_cache(env: &BTreeMap<String, String>, cache_home: Option<&Path>) -> Option<PathBuf> {
    let root = match env.get("VLLM_CACHE_ROOT") {
        Some(root) => PathBuf::from(root),
        None => cache_home?.join("vllm"),
    };
    Some(root.join("torch_compile_cache"))
}

/// The head's view of one Ray node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayNode {
    pub ip: String,
    pub alive: bool,
    pub gpus: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RayNodes {
    pub toolbox: String,
}

pub async fn ray_nodes_of(settings: &Settings, request: &RayNodes) -> Result<Vec<RayNode>> {
    let toolbox = RunningToolbox::open(settings, &request.toolbox).await?;
    let head_ip =
        ServingFiles::of(&settings.paths, &toolbox.name)?.read()?.map(|record| record.head_ip).ok_or_else(|| {
            Error::toolbox(
                &toolbox.name,
                "nothing was launched in it: it has no Ray cluster to ask",
                "`cluster launch` starts one",
            )
        })?;
    let mut argv = vec!["timeout".to_string(), RAY_NODES_SECONDS.to_string()];
    argv.extend(ray_nodes(head_ip));
    let report = toolbox.run_ok("asking Ray for its nodes", &argv, &Default::default()).await?;
    let line = report.stdout.lines().rev().find(|line| line.trim_start().starts_with('[')).unwrap_or("");
    serde_json::from_str(line).map_err(|e| Error::Command {
        program: "ray.nodes()".into(),
        message: format!("Ray's node table is unreadable ({e}): {}", report.last_lines(2).join(" | ")),
        fix: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_cache_follows_vllm_cache_root() {
        let env = [("VLLM_CACHE_ROOT".to_string(), "/data/vllm".to_string())].into_iter().collect();
        assert_eq!(compile_cache(&env, None), Some(PathBuf::from("/data/vllm/torch_compile_cache")));
        assert_eq!(
            compile_cache(&Default::default(), Some(Path::new("/c"))),
            Some("/c/vllm/torch_compile_cache".into())
        );
    }

    #[test]
    fn a_new_image_clears_the_compile_cache_once() {
        let dir = tempfile::tempdir().unwrap();
        let files = ServingFiles::in_dir(&dir.path().join("serving"), "vllm");
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(cache.join("torch_compile_cache/graph")).unwrap();
        let env = [("VLLM_CACHE_ROOT".to_string(), cache.display().to_string())].into_iter().collect();
        clear_stale_compile_cache(&files, "sha256:new", &env, None).unwrap();
        assert!(!cache.join("torch_compile_cache").exists());
        std::fs::create_dir_all(cache.join("torch_compile_cache/graph")).unwrap();
        clear_stale_compile_cache(&files, "sha256:new", &env, None).unwrap();
        assert!(cache.join("torch_compile_cache/graph").exists(), "the same image keeps its cache");
    }

    #[tokio::test]
    async fn a_head_nobody_listens_at_is_named_with_the_reason() {
        // A port of our own: reached while it listens, refused with its address once it is closed.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        reach_head(address, Ipv4Addr::LOCALHOST).await.unwrap();
        drop(listener);
        let error = reach_head(address, Ipv4Addr::LOCALHOST).await.unwrap_err().to_string();
        assert!(error.contains(&address.to_string()) && error.contains("refused"), "{error}");
    }
}
