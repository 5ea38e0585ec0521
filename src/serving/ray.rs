//! Ray in a node's toolbox (vLLM's control plane across nodes): start it (the head, or a worker
//! joining it over the cluster link), and ask the head which nodes the cluster has.
//!
//! Ray listens on the node's link address (`--node-ip-address`; the dashboard, which would listen
//! everywhere, is off) and, since Ray 2.52, takes a token: every launch makes one, and each
//! node's Ray and anything that talks to it (the head's `vllm serve`, the readiness query) must
//! present it (`RAY_AUTH_MODE=token`). The token reaches a node in the call and is kept in a 0600
//! file beside the record, which Ray reads (`RAY_AUTH_TOKEN_PATH`): never an argv or a log.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::compile_cache::{use_image_cache, CompileCache};
use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::serving::commands::words;
use crate::serving::record::{ServingDir, ServingFiles, ServingRecord, RAY_TOKEN};
use crate::serving::service_name::ServiceName;
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

/// Ray's GCS port on the head.
pub const RAY_PORT: u16 = 6379;
/// Ray's own logs on a node, newest session (what says why a worker did not join).
pub const RAY_LOGS: &str = "/tmp/ray/session_latest/logs";
/// The variable that turns Ray's token authentication on (Ray 2.52 and later).
pub const AUTH_MODE: (&str, &str) = ("RAY_AUTH_MODE", "token");
/// The variable that carries the token to a process that talks to Ray (the head's `vllm serve`).
pub const AUTH_TOKEN: &str = "RAY_AUTH_TOKEN";

/// Ray's head on the cluster link. No dashboard: it would listen on every address, and nothing
/// here needs it (readiness asks the GCS).
pub fn ray_head(link_ip: Ipv4Addr) -> Vec<String> {
    let mut argv = words(&["ray", "start", "--head", "--port"]);
    argv.push(RAY_PORT.to_string());
    argv.extend(words(&["--node-ip-address"]));
    argv.push(link_ip.to_string());
    argv.extend(ray_resources());
    argv.push("--include-dashboard=false".into());
    argv
}

/// A Ray worker joining `head_ip`, bound to its own link address.
pub fn ray_worker(head_ip: Ipv4Addr, link_ip: Ipv4Addr) -> Vec<String> {
    let mut argv = words(&["ray", "start", "--address"]);
    argv.push(format!("{head_ip}:{RAY_PORT}"));
    argv.extend(words(&["--node-ip-address"]));
    argv.push(link_ip.to_string());
    argv.extend(ray_resources());
    argv
}

/// One GPU per node: Strix Halo has one, and vLLM places one tensor-parallel rank per GPU.
fn ray_resources() -> Vec<String> {
    words(&["--num-gpus", "1", "--disable-usage-stats"])
}

/// `ray stop`: graceful (Ray waits up to its own grace period), or `--force`.
pub fn ray_stop(force: bool) -> Vec<String> {
    let mut argv = words(&["ray", "stop"]);
    if force {
        argv.push("--force".into());
    }
    argv
}

/// Asks the Ray cluster at `$1` (`HEAD:6379`) which nodes it has, as one JSON line:
/// `[{"ip", "alive", "gpus"}]`. `ray status` is no proof (it lists a dead worker as active for a
/// while); the GCS's own node table is. It is read with the GCS client `ray.nodes()` itself uses,
/// without starting a driver (seconds saved on every poll); where a Ray lacks that client, through
/// a driver, as `ray.nodes()`.
const RAY_NODES: &str = r#"import json, sys
try:
    from ray._raylet import GcsClient
    table = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=20).values()
    nodes = [{"ip": n.node_manager_address, "alive": n.state == 0,
              "gpus": dict(n.resources_total).get("GPU", 0)} for n in table]
except (ImportError, AttributeError, TypeError):
    import ray
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    nodes = [{"ip": n["NodeManagerAddress"], "alive": n["Alive"], "gpus": n["Resources"].get("GPU", 0)}
             for n in ray.nodes()]
print(json.dumps(nodes))
"#;

pub fn ray_nodes(head_ip: Ipv4Addr) -> Vec<String> {
    let mut argv = words(&["python3", "-c", RAY_NODES]);
    argv.push(format!("{head_ip}:{RAY_PORT}"));
    argv
}

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
    /// This launch's token: the same on every node.
    pub token: Secret,
    /// vLLM's compile cache for the image, kept or erased first (None: not vLLM's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cache: Option<CompileCache>,
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
    let files = ServingFiles::of(&settings.paths, &ServiceName::parse(&request.record.service)?)?;
    let mut env = request.env.clone();
    if let Some(cache) = request.compile_cache {
        use_image_cache(settings, &toolbox, &mut env, cache).await?;
    }
    files.write(&ServingRecord {
        image: toolbox.image(),
        image_id: Some(toolbox.image_id()),
        ..request.record.clone()
    })?;
    let token_file = files.secret_file(RAY_TOKEN);
    files.write_file(&token_file, request.token.expose().as_bytes())?;
    env.insert(AUTH_MODE.0.into(), AUTH_MODE.1.into());
    env.insert("RAY_AUTH_TOKEN_PATH".into(), token_file.display().to_string());
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
    let report = toolbox.run(&argv, &env).await?;
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

/// The head's view of one Ray node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RayNode {
    pub ip: String,
    pub alive: bool,
    pub gpus: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RayNodes {
    /// The service whose Ray cluster to ask (its record says its toolbox and head).
    pub service: String,
}

pub async fn ray_nodes_of(settings: &Settings, request: &RayNodes) -> Result<Vec<RayNode>> {
    let name = ServiceName::parse(&request.service)?;
    let found = ServingDir::of(&settings.paths)?.find(&name)?.ok_or_else(|| {
        Error::toolbox(
            name.to_string(),
            format!("nothing was launched as {name} on this node: it has no Ray cluster to ask"),
            "`cluster launch` starts one",
        )
    })?;
    let (files, record) = (found.files, found.record);
    let toolbox = RunningToolbox::open(settings, &record.toolbox).await?;
    let mut argv = vec!["timeout".to_string(), RAY_NODES_SECONDS.to_string()];
    argv.extend(ray_nodes(record.head_ip));
    let token = std::fs::read_to_string(files.secret_file(RAY_TOKEN)).unwrap_or_default();
    let env = [(AUTH_MODE.0.to_string(), AUTH_MODE.1.to_string()), (AUTH_TOKEN.to_string(), token)].into();
    let report = toolbox.run_ok("asking Ray for its nodes", &argv, &env).await?;
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
    fn ray_binds_the_link_address_with_one_gpu() {
        let head = ray_head(Ipv4Addr::new(192, 168, 2, 1)).join(" ");
        assert_eq!(
            head,
            "ray start --head --port 6379 --node-ip-address 192.168.2.1 --num-gpus 1 --disable-usage-stats \
             --include-dashboard=false"
        );
        let worker = ray_worker(Ipv4Addr::new(192, 168, 2, 1), Ipv4Addr::new(192, 168, 2, 3)).join(" ");
        assert_eq!(
            worker,
            "ray start --address 192.168.2.1:6379 --node-ip-address 192.168.2.3 --num-gpus 1 --disable-usage-stats"
        );
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
