//! What the head asks a node: one typed value per question, each with the report type that
//! answers it. The head sends a [`NodeCall`] to the node's `strix-toolbox agent` and reads back
//! exactly that report: no command line is rebuilt by hand, and a field added to a request is
//! carried as soon as it is declared.

use std::net::Ipv4Addr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::bench::gate::GateRun;
use crate::bench::load::LevelResult;
use crate::bench::node::{BenchLevel, GateAsk};
use crate::link::address::{ClusterLink, PingReport};
use crate::model::download::{ModelDownload, ModelDownloaded};
use crate::model::fetch::{ModelFetch, ModelFetched};
use crate::model::list::{ModelCacheReport, ModelList};
use crate::model::serve::{ModelServe, ModelServeStop, ModelServeStopped, ModelServing};
use crate::model::shape::ask::ShapeAsk;
use crate::model::shape::source::ShapeRead;
use crate::node::router::{RouterExposition, RouterLook, RouterScrape, RouterState, RouterUpdate};
use crate::node::router_keys::{KeysReport, RouterKeys};
use crate::node::telemetry::{Telemetry, TelemetryReport};
use crate::ops::detect::DetectReport;
use crate::ops::doctor::DoctorReport;
use crate::ops::phase::{PhaseReport, PhaseRequest};
use crate::ops::refresh::{RefreshReport, RefreshRequest};
use crate::ops::resolve::ResolveReport;
use crate::ops::status::StatusReport;
use crate::serving::logs::{LogTail, ServeLogs};
use crate::serving::probe::{ServeProbe, ServeProbeReport};
use crate::serving::process::{ProcessStart, ProcessStarted};
use crate::serving::ray::{RayNode, RayNodes, RayStart, RayStarted};
use crate::serving::reach::{Reach, Reached};
use crate::serving::state::{ServeCheck, ServeCheckReport};
use crate::serving::stop::{ServeStop, ServeStopped};
use crate::spread::prune::{SpreadPrune, SpreadPruned};
use crate::spread::pull::ImageDigests;
use crate::spread::registry::{SpreadServe, SpreadServed};
use crate::spread::relay_serve::{SpreadRelay, SpreadRelayEnd, SpreadRelayEnded, SpreadRelaying};
use crate::spread::resolve::{SpreadResolve, UpstreamDigest};
use crate::spread::status::{RegistryStatus, SpreadStatus};
use crate::spread::trust::{SpreadSign, SpreadSigned, SpreadTrust, SpreadTrusted};
use crate::toolbox::running::ExecReport;
use crate::verify::VerifyReport;

/// A question with its answer's type: `node.call(Resolve { .. })` returns a `ResolveReport`.
pub trait Call: Into<NodeCall> {
    type Reply: Serialize + DeserializeOwned + Send + 'static;
}

