//! vLLM as a serving engine: across nodes with its multiprocessing executor (`vllm serve` on every
//! node, the head's serving the API, the others `--headless`, meeting at the head's rendezvous on
//! the link) or through Ray (vLLM's Ray executor joins the running Ray cluster), one rank per
//! node's GPU; on one node with its default executor. Its plan ([`plan`]) and its command line;
//! its compile cache is [`super::compile_cache`]'s.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};

use crate::serving::engine::{Backend, ServingEngine};
use crate::serving::environment::serving_env;
use crate::serving::parallelism::Parallelism;
use crate::serving::plan::{
    flag_value, with_overrides, LaunchPlan, NodeFacts, NodePlan, PlanRequest, PlannedCommand, Proof, Start, Step,
};
use crate::serving::ray::{ray_head, ray_worker, RayRole, AUTH_MODE, AUTH_TOKEN};
use crate::serving::record::Role;

/// The process name (and log) of `vllm serve`: the server on the head, a headless rank elsewhere.
pub const SERVER: &str = "vllm";

/// Where the head's rank 0 takes the others in (vLLM's default `--master-port`), on the link.
pub const RENDEZVOUS_PORT: u16 = 29501;

/// How one `vllm serve` spans the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    /// One node, vLLM's default executor.
    Alone,
    /// The driver on the head, its workers placed by the running Ray cluster.
    Ray,
    /// vLLM's multiprocessing executor, rank `rank` of `nodes`, meeting at `master`.
    Mp { nodes: usize, rank: usize, master: Ipv4Addr },
}

/// `vllm serve MODEL` split `tp` × `pp`, run by `executor`; the head (rank 0, or alone) serves
/// the API on `host:port`, the other ranks are `--headless`.
pub fn vllm_serve(
    model: &str,
    (tp, pp): (usize, usize),
    executor: Executor,
    (host, port): (&str, u16),
    extra: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = ["vllm", "serve", model, "--tensor-parallel-size"].map(String::from).to_vec();
    argv.push(tp.to_string());
    if pp > 1 {
        argv.extend(["--pipeline-parallel-size".to_string(), pp.to_string()]);
    }
    let mut serves_api = true;
    match executor {
        Executor::Alone => {}
        Executor::Ray => argv.extend(["--distributed-executor-backend", "ray"].map(String::from)),
        Executor::Mp { nodes, rank, master } => {
            argv.extend(["--distributed-executor-backend", "mp", "--nnodes"].map(String::from));
            argv.extend([nodes.to_string(), "--node-rank".into(), rank.to_string()]);
            argv.extend(["--master-addr".into(), master.to_string(), "--master-port".into()]);
            argv.push(RENDEZVOUS_PORT.to_string());
            if rank > 0 {
                argv.push("--headless".into());
                serves_api = false;
            }
        }
    }
    if serves_api {
        argv.extend(["--host".to_string(), host.to_string(), "--port".to_string(), port.to_string()]);
    }
    argv.extend(extra.iter().cloned());
    argv
}

