//! The head's registry: the CNCF distribution registry (`registry:2`, configurable) run by the
//! head's own engine, `--network host` yet bound only to the cluster-link address (the RoCE
//! netdev's, else thunderbolt0's: never the management network), TLS from the cluster CA, its
//! storage in the registry home so that it outlives the container and every refresh. The
//! container is made again only when its configuration changes (another address, port or image).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::ca::{self, ClusterCa};
use super::home::RegistryHome;
use crate::engine::{CreateRequest, Engine, Mount};
use crate::error::{Error, Result};
use crate::host::netdev::THUNDERBOLT;
use crate::host::HostFacts;
use crate::link::read_link;
use crate::registry::RegistryClient;
use crate::reporter::Reporter;
use crate::settings::Settings;
use crate::spec::Transport;

/// The registry container's name on the head.
pub const CONTAINER: &str = "strix-toolbox-registry";
/// On the registry container: "true".
pub const LABEL: &str = "io.github.strix-toolbox.registry";
/// On the registry container: sha256 of what it was made with.
const LABEL_CONFIG: &str = "io.github.strix-toolbox.registry-config";
/// Where `registry:2` reads its configuration (and where `garbage-collect` is pointed).
pub const CONFIG_IN_CONTAINER: &str = "/etc/docker/registry/config.yml";
const CERTS_IN_CONTAINER: &str = "/certs";
const STORAGE_IN_CONTAINER: &str = "/var/lib/registry";
/// How long a started registry may take to answer.
const START_LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadServe {
    /// The port on the link address.
    pub port: u16,
    /// The registry image (`docker.io/library/registry:2`).
    pub image: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadServed {
    /// `IP:PORT` on the cluster link.
    pub address: String,
    /// The netdev that address is on.
    pub netdev: String,
    /// The cluster CA's certificate, for every node to install.
    pub ca_pem: String,
    /// This call started it (false: it ran already).
    pub started: bool,
}

pub async fn spread_serve(settings: &Settings, request: &SpreadServe) -> Result<SpreadServed> {
    let (netdev, ip) = link_address(settings).await?;
    let address = SocketAddrV4::new(ip, request.port);
    let home = RegistryHome::locate()?;
    home.create()?;
    let ca = ca::load_or_make(&home)?;
    let server_pem = server_certificate(&home, &ca, ip)?;
    let config = registry_config(address);
    if std::fs::read_to_string(home.config()).ok().as_deref() != Some(config.as_str()) {
        home.write(&home.config(), config.as_bytes(), 0o644)?;
    }
    let made_with = format!("{:x}", Sha256::digest(format!("{config}\n{}\n{server_pem}", request.image)));
    let connection = settings.connect().await?;
    let started = run(connection.engine(), &home, &request.image, &made_with, settings.reporter.as_ref()).await?;
    let address = address.to_string();
    wait_until_it_answers(connection.engine(), &address, &ca.cert_pem).await?;
    Ok(SpreadServed { address, netdev, ca_pem: ca.cert_pem, started })
}

/// The head's cluster-link address: its RoCE netdev's, else thunderbolt0's, as the kernel has it.
pub async fn link_address(settings: &Settings) -> Result<(String, Ipv4Addr)> {
    let facts = HostFacts::read(&settings.open_host_root()?)?;
    let mut netdevs: Vec<String> = Transport::of(&facts).netdev().map(str::to_string).into_iter().collect();
    if !netdevs.iter().any(|netdev| netdev == THUNDERBOLT) {
        netdevs.push(THUNDERBOLT.to_string());
    }
    for netdev in netdevs {
        if let Some(address) = read_link(&netdev).await?.and_then(|link| link.address) {
            return Ok((netdev, address));
        }
    }
    Err(Error::host(
        "cluster link",
        "the head has no IPv4 address on its RoCE netdev or on thunderbolt0, so it cannot serve the image over the \
         cluster link",
        "give the link an address (`strix-toolbox cluster doctor` checks the link), or refresh with --spread off",
    ))
}

/// The server certificate for `ip` in the home's `certs/` (made again when the address changed);
/// its PEM.
fn server_certificate(home: &RegistryHome, ca: &ClusterCa, ip: Ipv4Addr) -> Result<String> {
    let (cert, key, made_for) =
        (home.certs().join("server.crt"), home.certs().join("server.key"), home.certs().join("ip"));
    let current = std::fs::read_to_string(&made_for).ok().filter(|made| made.trim() == ip.to_string());
    if let (Some(_), Ok(pem), true) = (current, std::fs::read_to_string(&cert), key.exists()) {
        return Ok(pem);
    }
    let server = ca::server_certificate(ca, ip)?;
    // The registry in its container reads the key: it may run as another user (rootless podman).
    home.write(&key, server.key_pem.as_bytes(), 0o644)?;
    home.write(&cert, server.cert_pem.as_bytes(), 0o644)?;
    home.write(&made_for, ip.to_string().as_bytes(), 0o644)?;
    Ok(server.cert_pem)
}

/// distribution's configuration: bound to `address` alone, TLS, deletes allowed (for prune), quiet.
fn registry_config(address: SocketAddrV4) -> String {
    format!(
        "# Written by strix-toolbox: the cluster registry the nodes pull the image from.\nversion: 0.1\nlog:\n  \
         level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: \
         {STORAGE_IN_CONTAINER}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n  tls:\n    certificate: \
         {CERTS_IN_CONTAINER}/server.crt\n    key: {CERTS_IN_CONTAINER}/server.key\n"
    )
}

/// The container as `made_with` says, running; true when this started it.
async fn run(
    engine: &dyn Engine,
    home: &RegistryHome,
    image: &str,
    made_with: &str,
    reporter: &dyn Reporter,
) -> Result<bool> {
    match engine.container_inspect(CONTAINER).await? {
        Some(container) if container.labels.get(LABEL_CONFIG).map(String::as_str) == Some(made_with) => {
            if container.running {
                return Ok(false);
            }
        }
        Some(_) => {
            engine.container_remove(CONTAINER, true).await?;
            create(engine, home, image, made_with, reporter).await?;
        }
        None => create(engine, home, image, made_with, reporter).await?,
    }
    engine.container_start(CONTAINER).await?;
    Ok(true)
}

async fn create(
    engine: &dyn Engine,
    home: &RegistryHome,
    image: &str,
    made_with: &str,
    reporter: &dyn Reporter,
) -> Result<()> {
    if engine.image_inspect(image).await?.is_none() {
        engine.pull(image, reporter).await?;
    }
    let mount =
        |source: std::path::PathBuf, target: &str, read_only| Mount { source, target: target.into(), read_only };
    let request = CreateRequest {
        name: CONTAINER.to_string(),
        image: image.to_string(),
        host_network: true,
        mounts: vec![
            mount(home.config(), CONFIG_IN_CONTAINER, true),
            mount(home.certs(), CERTS_IN_CONTAINER, true),
            mount(home.storage(), STORAGE_IN_CONTAINER, false),
        ],
        // `registry:2`'s entrypoint runs `registry serve FILE`; an entrypoint of `/bin/registry` runs the same.
        command: vec!["serve".into(), CONFIG_IN_CONTAINER.into()],
        labels: [(LABEL.to_string(), "true".to_string()), (LABEL_CONFIG.to_string(), made_with.to_string())].into(),
        // SELinux hosts (Fedora) would keep it from reading the home's files.
        security_opt: vec!["label=disable".into()],
        ..Default::default()
    };
    engine.container_create(&request).await.map(drop)
}

/// Until the registry answers over TLS checked against the cluster CA (bounded).
async fn wait_until_it_answers(engine: &dyn Engine, address: &str, ca_pem: &str) -> Result<()> {
    let client = RegistryClient::cluster(address, ca_pem)?;
    let deadline = Instant::now() + START_LIMIT;
    loop {
        let answer = client.ping().await;
        let Err(error) = answer else { return Ok(()) };
        let running = engine.container_inspect(CONTAINER).await?.is_some_and(|c| c.running);
        if !running || Instant::now() >= deadline {
            let program = engine.kind().program();
            return Err(Error::Engine {
                engine: program,
                action: format!("serve the cluster registry at {address}"),
                message: format!(
                    "{} {}: {}",
                    CONTAINER,
                    if running {
                        format!("does not answer after {} s", START_LIMIT.as_secs())
                    } else {
                        "stopped".into()
                    },
                    error.report().message
                ),
                fix: Some(format!(
                    "`{program} logs {CONTAINER}` on the head says why (a port in use: --spread-port); or refresh with \
                     --spread off"
                )),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_listens_on_the_link_address_alone_with_tls_and_deletes() {
        let config = registry_config(SocketAddrV4::new(Ipv4Addr::new(192, 168, 100, 1), 5443));
        assert!(config.contains("\n  addr: 192.168.100.1:5443\n"), "{config}");
        assert!(config.contains("certificate: /certs/server.crt") && config.contains("key: /certs/server.key"));
        assert!(config.contains("delete:\n    enabled: true"), "{config}");
    }
}