/// Declares every call once: its variant in [`NodeCall`], its request type and its reply type.
macro_rules! node_calls {
    ($($(#[$doc:meta])* $variant:ident($request:ty) -> $reply:ty;)*) => {
        /// Everything a head can ask a node, as it travels (`{"call": "refresh", ...}`).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "call", rename_all = "kebab-case")]
        pub enum NodeCall {
            $($(#[$doc])* $variant($request),)*
        }

        $(
            impl Call for $request {
                type Reply = $reply;
            }

            impl From<$request> for NodeCall {
                fn from(request: $request) -> NodeCall {
                    NodeCall::$variant(request)
                }
            }
        )*
    };
}

node_calls! {
    /// Pull an image and name it by its registry digest (the head, once per cluster refresh).
    Resolve(Resolve) -> ResolveReport;
    /// `refresh`, staged (`stage_only`) or planned (`dry_run`) for the cluster's phases.
    Refresh(RefreshRequest) -> RefreshReport;
    /// One phase after staging: swap, finish, abort or undo.
    Phase(PhaseRequest) -> PhaseReport;
    /// The node's own `doctor`.
    Doctor(Doctor) -> DoctorReport;
    /// The node's own `detect`.
    Detect(Detect) -> DetectReport;
    /// The node's own `status`.
    Status(StatusCall) -> StatusReport;
    /// `verify` of one toolbox.
    Verify(Verify) -> VerifyReport;
    /// A netdev as the node's kernel has it: address, prefix, MTU.
    Link(Link) -> Option<ClusterLink>;
    /// A bounded don't-fragment ping from the node out of a netdev.
    Ping(Ping) -> PingReport;
    /// A command inside one of the node's toolboxes, its output captured.
    Exec(Exec) -> ExecReport;
    /// What the node serves with (toolbox, image, link address) and what it serves now.
    ServeCheck(ServeCheck) -> ServeCheckReport;
    /// Ray in the toolbox: the head, or a worker joining it.
    RayStart(RayStart) -> RayStarted;
    /// The Ray cluster's node table, asked on the head.
    RayNodes(RayNodes) -> Vec<RayNode>;
    /// One process of a launch (`vllm serve`, `llama-server`, `rpc-server`), detached in the toolbox.
    ProcessStart(ProcessStart) -> ProcessStarted;
    /// Whether addresses answer a TCP connection from the node (workers' servers, from the head).
    Reach(Reach) -> Vec<Reached>;
    /// `/health` and `/v1/models` at the endpoint, asked on the head.
    ServeProbe(ServeProbe) -> ServeProbeReport;
    /// Stop what a launch started on the node.
    ServeStop(ServeStop) -> ServeStopped;
    /// vLLM's and Ray's logs on the node.
    ServeLogs(ServeLogs) -> Vec<LogTail>;
    /// A model snapshot from the Hub into the node's cache, through huggingface_hub in its
    /// toolbox, every blob then verified (the head, once per pull).
    ModelDownload(ModelDownload) -> ModelDownloaded;
    /// What the node's Hugging Face cache holds.
    ModelList(ModelList) -> ModelCacheReport;
    /// Serve a verified snapshot's blobs on the cluster link (the head, for the pull's length).
    ModelServe(ModelServe) -> ModelServing;
    /// Stop that server.
    ModelServeStop(ModelServeStop) -> ModelServeStopped;
    /// Receive a snapshot from the head's blob server: only the blobs the node lacks.
    ModelFetch(ModelFetch) -> ModelFetched;
    /// A model's shape from its headers alone (config.json, safetensors or GGUF headers), read
    /// locally or from the Hub by range reads (the head, for a plan).
    ShapeRead(ShapeAsk) -> ShapeRead;
    /// The digest a reference names upstream now, from the registry API (no pull).
    SpreadResolve(SpreadResolve) -> UpstreamDigest;
    /// The digests the node's images of a repository carry.
    ImageDigests(ImageDigests) -> Vec<String>;
    /// The head's registry on the cluster link, started or found running.
    SpreadServe(SpreadServe) -> SpreadServed;
    /// The image copied from upstream into the head's registry, byte for byte, and relayed to the
    /// nodes on the cluster link meanwhile (the head, returning at once).
    SpreadRelay(SpreadRelay) -> SpreadRelaying;
    /// The copy waited for, the relay stopped.
    SpreadRelayEnd(SpreadRelayEnd) -> SpreadRelayEnded;
    /// The cluster CA and the node's client certificate installed where its engines look for
    /// them (the node's signing request back when it has no valid certificate).
    SpreadTrust(SpreadTrust) -> SpreadTrusted;
    /// The nodes' signing requests signed with the cluster CA (the head, where its key is).
    SpreadSign(SpreadSign) -> SpreadSigned;
    /// The head's registry pruned to what it serves.
    SpreadPrune(SpreadPrune) -> SpreadPruned;
    /// The head's registry: its size, what it serves, whether it runs.
    SpreadStatus(SpreadStatus) -> Option<RegistryStatus>;
    /// One concurrency level of a bench against the endpoint, from the node that reaches it.
    BenchLevel(BenchLevel) -> LevelResult;
    /// The gate's prompt set asked of the endpoint, token by token.
    GateAsk(GateAsk) -> GateRun;
    /// What the cluster's router serves (asked on the cluster's head).
    RouterLook(RouterLook) -> RouterState;
    /// A service's route added or registered to start on demand (the router started when none
    /// runs), or routes and registrations removed.
    RouterUpdate(RouterUpdate) -> RouterState;
    /// The router's keys per user: listed, one added (by its digest) or removed.
    RouterKeys(RouterKeys) -> KeysReport;
    /// The router's own metrics, scraped on its node (the cluster's head).
    RouterScrape(RouterScrape) -> RouterExposition;
    /// The node's boot id, its GPU and RDMA telemetry from its host tree, and the engines it
    /// serves scraped (and probed, for `cluster watch`) from the node (`cluster metrics`, `cluster
    /// top`, each look of `cluster watch`).
    Telemetry(Telemetry) -> TelemetryReport;
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolve {
    /// The reference to pull and resolve (`repo:channel`).
    pub image: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doctor {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detect {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCall {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verify {
    /// The toolbox to verify.
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub netdev: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// The netdev the ping leaves by.
    pub netdev: String,
    pub address: Ipv4Addr,
    /// ICMP payload bytes.
    pub size: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    /// The toolbox to run in (started first when it is stopped).
    pub toolbox: String,
    pub argv: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::node::EndpointAccess;
    use crate::link::io_failure::{IoFailure, IoKind, IoStep};
    use crate::manager::ManagerChoice;
    use crate::model::blob::BlobName;
    use crate::model::blob_fetch::BlobSource;
    use crate::model::identity::ModelIdentity;
    use crate::model::manifest::{SnapshotFile, SnapshotManifest};
    use crate::model::repo_id::RepoId;
    use crate::model::revision::{Commit, Revision};
    use crate::ops::phase::Phase;
    use crate::ops::refresh::ImageSource;
    use crate::secret::Secret;
    use crate::serving::engine::Backend;
    use crate::serving::ray::RayRole;
    use crate::serving::record::{Role, ServedProcess, ServingRecord};
    use crate::serving::stop::StopPart;

    fn record() -> ServingRecord {
        let mut record = ServingRecord::new(
            "model",
            "vllm",
            "org/model",
            "model",
            crate::serving::vllm::VLLM,
            Backend::Ray,
            Role::Worker,
            3,
            8000,
            Ipv4Addr::new(192, 168, 2, 2),
            Ipv4Addr::new(192, 168, 2, 1),
            "http://192.168.2.1:8000/v1",
        );
        record.tp = Some(3);
        record.on = vec!["node1".into(), "node2".into(), "node3".into()];
        record.router_listen = Some("0.0.0.0:8000".parse().unwrap());
        record.memory_bytes = Some(40 << 30);
        record.image = "sha256:ab".into();
        record.identity =
            Some(crate::model::identity::ModelIdentity::Gguf { name: "m.gguf".into(), sha256: "ab".repeat(32) });
        record.processes.push(ServedProcess {
            name: "rpc-server".into(),
            pid: 7,
            log: "/h/llama.rpc-server.log".into(),
            listens: Some("192.168.2.2:50052".parse().unwrap()),
        });
        record
    }

    fn manifest() -> SnapshotManifest {
        SnapshotManifest {
            repo: RepoId::parse("acme/tiny").unwrap(),
            commit: Commit::parse("c12a728b0b9a3d8c0a9e6a1d5b1f4e2c3d4e5f60").unwrap(),
            files: vec![SnapshotFile {
                path: "sub/notes.txt".into(),
                blob: BlobName::parse("ce013625030ba8dba906f756967f9e9ca394464a").unwrap(),
                size: 6,
            }],
        }
    }

    /// One of each call, as a head sends it.
    fn one_of_each() -> Vec<NodeCall> {
        vec![
            Resolve { image: "docker.io/kyuz0/vllm-therock-gfx1151:latest".into() }.into(),
            RefreshRequest {
                name: "vllm".into(),
                image_ref: "docker.io/kyuz0/vllm-therock-gfx1151@sha256:ab".into(),
                source: ImageSource::Pull,
                manager: ManagerChoice::Native,
                keep: 2,
                force: true,
                dry_run: false,
                env: vec!["A=it's \"quoted\" $HOME".into()],
                stage_only: true,
                verify: false,
                lock_wait_seconds: 0,
                spread: Some(crate::spread::pull::SpreadSource {
                    registry: "192.168.100.1:5443".into(),
                    ca_pem: "-----BEGIN CERTIFICATE-----\n".into(),
                }),
                serving: crate::serving::llama::LLAMA_CPP,
            }
            .into(),
            PhaseRequest { phase: Phase::Undo, name: "vllm".into(), keep: 3, image_id: Some("sha256:01".into()) }
                .into(),
            Doctor {}.into(),
            Detect {}.into(),
            StatusCall {}.into(),
            Verify { name: "vllm-dev".into() }.into(),
            Link { netdev: "enp194s0np0".into() }.into(),
            Ping { netdev: "thunderbolt0".into(), address: Ipv4Addr::new(192, 168, 2, 2), size: 8972 }.into(),
            Exec { toolbox: "vllm".into(), argv: vec!["sh".into(), "-c".into(), "echo 'a b'; exit 3".into()] }.into(),
            ServeCheck {
                toolbox: Some("llama".into()),
                start: true,
                programs: vec!["ggml-rpc-server".into(), "rpc-server".into()],
                paths: vec!["/m/x-00001-of-00002.gguf".into()],
                flags: Some(crate::serving::state::FlagQuestion {
                    help: vec!["vllm".into(), "serve".into(), "--help=all".into()],
                    flags: vec!["--nnodes".into()],
                }),
                sha256_of: Some("/m/x-00001-of-00002.gguf".into()),
                free_ports: vec![8001, 50052],
                keep: vec![8000],
            }
            .into(),
            RayStart {
                toolbox: "vllm".into(),
                role: RayRole::Worker { head_ip: Ipv4Addr::new(192, 168, 2, 1) },
                env: [("VLLM_HOST_IP".to_string(), "192.168.2.2".to_string())].into_iter().collect(),
                token: Secret::new("ray-token".into()),
                compile_cache: Some(crate::serving::compile_cache::CompileCache::Erase),
                record: record(),
            }
            .into(),
            RayNodes { service: "Qwen/Qwen3-32B".into() }.into(),
            ProcessStart {
                toolbox: "vllm".into(),
                name: "vllm".into(),
                argv: vec!["vllm".into(), "serve".into(), "org/model".into()],
                env: Default::default(),
                secrets: [("HF_TOKEN".to_string(), Secret::new("hf_secret".into()))].into(),
                listens: Some("192.168.2.2:50052".parse().unwrap()),
                compile_cache: None,
                record: record(),
            }
            .into(),
            Reach { addresses: vec!["192.168.2.2:50052".parse().unwrap()] }.into(),
            ServeProbe {
                service: "model".into(),
                server: "vllm".into(),
                address: "192.168.2.1:8000".parse().unwrap(),
                api_key: Some(Secret::new("key".into())),
                look_inside: true,
            }
            .into(),
            ServeStop { service: "model".into(), part: StopPart::Server, at_once: true }.into(),
            ServeLogs {
                service: Some("model".into()),
                lines: 20,
                seen: vec![crate::serving::logs::LogTail {
                    service: "model".into(),
                    file: "vllm".into(),
                    lines: vec![],
                    end: 7,
                }],
            }
            .into(),
            ModelDownload {
                toolbox: "vllm".into(),
                repo: RepoId::parse("acme/tiny").unwrap(),
                revision: Some(Revision::parse("refs/pr/1").unwrap()),
                hub_env: [("HF_ENDPOINT".to_string(), "http://127.0.0.1:8080".to_string())].into_iter().collect(),
                hf_token: Some(Secret::new("hf_secret".into())),
                gguf: Some(crate::model::gguf_pick::GgufPick::Quant("Q4_K_M".into())),
            }
            .into(),
            ModelList { repo: None, verify: true }.into(),
            ModelServe { repo: manifest().repo, commit: manifest().commit, access: Secret::new("k".into()) }.into(),
            ModelServeStop { id: 3 }.into(),
            ModelFetch {
                manifest: manifest(),
                revision: Revision::main(),
                source: BlobSource {
                    address: "192.168.2.1:40123".parse().unwrap(),
                    ca_pem: "-----BEGIN CERTIFICATE-----".into(),
                    access: Secret::new("k".into()),
                },
            }
            .into(),
            SpreadResolve { image: "docker.io/kyuz0/vllm-therock-gfx1151:latest".into() }.into(),
            ImageDigests { repository: "docker.io/kyuz0/vllm-therock-gfx1151".into() }.into(),
            SpreadServe { port: 5443, image: "docker.io/library/registry:2".into() }.into(),
            SpreadRelay {
                image: format!("docker.io/kyuz0/vllm@sha256:{}", "a".repeat(64)),
                registry: "192.168.100.1:5443".into(),
                port: 5444,
                toolbox: "vllm".into(),
            }
            .into(),
            SpreadRelayEnd { id: 2, cancel: false }.into(),
            SpreadTrust {
                registry: "192.168.100.1:5443".into(),
                ca_pem: "-----BEGIN CERTIFICATE-----".into(),
                certificate: Some("-----BEGIN CERTIFICATE-----".into()),
            }
            .into(),
            SpreadPrune {
                registry: "192.168.100.1:5443".into(),
                toolbox: "vllm".into(),
                image: format!("docker.io/kyuz0/vllm@sha256:{}", "a".repeat(64)),
                pin: Some("20261101-100000".into()),
                keep: 2,
            }
            .into(),
            SpreadStatus {}.into(),
            BenchLevel {
                endpoint: EndpointAccess {
                    url: "http://192.168.2.1:8000/v1".into(),
                    api_key: Some(Secret::new("sk-'quoted' $KEY".into())),
                },
                engine: crate::serving::llama::LLAMA_CPP,
                served_model: "tiny.gguf".into(),
                input_len: 128,
                output_len: 64,
                concurrency: 4,
                requests: 16,
                first_index: 17,
                warm_up: false,
                prompt_form: crate::bench::prompt::PromptForm::Text,
            }
            .into(),
            GateAsk {
                endpoint: EndpointAccess { url: "http://127.0.0.1:8080/v1".into(), api_key: None },
                engine: crate::serving::vllm::VLLM,
                served_model: "org/model".into(),
                model: ModelIdentity::Hub { repo: "org/model".into(), commit: "c12a728b".into() },
                image: "docker.io/kyuz0/vllm@sha256:ab".into(),
                layout: "one node alone".into(),
            }
            .into(),
            SpreadSign {
                requests: vec![crate::spread::trust::SigningRequest {
                    node: "node2".into(),
                    csr_pem: "-----BEGIN CERTIFICATE REQUEST-----".into(),
                }],
            }
            .into(),
            RouterLook { api_key: Some(Secret::new("sk-'quoted'".into())), health: true }.into(),
            RouterUpdate {
                add: Some(crate::router::routes::Route {
                    name: "coder".into(),
                    upstream: "192.168.2.3:8001".parse().unwrap(),
                    engine: "llama.cpp".into(),
                    model: "/models/coder.gguf".into(),
                    nodes: vec!["node3".into()],
                    since: "2026-11-24T10:00:00Z".into(),
                }),
                register: Some(crate::router::routes::Registered {
                    name: "chat".into(),
                    engine: "llama.cpp".into(),
                    model: "/models/chat.gguf".into(),
                    nodes: vec!["node1".into()],
                    room: vec![Some(crate::serving::room::Room { planned: 1 << 30, usable: 32 << 30 })],
                    idle_seconds: Some(600),
                    wait_seconds: 300,
                    since: "2026-11-24T10:00:00Z".into(),
                    launch: serde_json::json!({"model": "/models/chat.gguf"}),
                }),
                remove: vec!["old".into()],
                remove_all: false,
                listen: Some("0.0.0.0:8000".parse().unwrap()),
                api_key: Some(Secret::new("sk-endpoint".into())),
            }
            .into(),
            RouterKeys {
                add: Some(crate::router::keys::KeyEntry {
                    name: "alice".into(),
                    sha256: "ab".repeat(32),
                    models: vec!["chat".into()],
                    rpm: Some(60),
                    tpm: Some(100_000),
                    created: "2026-11-28T10:00:00Z".into(),
                }),
                remove: Some("bob".into()),
            }
            .into(),
            RouterScrape {}.into(),
            ShapeAsk {
                source: crate::model::source::ModelSource::HubGguf {
                    repo: RepoId::parse("unsloth/Qwen3-235B-A22B-GGUF").unwrap(),
                    pick: crate::model::gguf_pick::GgufPick::Quant("Q4_K_M".into()),
                },
                format: crate::model::source::ModelFormat::Gguf,
                revision: Some("main".into()),
                toolbox: "llama".into(),
                start_toolbox: true,
                hub_env: [("HF_ENDPOINT".to_string(), "http://127.0.0.1:8080".to_string())].into_iter().collect(),
                hf_token: Some(Secret::new("hf_secret".into())),
            }
            .into(),
            Telemetry {
                engines: true,
                api_key: Some(Secret::new("sk-engine".into())),
                limit_ms: 5000,
                probe: vec!["tiny".into()],
            }
            .into(),
        ]
    }

    /// Exhaustive: a new call does not compile until it has an example above.
    fn index(call: &NodeCall) -> usize {
        match call {
            NodeCall::Resolve(_) => 0,
            NodeCall::Refresh(_) => 1,
            NodeCall::Phase(_) => 2,
            NodeCall::Doctor(_) => 3,
            NodeCall::Detect(_) => 4,
            NodeCall::Status(_) => 5,
            NodeCall::Verify(_) => 6,
            NodeCall::Link(_) => 7,
            NodeCall::Ping(_) => 8,
            NodeCall::Exec(_) => 9,
            NodeCall::ServeCheck(_) => 10,
            NodeCall::RayStart(_) => 11,
            NodeCall::RayNodes(_) => 12,
            NodeCall::ProcessStart(_) => 13,
            NodeCall::Reach(_) => 14,
            NodeCall::ServeProbe(_) => 15,
            NodeCall::ServeStop(_) => 16,
            NodeCall::ServeLogs(_) => 17,
            NodeCall::ModelDownload(_) => 18,
            NodeCall::ModelList(_) => 19,
            NodeCall::ModelServe(_) => 20,
            NodeCall::ModelServeStop(_) => 21,
            NodeCall::ModelFetch(_) => 22,
            NodeCall::SpreadResolve(_) => 23,
            NodeCall::ImageDigests(_) => 24,
            NodeCall::SpreadServe(_) => 25,
            NodeCall::SpreadRelay(_) => 26,
            NodeCall::SpreadRelayEnd(_) => 27,
            NodeCall::SpreadTrust(_) => 28,
            NodeCall::SpreadPrune(_) => 29,
            NodeCall::SpreadStatus(_) => 30,
            NodeCall::BenchLevel(_) => 31,
            NodeCall::GateAsk(_) => 32,
            NodeCall::SpreadSign(_) => 33,
            NodeCall::RouterLook(_) => 34,
            NodeCall::RouterUpdate(_) => 35,
            NodeCall::RouterKeys(_) => 36,
            NodeCall::RouterScrape(_) => 37,
            NodeCall::ShapeRead(_) => 38,
            NodeCall::Telemetry(_) => 39,
        }
    }

    #[test]
    fn every_call_round_trips_through_its_wire_form() {
        let calls = one_of_each();
        let covered: Vec<usize> = calls.iter().map(index).collect();
        assert_eq!(covered, (0..calls.len()).collect::<Vec<_>>(), "one example per call, in order");
        for call in calls {
            let text = serde_json::to_string(&call).unwrap();
            assert!(!text.contains('\n'), "one line: {text}");
            let back: NodeCall = serde_json::from_str(&text).unwrap();
            assert_eq!(back, call, "{text}");
        }
    }

    #[test]
    fn calls_are_named_on_the_wire() {
        let text = serde_json::to_string(&NodeCall::from(Verify { name: "vllm".into() })).unwrap();
        assert_eq!(text, r#"{"call":"verify","name":"vllm"}"#);
        let unknown = serde_json::from_str::<NodeCall>(r#"{"call":"format-disk"}"#).unwrap_err();
        assert!(unknown.to_string().contains("unknown variant"), "{unknown}");
    }

    #[test]
    fn replies_round_trip_too() {
        fn round_trip<C: Call>(_: &C, reply: C::Reply)
        where
            C::Reply: PartialEq + std::fmt::Debug,
        {
            let back: C::Reply = serde_json::from_value(serde_json::to_value(&reply).unwrap()).unwrap();
            assert_eq!(back, reply);
        }
        let link = ClusterLink {
            netdev: "thunderbolt0".into(),
            address: Some(Ipv4Addr::new(192, 168, 2, 1)),
            prefix: Some(24),
            mtu: Some(65520),
        };
        round_trip(&Link { netdev: "thunderbolt0".into() }, Some(link));
        round_trip(&Link { netdev: "eth9".into() }, None);
        let ping = Ping { netdev: "x".into(), address: Ipv4Addr::LOCALHOST, size: 1 };
        round_trip(&ping, PingReport { ok: false, detail: "message too long, mtu=1500".into() });
        let exec = Exec { toolbox: "vllm".into(), argv: vec!["true".into()] };
        round_trip(&exec, ExecReport { exit_code: 127, stdout: String::new(), stderr: "not found ✗".into() });
        let phase = PhaseRequest { phase: Phase::Swap, name: "vllm".into(), keep: 2, image_id: None };
        round_trip(
            &phase,
            PhaseReport { name: "vllm".into(), phase: Phase::Swap, changed: true, parked: true, warnings: vec![] },
        );
        let probe = ServeProbe {
            service: "tiny".into(),
            server: "llama-server".into(),
            address: "192.168.2.1:8000".parse().unwrap(),
            api_key: None,
            look_inside: true,
        };
        let probed = ServeProbeReport {
            health: crate::serving::http::HttpAnswer::Refused,
            models: vec![],
            key_refused: false,
            server_alive: true,
            last_line: Some("Loading".into()),
        };
        round_trip(&probe, probed);
        let reach = Reach { addresses: vec!["192.168.2.2:50052".parse().unwrap()] };
        round_trip(
            &reach,
            vec![
                Reached::Answers,
                Reached::Silent,
                Reached::Failed(IoFailure {
                    during: IoStep::Connect,
                    kind: IoKind::NoRoute,
                    message: "No route to host (os error 113)".into(),
                }),
                Reached::Unasked("ssh: connection closed".into()),
            ],
        );
        let table = vec![RayNode { ip: "192.168.2.2".into(), alive: true, gpus: 1.0 }];
        round_trip(&RayNodes { service: "model".into() }, table);
        let routed = crate::router::routes::Route {
            name: "Qwen/Qwen3-32B".into(),
            upstream: "192.168.2.1:8001".parse().unwrap(),
            engine: "vllm".into(),
            model: "Qwen/Qwen3-32B".into(),
            nodes: vec!["node1".into(), "node2".into()],
            since: "2026-11-24T10:00:00Z".into(),
        };
        let state = RouterState {
            process: Some(crate::router::routes::RouterProcess {
                pid: 4242,
                listen: "0.0.0.0:8000".parse().unwrap(),
                started: "2026-11-24T10:00:00Z".into(),
            }),
            routes: vec![routed],
            api_key: true,
            key_matches: false,
            health: [("Qwen/Qwen3-32B".to_string(), "ok".to_string())].into(),
            on_demand: vec![crate::node::router::OnDemandState {
                name: "chat".into(),
                engine: "llama.cpp".into(),
                model: "/models/chat.gguf".into(),
                nodes: vec!["node1".into()],
                idle_seconds: Some(600),
                state: "stopped".into(),
                planned_bytes: vec![1 << 30],
            }],
        };
        round_trip(&RouterLook { api_key: None, health: true }, state);
        let keys = KeysReport {
            keys: vec![crate::node::router_keys::KeyShown {
                name: "alice".into(),
                models: vec!["chat".into()],
                rpm: Some(60),
                tpm: None,
                created: "2026-11-28T10:00:00Z".into(),
            }],
            file: "/home/u/.local/state/strix-toolbox/router/keys.json".into(),
        };
        round_trip(&RouterKeys::default(), keys);
        round_trip(&RouterScrape {}, RouterExposition::Metrics("strix_router_starts_total{service=\"a\"} 1\n".into()));
        let served = ModelServing {
            id: 1,
            address: "192.168.2.1:40123".parse().unwrap(),
            ca_pem: "-----BEGIN CERTIFICATE-----".into(),
            blobs: 3,
        };
        round_trip(
            &ModelServe { repo: manifest().repo, commit: manifest().commit, access: Secret::new("k".into()) },
            served,
        );
        let fetched = ModelFetched {
            cache: "/home/me/.cache/huggingface/hub".into(),
            fetched: 1,
            fetched_bytes: 6,
            kept: 2,
            repaired: vec!["model.safetensors".into()],
        };
        let source = BlobSource {
            address: "192.168.2.1:1".parse().unwrap(),
            ca_pem: "-----BEGIN CERTIFICATE-----".into(),
            access: Secret::new("k".into()),
        };
        round_trip(&ModelFetch { manifest: manifest(), revision: Revision::main(), source }, fetched);
        let ask = ShapeAsk {
            source: crate::model::source::ModelSource::Path("/models/Qwen3-32B".into()),
            format: crate::model::source::ModelFormat::Safetensors,
            revision: None,
            toolbox: "vllm".into(),
            start_toolbox: false,
            hub_env: Default::default(),
            hf_token: None,
        };
        let hybrid = crate::model::shape::Sizing::CannotSize {
            architecture: "Qwen3NextForCausalLM".into(),
            why: "linear attention".into(),
        };
        let read = ShapeRead {
            sizing: hybrid,
            bytes_read: 2048,
            requests: 1,
            commit: None,
            files: vec!["config.json".into()],
            toolbox: Some("vllm".into()),
            notes: vec![],
        };
        round_trip(&ask, read);
        let telemetry = crate::node::telemetry::TelemetryReport {
            boot_id: Some("4bd9d1c5-6a3e-4b0e-9c6d-3f1f2a7c9e10".into()),
            host: crate::host::telemetry::NodeTelemetry {
                cards: vec![crate::host::telemetry::CardTelemetry {
                    card: "card0".into(),
                    busy_percent: Some(37),
                    power_microwatts: Some(45_500_000),
                    temperature_millicelsius: Some(-1_500),
                }],
                ..Default::default()
            },
            engines: vec![
                crate::node::telemetry::EngineReading {
                    service: "tiny".into(),
                    model: "/models/tiny.gguf".into(),
                    engine: crate::serving::llama::LLAMA_CPP,
                    address: "192.168.2.1:8001".parse().unwrap(),
                    scrape: crate::node::telemetry::EngineScrape::Metrics("llamacpp:requests_processing NaN\n".into()),
                    probe: Some(crate::watch::ProbeOutcome::TimedOut),
                },
                crate::node::telemetry::EngineReading {
                    service: "qwen".into(),
                    model: "Qwen/Qwen3-0.6B".into(),
                    engine: crate::serving::vllm::VLLM,
                    address: "192.168.2.1:8002".parse().unwrap(),
                    scrape: crate::node::telemetry::EngineScrape::Failed("nothing listens at 192.168.2.1:8002".into()),
                    probe: Some(crate::watch::ProbeOutcome::Failed("POST …: nothing answers there".into())),
                },
            ],
        };
        round_trip(&Telemetry::default(), telemetry);
    }
}
