//! The head's registry: the CNCF distribution registry (`registry:2`, configurable) run by the
//! head's own engine, `--network host`, its storage in the registry home so that it outlives the
//! containers and every refresh. The registry cannot tell one client certificate from another, so
//! it runs twice over the one storage:
//! - [`CONTAINER`], for the nodes: bound to the cluster-link address alone ([`cluster_link`]:
//!   never the management network), read-only (`maintenance.readonly`: a push or a delete is
//!   refused with 405), its storage mounted read-only, and mutual TLS: a client without a
//!   certificate the cluster CA signed is refused in the handshake.
//! - [`WRITER`], for the head's copies and prunes: bound to 127.0.0.1 on the same port, mutual
//!   TLS that accepts one client certificate, the head's own (its `clientcas` holds that
//!   certificate alone, so no node's certificate verifies there).
//!
//! Each container is made again only when what it was made with changes (another address, port,
//! image or certificate).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::container_engine::{ContainerEngine, CreateRequest, Mount};
use crate::error::{Error, Result};
use crate::link::address::cluster_link;
use crate::link::ca;
use crate::link::home::RegistryHome;
use crate::link::tls::TlsIdentity;
use crate::registry::RegistryClient;
use crate::reporter::Reporter;
use crate::settings::Settings;

/// The container of the registry the nodes pull from, on the link.
pub const CONTAINER: &str = "strix-toolbox-registry";
/// The container of the head's writer, on 127.0.0.1.
pub const WRITER: &str = "strix-toolbox-registry-writer";
/// On both containers: "true".
pub const LABEL: &str = "io.github.strix-toolbox.registry";
/// On each container: sha256 of what it was made with.
const LABEL_CONFIG: &str = "io.github.strix-toolbox.registry-config";
/// Where `registry:2` reads its configuration (and where `garbage-collect` is pointed).
pub const CONFIG_IN_CONTAINER: &str = "/etc/docker/registry/config.yml";
const SERVER_CERT_IN_CONTAINER: &str = "/certs/server.crt";
const SERVER_KEY_IN_CONTAINER: &str = "/certs/server.key";
/// The certificates its clients' must chain to.
const CLIENTS_IN_CONTAINER: &str = "/certs/clients.crt";
const STORAGE_IN_CONTAINER: &str = "/var/lib/registry";
/// How long a started registry may take to answer.
const START_LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadServe {
    /// The port on the link address (and the writer's on 127.0.0.1).
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

/// One of the registry's two containers.
struct Listener {
    container: &'static str,
    address: SocketAddrV4,
    /// Its configuration, in the home.
    config: PathBuf,
    /// What `clientcas` holds: the cluster CA (any node), or the head's certificate alone.
    clients: PathBuf,
    writes: bool,
}

impl Listener {
    fn both(home: &RegistryHome, link: SocketAddrV4) -> [Listener; 2] {
        [
            Listener {
                container: CONTAINER,
                address: link,
                config: home.config(),
                clients: home.ca_cert(),
                writes: false,
            },
            Listener {
                container: WRITER,
                address: SocketAddrV4::new(Ipv4Addr::LOCALHOST, link.port()),
                config: home.writer_config(),
                clients: home.head_cert(),
                writes: true,
            },
        ]
    }

    /// distribution's configuration: bound to its address alone, mutual TLS, quiet; the nodes'
    /// read-only (no upload purging either: it writes), the writer's with deletes (for prune).
    fn config(&self) -> String {
        let storage = if self.writes {
            "  delete:\n    enabled: true\n".to_string()
        } else {
            "  maintenance:\n    readonly:\n      enabled: true\n    uploadpurging:\n      enabled: false\n".to_string()
        };
        format!(
            "# Written by strix-toolbox: {}.\nversion: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: \
             true\nstorage:\n  filesystem:\n    rootdirectory: {STORAGE_IN_CONTAINER}\n{storage}http:\n  addr: {}\n  \
             tls:\n    certificate: {SERVER_CERT_IN_CONTAINER}\n    key: {SERVER_KEY_IN_CONTAINER}\n    clientcas:\n      \
             - {CLIENTS_IN_CONTAINER}\n",
            if self.writes {
                "the head's writer into the cluster registry, for the head alone"
            } else {
                "the cluster registry the nodes pull the image from, read-only"
            },
            self.address
        )
    }
}

pub async fn spread_serve(settings: &Settings, request: &SpreadServe) -> Result<SpreadServed> {
    let link = cluster_link(settings).await?;
    let ip = link.address()?;
    let netdev = link.transport.netdev().unwrap_or_default().to_string();
    let address = SocketAddrV4::new(ip, request.port);
    let home = RegistryHome::locate(&settings.paths)?;
    home.create()?;
    let ca = ca::load_or_make(&home)?;
    let server = ca::server_identity(&home, &ca, ip)?;
    let head = ca::head_identity(&home, &ca)?;
    let connection = settings.connect().await?;
    let engine = connection.engine();
    let mut started = false;
    for listener in Listener::both(&home, address) {
        let config = listener.config();
        if std::fs::read_to_string(&listener.config).ok().as_deref() != Some(config.as_str()) {
            home.write(&listener.config, config.as_bytes(), 0o644)?;
        }
        let clients =
            std::fs::read_to_string(&listener.clients).map_err(|e| Error::read(listener.clients.clone(), e))?;
        let made_with =
            format!("{:x}", Sha256::digest(format!("{config}\n{}\n{}\n{clients}", request.image, server.cert_pem)));
        started |= run(engine, &home, &listener, &request.image, &made_with, settings.reporter.as_ref()).await?;
    }
    for listener in Listener::both(&home, address) {
        wait_until_it_answers(engine, listener.container, &listener.address.to_string(), &ca.cert_pem, &head).await?;
    }
    Ok(SpreadServed { address: address.to_string(), netdev, ca_pem: ca.cert_pem, started })
}

/// The head's client of its writer (`registry` is the registry's `IP:PORT` on the link): to copy
/// into it and prune it.
pub fn writer_client(home: &RegistryHome, registry: &str) -> Result<RegistryClient> {
    let link: SocketAddrV4 = registry
        .parse()
        .map_err(|_| Error::Internal(format!("{registry:?} is not the IP:PORT of the cluster registry")))?;
    let ca = ca::load_or_make(home)?;
    let head = ca::head_identity(home, &ca)?;
    RegistryClient::cluster(&SocketAddrV4::new(Ipv4Addr::LOCALHOST, link.port()).to_string(), &ca.cert_pem, Some(&head))
}

/// The listener's container as `made_with` says, running; true when this started it.
async fn run(
    engine: &dyn ContainerEngine,
    home: &RegistryHome,
    listener: &Listener,
    image: &str,
    made_with: &str,
    reporter: &dyn Reporter,
) -> Result<bool> {
    match engine.container_inspect(listener.container).await? {
        Some(container) if container.labels.get(LABEL_CONFIG).map(String::as_str) == Some(made_with) => {
            if container.running {
                return Ok(false);
            }
        }
        Some(_) => {
            engine.container_remove(listener.container, true).await?;
            create(engine, home, listener, image, made_with, reporter).await?;
        }
        None => create(engine, home, listener, image, made_with, reporter).await?,
    }
    engine.container_start(listener.container).await?;
    Ok(true)
}

async fn create(
    engine: &dyn ContainerEngine,
    home: &RegistryHome,
    listener: &Listener,
    image: &str,
    made_with: &str,
    reporter: &dyn Reporter,
) -> Result<()> {
    if engine.image_inspect(image).await?.is_none() {
        engine.pull(image, reporter).await?;
    }
    let mount = |source: PathBuf, target: &str, read_only| Mount { source, target: target.into(), read_only };
    // Files, not the certs directory: neither container sees the head's client key.
    let request = CreateRequest {
        name: listener.container.to_string(),
        image: image.to_string(),
        host_network: true,
        mounts: vec![
            mount(listener.config.clone(), CONFIG_IN_CONTAINER, true),
            mount(home.server_cert(), SERVER_CERT_IN_CONTAINER, true),
            mount(home.server_key(), SERVER_KEY_IN_CONTAINER, true),
            mount(listener.clients.clone(), CLIENTS_IN_CONTAINER, true),
            mount(home.storage(), STORAGE_IN_CONTAINER, !listener.writes),
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

/// Until `container`'s registry answers at `address` over mutual TLS, checked against the
/// cluster CA, the head's certificate presented (bounded).
async fn wait_until_it_answers(
    engine: &dyn ContainerEngine,
    container: &str,
    address: &str,
    ca_pem: &str,
    head: &TlsIdentity,
) -> Result<()> {
    let client = RegistryClient::cluster(address, ca_pem, Some(head))?;
    let deadline = Instant::now() + START_LIMIT;
    loop {
        let answer = client.ping().await;
        let Err(error) = answer else { return Ok(()) };
        let running = engine.container_inspect(container).await?.is_some_and(|c| c.running);
        if !running || Instant::now() >= deadline {
            let program = engine.kind().program();
            return Err(Error::ContainerEngine {
                engine: program,
                action: format!("serve the cluster registry at {address}"),
                message: format!(
                    "{container} {}: {}",
                    if running {
                        format!("does not answer after {} s", START_LIMIT.as_secs())
                    } else {
                        "stopped".into()
                    },
                    error.report().message
                ),
                fix: Some(format!(
                    "`{program} logs {container}` on the head says why (a port in use: --spread-port); or refresh \
                     with --spread off"
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
    fn the_nodes_read_on_the_link_and_the_head_alone_writes_on_loopback() {
        let home = RegistryHome { dir: "/home/alice/.local/share/strix-toolbox/registry".into() };
        let [nodes, writer] = Listener::both(&home, SocketAddrV4::new(Ipv4Addr::new(192, 168, 100, 1), 5443));
        let config = nodes.config();
        assert!(config.contains("\n  addr: 192.168.100.1:5443\n"), "{config}");
        assert!(config.contains("readonly:\n      enabled: true"), "{config}");
        assert!(!config.contains("delete:"), "{config}");
        assert_eq!(nodes.clients, home.ca_cert(), "any node the cluster CA signed");
        let config = writer.config();
        assert!(config.contains("\n  addr: 127.0.0.1:5443\n"), "{config}");
        assert!(config.contains("delete:\n    enabled: true") && !config.contains("readonly"), "{config}");
        assert_eq!(writer.clients, home.head_cert(), "the head's certificate alone");
        for config in [nodes.config(), writer.config()] {
            assert!(config.contains("certificate: /certs/server.crt") && config.contains("key: /certs/server.key"));
            assert!(config.contains("clientcas:\n      - /certs/clients.crt\n"), "{config}");
        }
    }
}
