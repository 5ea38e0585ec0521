//! llama.cpp as a serving engine: `llama-server` on the head, across nodes through llama.cpp's RPC
//! backend. Every other node runs `rpc-server` bound to its cluster-link address only (it has no
//! authentication of its own; its banner says never to expose it), with its local tensor cache
//! (`-c`), so a relaunch sends the weights' hashes instead of the weights. The head's
//! `llama-server` lists every worker in `--rpc`, offloads every layer (`-ngl 999`: its own GPU and
//! the workers'), and splits the model's layers over them. The model is a GGUF file on the head
//! only: the workers get their tensors over RPC.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::error::{Error, Result};
use crate::serving::engine::{Backend, ServingEngine};
use crate::serving::plan::{with_overrides, LaunchPlan, NodeFacts, NodePlan, PlanRequest, PlannedCommand, Proof, Step};
use crate::serving::record::Role;

/// `rpc-server`'s port on each worker (its own default).
pub const RPC_PORT: u16 = 50052;
/// The process name (and log) of the head's server.
pub const SERVER: &str = "llama-server";
/// The process name (and log) of a worker's RPC server.
pub const RPC_SERVER: &str = "rpc-server";
/// The RPC server's program, as llama.cpp builds it now (`ggml-rpc-server`) and before.
pub const RPC_PROGRAMS: [&str; 2] = ["ggml-rpc-server", "rpc-server"];
/// What llama-server logs for each device a model is loaded onto: `… using device RPC0
/// (192.168.2.2:50052) …` names a worker by its endpoint.
pub const DEVICE_LINE: &str = "using device";

/// The head's environment. No mmap: on Strix Halo's unified memory a mapped multi-GB file makes
/// loading crawl (kyuz0's toolboxes say to always turn it off). The devices it loads onto in its
/// log: the launch's proof reads them, and builds since `--load-mode` log them at verbosity 4
/// only. Variables, not flags: each llama.cpp generation spells these flags its own way
/// (`--no-mmap`, `--mmap/--no-mmap`, `--load-mode`), and a build refuses a flag it does not know
/// but ignores a variable it does not read. `-e` overrides any of them.
pub const HEAD_ENV: [(&str, &str); 4] = [
    ("LLAMA_ARG_NO_MMAP", "1"),
    ("LLAMA_ARG_MMAP", "0"),
    ("LLAMA_ARG_LOAD_MODE", "none"),
    ("LLAMA_ARG_LOG_VERBOSITY", "4"),
];

/// `rpc-server` on a worker: bound to its link address, with its local cache.
pub fn rpc_server(program: &str, listen: SocketAddr) -> Vec<String> {
    vec![program.to_string(), "-H".into(), listen.ip().to_string(), "-p".into(), listen.port().to_string(), "-c".into()]
}

/// `llama-server` on the head: the model, every worker's RPC server, all layers offloaded, the
/// name it serves the model under, on `host:port`. (No mmap: see [`HEAD_ENV`].)
pub fn llama_server(
    gguf: &str,
    workers: &[SocketAddr],
    alias: Option<&str>,
    host: &str,
    port: u16,
    extra: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = ["llama-server", "-m", gguf].map(String::from).to_vec();
    if !workers.is_empty() {
        let list: Vec<String> = workers.iter().map(SocketAddr::to_string).collect();
        argv.extend(["--rpc".to_string(), list.join(",")]);
    }
    argv.extend(["-ngl", "999"].map(String::from));
    if let Some(alias) = alias {
        argv.extend(["--alias".to_string(), alias.to_string()]);
    }
    argv.extend(["--host".to_string(), host.to_string(), "--port".to_string(), port.to_string()]);
    argv.extend(extra.iter().cloned());
    argv
}