/// What each node runs. Over Ray: Ray on every node first (the head, then the workers at once,
/// proven by Ray's own node table), then `vllm serve` on the head. With vLLM's multiprocessing
/// executor: `vllm serve` on every node at once (the head's rank 0 and its API, a headless rank
/// on each other node), proven by every rank's log saying it joined, then by the endpoint. On
/// one node, `vllm serve` alone.
pub fn plan(nodes: &[NodeFacts], request: &PlanRequest, backend: Backend, split: &Parallelism) -> LaunchPlan {
    let over_ray = backend == Backend::Ray;
    let head_ip = nodes[0].link_ip;
    let mut extra = request.extra.clone();
    if let Some(commit) = request.hub_commit.as_ref().filter(|_| flag_value(&request.extra, "--revision").is_none()) {
        // vLLM loads the commit every node has, from its cache, never asking the Hub.
        extra.extend(["--revision".to_string(), commit.clone()]);
    }
    let mut planned = Vec::new();
    for (index, facts) in nodes.iter().enumerate() {
        let mut env = serving_env(&facts.transport, facts.link_ip, &BTreeMap::new());
        if !over_ray {
            env.retain(|key, _| !key.starts_with("RAY_"));
        }
        if nodes.len() > 1 {
            // RCCL says which transport it really uses (NET/IB or NET/Socket): the launch reads it.
            env.insert("NCCL_DEBUG".into(), "INFO".into());
        }
        if let Some(cache) = &facts.hub_cache {
            env.insert("HF_HUB_OFFLINE".into(), "1".into());
            env.insert("HF_HUB_CACHE".into(), cache.clone());
        }
        let env = with_overrides(env, request);
        let ray = |role| PlannedCommand {
            argv: Vec::new(),
            env: env.clone(),
            secret_env: Vec::new(),
            start: Start::Ray { role },
        };
        let role = match (backend, index) {
            (Backend::Single, _) => Role::Single,
            (_, 0) => Role::Head,
            _ => Role::Worker,
        };
        let mut commands = match (over_ray, index) {
            (false, _) => Vec::new(),
            (true, 0) => vec![PlannedCommand { argv: ray_head(facts.link_ip), ..ray(RayRole::Head) }],
            (true, _) => {
                vec![PlannedCommand { argv: ray_worker(head_ip, facts.link_ip), ..ray(RayRole::Worker { head_ip }) }]
            }
        };
        let executor = match backend {
            Backend::Ray => Executor::Ray,
            Backend::Mp => Executor::Mp { nodes: nodes.len(), rank: index, master: head_ip },
            Backend::Single | Backend::Rpc => Executor::Alone,
        };
        let argv = vllm_serve(&request.model, (split.tp, split.pp), executor, (&request.host, request.port), &extra);
        if index == 0 {
            let mut serve_env = env.clone();
            let mut secrets = vec!["HF_TOKEN", ServingEngine::Vllm.api_key_env()];
            if over_ray {
                // The driver talks to Ray: it needs the launch's token too.
                serve_env.insert(AUTH_MODE.0.into(), AUTH_MODE.1.into());
                secrets.push(AUTH_TOKEN);
            }
            let mut serve = PlannedCommand::process(SERVER, argv, serve_env).with_secrets(&secrets, request);
            if backend == Backend::Mp {
                serve = serve.listening(SocketAddr::from((head_ip, RENDEZVOUS_PORT)));
            }
            commands.push(serve);
        } else if backend == Backend::Mp {
            commands.push(PlannedCommand::process(SERVER, argv, env.clone()).with_secrets(&["HF_TOKEN"], request));
        }
        planned.push(NodePlan { node: facts.node.clone(), role, link_ip: facts.link_ip, commands });
    }
    let steps = match backend {
        Backend::Ray => vec![
            Step { starts: vec![(0, 0)], proofs: Vec::new() },
            Step { starts: (1..nodes.len()).map(|node| (node, 0)).collect(), proofs: vec![Proof::RayJoined] },
            Step { starts: vec![(0, 1)], proofs: vec![Proof::Endpoint] },
        ],
        Backend::Mp => {
            // RCCL's start-up lines are the ranks' proof; an operator's `-e NCCL_DEBUG=WARN` leaves
            // the endpoint alone to prove it (vLLM serves only once every rank joined).
            let rccl_speaks =
                request.env.get("NCCL_DEBUG").is_none_or(|level| matches!(level.as_str(), "INFO" | "TRACE"));
            let rendezvous = SocketAddr::from((head_ip, RENDEZVOUS_PORT));
            let ranks = rccl_speaks.then_some(Proof::RanksJoined { rendezvous });
            vec![Step {
                starts: (0..nodes.len()).map(|node| (node, 0)).collect(),
                proofs: ranks.into_iter().chain([Proof::Endpoint]).collect(),
            }]
        }
        Backend::Single | Backend::Rpc => vec![Step { starts: vec![(0, 0)], proofs: vec![Proof::Endpoint] }],
    };
    LaunchPlan { engine: ServingEngine::Vllm, backend, nodes: planned, steps }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_executor_spells_its_flags() {
        let extra = vec!["--max-model-len".to_string(), "8192".to_string()];
        let api = ("0.0.0.0", 8000);
        assert_eq!(
            vllm_serve("org/m", (2, 1), Executor::Ray, api, &extra).join(" "),
            "vllm serve org/m --tensor-parallel-size 2 --distributed-executor-backend ray --host 0.0.0.0 --port 8000 \
             --max-model-len 8192"
        );
        assert_eq!(
            vllm_serve("org/m", (1, 1), Executor::Alone, api, &[]).join(" "),
            "vllm serve org/m --tensor-parallel-size 1 --host 0.0.0.0 --port 8000"
        );
        let master = Ipv4Addr::new(192, 168, 2, 1);
        assert_eq!(
            vllm_serve("org/m", (1, 3), Executor::Mp { nodes: 3, rank: 0, master }, api, &[]).join(" "),
            "vllm serve org/m --tensor-parallel-size 1 --pipeline-parallel-size 3 --distributed-executor-backend mp \
             --nnodes 3 --node-rank 0 --master-addr 192.168.2.1 --master-port 29501 --host 0.0.0.0 --port 8000"
        );
        assert_eq!(
            vllm_serve("org/m", (1, 3), Executor::Mp { nodes: 3, rank: 2, master }, api, &extra).join(" "),
            "vllm serve org/m --tensor-parallel-size 1 --pipeline-parallel-size 3 --distributed-executor-backend mp \
             --nnodes 3 --node-rank 2 --master-addr 192.168.2.1 --master-port 29501 --headless --max-model-len 8192"
        );
    }

    #[test]
    fn mp_runs_a_rank_on_every_node_at_once_and_no_ray() {
        let nodes = [facts("node1", [192, 168, 2, 1], None), facts("node2", [192, 168, 2, 2], None)];
        let plan = plan(&nodes, &request("/models/tiny", &[], &[], None), Backend::Mp, &split(1, 2));
        for (index, node) in plan.nodes.iter().enumerate() {
            let serve = &node.commands[0];
            assert_eq!(node.commands.len(), 1);
            assert_eq!(flag_value(&serve.argv, "--node-rank"), Some(index.to_string().as_str()));
            assert_eq!(serve.env["NCCL_DEBUG"], "INFO");
            assert!(!serve.env.keys().any(|key| key.starts_with("RAY_")), "{:?}", serve.env);
        }
        assert_eq!(plan.nodes[1].role, Role::Worker);
        assert_eq!(plan.nodes[1].commands[0].secret_env, ["HF_TOKEN"], "no API key on a headless rank");
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].starts, [(0, 0), (1, 0)]);
        assert!(matches!(plan.steps[0].proofs[..], [Proof::RanksJoined { .. }, Proof::Endpoint]));
        let quiet = request("/models/tiny", &[], &[("NCCL_DEBUG", "WARN")], None);
        let plan = super::plan(&nodes, &quiet, Backend::Mp, &split(1, 2));
        assert_eq!(plan.steps[0].proofs, [Proof::Endpoint], "no RCCL lines to read: the endpoint proves it");
    }

    fn split(tp: usize, pp: usize) -> Parallelism {
        Parallelism { tp, pp, why: String::new() }
    }

    fn facts(node: &str, ip: [u8; 4], cache: Option<&str>) -> NodeFacts {
        NodeFacts {
            node: node.into(),
            link_ip: std::net::Ipv4Addr::from(ip),
            transport: crate::spec::Transport::ThunderboltTcp { netdev: "thunderbolt0".into() },
            hub_cache: cache.map(str::to_string),
            programs: vec!["vllm".into(), "ray".into()],
        }
    }

    fn request(model: &str, extra: &[&str], env: &[(&str, &str)], commit: Option<&str>) -> PlanRequest {
        PlanRequest {
            model: model.into(),
            served: model.into(),
            tp: Some(2),
            host: "0.0.0.0".into(),
            port: 8000,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            hub_commit: commit.map(str::to_string),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            secrets: vec!["HF_TOKEN".into(), "RAY_AUTH_TOKEN".into()],
        }
    }

    #[test]
    fn ray_first_on_every_node_then_vllm_on_the_head() {
        let nodes = [facts("node1", [192, 168, 2, 1], None), facts("node2", [192, 168, 2, 2], None)];
        let plan = plan(&nodes, &request("/models/tiny", &[], &[], None), Backend::Ray, &split(2, 1));
        assert_eq!(plan.nodes[0].commands[0].argv[..3], ["ray", "start", "--head"]);
        assert_eq!(plan.nodes[1].commands[0].argv[..4], ["ray", "start", "--address", "192.168.2.1:6379"]);
        let serve = &plan.nodes[0].commands[1];
        assert_eq!(serve.argv[..5], ["vllm", "serve", "/models/tiny", "--tensor-parallel-size", "2"]);
        assert_eq!(serve.secret_env, ["HF_TOKEN", "RAY_AUTH_TOKEN"], "the driver presents Ray's token");
        assert_eq!(serve.env["RAY_AUTH_MODE"], "token");
        let order: Vec<Vec<(usize, usize)>> = plan.steps.iter().map(|s| s.starts.clone()).collect();
        assert_eq!(order, [vec![(0, 0)], vec![(1, 0)], vec![(0, 1)]]);
        assert_eq!(plan.steps[1].proofs, [Proof::RayJoined]);
        assert_eq!(plan.steps[2].proofs, [Proof::Endpoint]);
    }

    #[test]
    fn a_cached_hub_model_runs_offline_on_its_commit_everywhere() {
        let commit = "c12a728b0b9a3d8c0a9e6a1d5b1f4e2c3d4e5f60";
        let nodes =
            [facts("node1", [192, 168, 2, 1], Some("/h1/hub")), facts("node2", [192, 168, 2, 2], Some("/h2/hub"))];
        let plan = plan(&nodes, &request("acme/tiny", &[], &[], Some(commit)), Backend::Ray, &split(2, 1));
        for (node, cache) in plan.nodes.iter().zip(["/h1/hub", "/h2/hub"]) {
            for command in &node.commands {
                assert_eq!(command.env["HF_HUB_OFFLINE"], "1", "{}", node.node);
                assert_eq!(command.env["HF_HUB_CACHE"], cache);
            }
        }
        let serve = &plan.nodes[0].commands.last().unwrap().argv;
        assert!(serve.ends_with(&["--revision".to_string(), commit.to_string()]), "{serve:?}");

        // The operator's own --revision and -e win.
        let asked = request("acme/tiny", &["--revision", "v1"], &[("HF_HUB_OFFLINE", "0")], Some(commit));
        let plan = super::plan(&nodes, &asked, Backend::Ray, &split(2, 1));
        let serve = &plan.nodes[0].commands.last().unwrap().argv;
        assert_eq!(serve.iter().filter(|w| *w == "--revision").count(), 1, "{serve:?}");
        assert_eq!(plan.nodes[1].commands[0].env["HF_HUB_OFFLINE"], "0");

        // A path: vLLM as before, on one node without Ray.
        let alone = [facts("node1", [127, 0, 0, 1], None)];
        let plan = super::plan(&alone, &request("/models/tiny", &[], &[], None), Backend::Single, &split(1, 1));
        assert!(!plan.nodes[0].commands[0].env.contains_key("HF_HUB_OFFLINE"));
        assert!(!plan.nodes[0].commands[0].argv.contains(&"--revision".to_string()));
        assert_eq!(plan.nodes[0].commands[0].secret_env, ["HF_TOKEN"], "no Ray, no Ray token");
        assert_eq!(plan.nodes[0].role, Role::Single);
    }
}