/// What each node runs: every worker's `rpc-server` at once, proven by each answering on its link
/// address from the head; then `llama-server` on the head, proven by its endpoint and by its log
/// naming every worker as a device it loaded the model onto. One node: `llama-server` alone.
pub fn plan(nodes: &[NodeFacts], request: &PlanRequest, backend: Backend) -> LaunchPlan {
    let listen = |facts: &NodeFacts| SocketAddr::from((facts.link_ip, RPC_PORT));
    let workers: Vec<SocketAddr> =
        if backend == Backend::Rpc { nodes[1..].iter().map(listen).collect() } else { Vec::new() };
    // The operator's own name wins; otherwise the model as given, as vLLM names it.
    let alias = ServingEngine::LlamaCpp
        .name_flags()
        .iter()
        .all(|flag| crate::serving::plan::flag_value(&request.extra, flag).is_none())
        .then_some(request.served.as_str());
    let mut planned = Vec::new();
    for (index, facts) in nodes.iter().enumerate() {
        let (role, command) = match (backend, index) {
            (Backend::Rpc, 0) | (_, 0) => {
                let argv = llama_server(&request.model, &workers, alias, &request.host, request.port, &request.extra);
                let head_env = HEAD_ENV.iter().map(|(key, value)| (key.to_string(), value.to_string()));
                let env = with_overrides(head_env.collect(), request);
                let role = if backend == Backend::Rpc { Role::Head } else { Role::Single };
                let secrets = [ServingEngine::LlamaCpp.api_key_env()];
                (role, PlannedCommand::process(SERVER, argv, env).with_secrets(&secrets, request))
            }
            _ => {
                let env = with_overrides(BTreeMap::new(), request);
                let program =
                    RPC_PROGRAMS.iter().find(|p| facts.programs.iter().any(|f| f == *p)).unwrap_or(&RPC_PROGRAMS[0]);
                let argv = rpc_server(program, listen(facts));
                (Role::Worker, PlannedCommand::process(RPC_SERVER, argv, env).listening(listen(facts)))
            }
        };
        planned.push(NodePlan { node: facts.node.clone(), role, link_ip: facts.link_ip, commands: vec![command] });
    }
    let steps = if backend == Backend::Rpc {
        let listeners: Vec<(usize, SocketAddr)> = (1..nodes.len()).map(|i| (i, workers[i - 1])).collect();
        let mentions = listeners.iter().map(|(node, address)| (*node, address.to_string())).collect();
        vec![
            Step {
                starts: (1..nodes.len()).map(|node| (node, 0)).collect(),
                proofs: vec![Proof::Reachable { listeners }],
            },
            Step {
                starts: vec![(0, 0)],
                proofs: vec![Proof::Endpoint, Proof::HeadLog { prefix: DEVICE_LINE.into(), mentions }],
            },
        ]
    } else {
        vec![Step { starts: vec![(0, 0)], proofs: vec![Proof::Endpoint] }]
    };
    LaunchPlan { engine: ServingEngine::LlamaCpp, backend, nodes: planned, steps }
}

/// Every file of a GGUF model given by its path: a split model (`NAME-00001-of-00003.gguf`) is
/// all its parts, named by the first; anything else is itself.
pub fn gguf_parts(path: &str) -> Result<Vec<String>> {
    let Some((stem, index, count)) = split_name(path) else { return Ok(vec![path.to_string()]) };
    let width = index.len();
    let (index, count): (u32, u32) = (index.parse().unwrap_or(0), count.parse().unwrap_or(0));
    if count == 0 || index == 0 || index > count {
        return Err(Error::Usage(format!("{path}: part {index} of {count} is not a part of a split GGUF model")));
    }
    let part = |n: u32| format!("{stem}-{n:0width$}-of-{count:0width$}.gguf");
    if index != 1 {
        return Err(Error::Usage(format!(
            "{path} is part {index} of a split model: llama-server takes the first part, {}",
            part(1)
        )));
    }
    Ok((1..=count).map(part).collect())
}

/// `NAME-00001-of-00003.gguf` → (`NAME`, `00001`, `00003`).
fn split_name(path: &str) -> Option<(&str, &str, &str)> {
    let rest = path.strip_suffix(".gguf")?;
    let (rest, count) = rest.rsplit_once("-of-")?;
    let (stem, index) = rest.rsplit_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.len() == count.len() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(index) && digits(count)).then_some((stem, index, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Transport;
    use std::net::Ipv4Addr;

    fn facts(node: &str, ip: [u8; 4], programs: &[&str]) -> NodeFacts {
        NodeFacts {
            node: node.into(),
            link_ip: Ipv4Addr::from(ip),
            transport: Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
            hub_cache: None,
            programs: programs.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn request(extra: &[&str]) -> PlanRequest {
        PlanRequest {
            model: "/models/tiny.gguf".into(),
            served: "/models/tiny.gguf".into(),
            tp: None,
            host: "0.0.0.0".into(),
            port: 8080,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            hub_commit: None,
            env: BTreeMap::new(),
            secrets: vec!["LLAMA_API_KEY".into(), "HF_TOKEN".into()],
        }
    }

    #[test]
    fn workers_serve_rpc_on_their_link_address_and_the_head_uses_them_all() {
        let nodes = [
            facts("node1", [192, 168, 2, 1], &["llama-server"]),
            facts("node2", [192, 168, 2, 2], &["ggml-rpc-server"]),
            facts("node3", [192, 168, 2, 3], &["rpc-server"]),
        ];
        let plan = plan(&nodes, &request(&[]), Backend::Rpc);
        assert_eq!(plan.nodes[1].commands[0].argv.join(" "), "ggml-rpc-server -H 192.168.2.2 -p 50052 -c");
        assert_eq!(plan.nodes[2].commands[0].argv.join(" "), "rpc-server -H 192.168.2.3 -p 50052 -c", "an older build");
        let head = &plan.nodes[0].commands[0];
        assert_eq!(
            head.argv.join(" "),
            "llama-server -m /models/tiny.gguf --rpc 192.168.2.2:50052,192.168.2.3:50052 -ngl 999 \
             --alias /models/tiny.gguf --host 0.0.0.0 --port 8080"
        );
        assert_eq!(head.secret_env, ["LLAMA_API_KEY"], "the key, and no HF token: the head has the file");
        assert_eq!(head.env["LLAMA_ARG_LOAD_MODE"], "none", "no mmap, in a variable every build reads or ignores");
        assert!(plan.nodes[1].commands[0].env.is_empty(), "{:?}", plan.nodes[1].commands[0].env);
        assert_eq!(plan.steps[0].starts, [(1, 0), (2, 0)], "the workers first, at once");
        assert!(matches!(&plan.steps[0].proofs[0], Proof::Reachable { listeners } if listeners.len() == 2));
        assert!(
            matches!(&plan.steps[1].proofs[1], Proof::HeadLog { mentions, .. } if mentions[1].1 == "192.168.2.3:50052")
        );
        assert_eq!((plan.nodes[0].role, plan.nodes[1].role), (Role::Head, Role::Worker));
    }

    #[test]
    fn one_node_runs_llama_server_alone_and_the_operators_alias_wins() {
        let plan =
            plan(&[facts("node1", [127, 0, 0, 1], &["llama-server"])], &request(&["-a", "tiny"]), Backend::Single);
        let argv = plan.nodes[0].commands[0].argv.join(" ");
        assert!(!argv.contains("--rpc") && !argv.contains("--alias") && argv.ends_with("-a tiny"), "{argv}");
        assert_eq!(plan.nodes[0].role, Role::Single);
    }

    #[test]
    fn a_split_model_is_all_its_parts_named_by_the_first() {
        assert_eq!(gguf_parts("/m/x.gguf").unwrap(), ["/m/x.gguf"]);
        assert_eq!(
            gguf_parts("/m/Q-A22B-Q4_K_M-00001-of-00003.gguf").unwrap(),
            [
                "/m/Q-A22B-Q4_K_M-00001-of-00003.gguf",
                "/m/Q-A22B-Q4_K_M-00002-of-00003.gguf",
                "/m/Q-A22B-Q4_K_M-00003-of-00003.gguf"
            ]
        );
        let later = gguf_parts("/m/q-00002-of-00003.gguf").unwrap_err().to_string();
        assert!(later.contains("q-00001-of-00003.gguf"), "{later}");
        assert!(gguf_parts("/m/q-00004-of-00003.gguf").is_err());
        assert_eq!(gguf_parts("/m/q-1-of-00003.gguf").unwrap(), ["/m/q-1-of-00003.gguf"], "not the split naming");
    }
}
