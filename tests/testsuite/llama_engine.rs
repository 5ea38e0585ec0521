//! The real inference engine the llama.cpp serving, bench and canary tests stand on, proven:
//! llama.cpp built by scripts/llama-cpp.sh, the tiny llama GGUF, the servers run on loopback and
//! across namespace nodes over RPC, and the toolbox images with each `llama-server` variant.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::cluster::{Link, TestCluster};
use crate::support::llama_cpp::llama_cpp;
use crate::support::llama_image::{
    llama_image, llama_image_rope, llama_image_slow, llama_server_wrapper, LlamaVariant,
};
use crate::support::llama_server::{greedy_completion, Completion, LlamaServer, RpcServer, START_LIMIT};
use crate::support::podman::PodmanService;
use crate::support::proc_net::{tcp_sockets, TcpState};
use crate::support::registry::Registry;
use crate::support::tiny_llama::TinyLlama;
use crate::support::{free_port, wait_until};

const PROMPT: &str = "Once upon a time, in a small village,";
const TOKENS: u32 = 32;

/// 32 tokens, and not one token over and over.
fn assert_real_answer(answer: &Completion) {
    assert_eq!(answer.completion_tokens, u64::from(TOKENS), "{answer:?}");
    let mut distinct = answer.tokens.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 1, "the model repeats one token: {answer:?}");
}

#[test]
fn greedy_completion_is_the_same_on_every_run() {
    let model = TinyLlama::default().gguf();
    let first = LlamaServer::builder(&model).start().greedy(PROMPT, TOKENS);
    // Another server, with other slots: what a bench at another concurrency talks to.
    let again = LlamaServer::builder(&model).args(&["--parallel", "2"]).start();
    assert_eq!(again.greedy(PROMPT, TOKENS), first, "a second server gave another answer");
    assert_eq!(again.greedy(PROMPT, TOKENS), first, "a second request gave another answer");
    assert_real_answer(&first);
    eprintln!("tiny llama (seed 1, 6 layers), greedy: {:?} {:?}", first.text, first.tokens);

    let other = TinyLlama { seed: 2, ..TinyLlama::default() }.gguf();
    let answer = LlamaServer::builder(&other).start().greedy(PROMPT, TOKENS);
    assert_ne!(answer, first, "another seed is another model");
}

#[test]
fn the_rope_wrapper_changes_the_answer_and_the_slow_one_only_the_pace() {
    let build = llama_cpp();
    let model = TinyLlama::default().gguf();
    let dir = tempfile::tempdir().expect("tempdir");
    let wrapper = |variant| {
        let path = dir.path().join(format!("{variant:?}"));
        std::fs::write(&path, llama_server_wrapper(variant, &build.llama_server())).expect("write wrapper");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        path
    };
    let as_built = LlamaServer::builder(&model).start().greedy(PROMPT, TOKENS);

    let rope = LlamaServer::builder(&model).program(&wrapper(LlamaVariant::RopeBase)).start();
    let answer = rope.greedy(PROMPT, TOKENS);
    assert_ne!(answer, as_built, "another RoPE base must change the greedy answer");
    assert_real_answer(&answer);
    // `Using metadata override (float) 'llama.rope.freq_base' = 100.000000`, `freq_base_train = 100.0`.
    let log = rope.log();
    assert!(log.contains("freq_base_train       = 100.0"), "the RoPE base was not overridden:\n{log}");

    let slow = LlamaServer::builder(&model).program(&wrapper(LlamaVariant::Slow)).start();
    assert_eq!(slow.greedy(PROMPT, TOKENS), as_built, "the slow server must answer the same");
    let server = server_under(slow.pid());
    wait_until("the slow wrapper stops its server", Duration::from_secs(5), || process_state(server) == Some('T'));
    drop(slow);
    wait_until("the slow wrapper's server to end with it", Duration::from_secs(5), || process_state(server).is_none());
}

/// The one child of `wrapper`: the server it runs.
fn server_under(wrapper: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{wrapper}/task/{wrapper}/children")).expect("children");
    let pids: Vec<u32> = children.split_whitespace().filter_map(|pid| pid.parse().ok()).collect();
    // `sleep` comes and goes beside it; the server is the one that stays.
    *pids.iter().find(|pid| process_name(**pid).as_deref() == Some("llama-server")).expect("the wrapper's server")
}

fn process_name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|name| name.trim().to_string())
}

/// The state letter of /proc/PID/stat (R, S, T...), None once it is gone or a zombie.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
    (state != 'Z').then_some(state)
}

#[test]
fn layers_split_over_rpc_on_two_nodes_give_the_single_node_tokens() {
    let model = TinyLlama::default().gguf();
    let single = LlamaServer::builder(&model).start().greedy(PROMPT, TOKENS);

    let cluster = TestCluster::start_network_only_with(3, Link::Thunderbolt);
    let (head, workers) = (cluster.node(1), [cluster.node(2), cluster.node(3)]);
    let rpc: Vec<RpcServer> =
        workers.iter().map(|node| RpcServer::start(Some(node.netns()), node.link_address, None)).collect();
    let server = LlamaServer::builder(&model).inside(head.netns(), head.link_address).rpc(&[&rpc[0], &rpc[1]]).start();
    let split = server.greedy(PROMPT, TOKENS);
    assert_eq!(split, single, "the RPC split answered otherwise than one node");

    // `load_tensors: RPC0[192.168.2.2:PORT] model buffer size = 1.50 MiB`: weights on each worker.
    let log = server.log();
    for worker in &rpc {
        let weights = format!("[{}] model buffer size", worker.endpoint());
        assert!(log.contains(&weights), "the head put no weights on {}:\n{log}", worker.endpoint());
    }
    for (node, worker) in workers.iter().zip(&rpc) {
        // The head's connection, as the kernel and `ss` on the worker see it.
        let connected = tcp_sockets(worker.pid()).iter().any(|socket| {
            socket.state == TcpState::Established
                && socket.local == worker.address()
                && *socket.remote.ip() == head.link_address
        });
        assert!(connected, "no connection from the head to {}: {:?}", worker.endpoint(), tcp_sockets(worker.pid()));
        let ss = node.netns().enter("ss").args(["-tnp", "state", "established"]).output().expect("ss");
        let ss = String::from_utf8_lossy(&ss.stdout);
        assert!(
            ss.lines().any(|line| line.contains(&worker.endpoint())
                && line.contains(&format!("{}:", head.link_address))
                && line.contains("ggml-rpc-server")),
            "ss -tnp on {} shows no connection from the head:\n{ss}",
            node.name
        );
    }
}

#[test]
fn the_rpc_cache_spares_a_second_load_the_large_weights() {
    let model = TinyLlama::default().gguf();
    let cluster = TestCluster::start_network_only_with(2, Link::Thunderbolt);
    let (head, worker) = (cluster.node(1), cluster.node(2));
    let cache = tempfile::tempdir().expect("cache dir");
    let mut received = Vec::new();
    for _load in 0..2 {
        // A relaunch: a new RPC server on the same cache, a new head.
        let rpc = RpcServer::start(Some(worker.netns()), worker.link_address, Some(cache.path()));
        let before = worker.link_bytes_received();
        let server = LlamaServer::builder(&model).inside(head.netns(), head.link_address).rpc(&[&rpc]).start();
        received.push(worker.link_bytes_received() - before);
        drop(server);
        drop(rpc);
    }
    let cached: Vec<_> = std::fs::read_dir(cache.path().join("rpc")).expect("the cache dir").flatten().collect();
    let sizes: Vec<u64> = cached.iter().map(|entry| entry.metadata().expect("metadata").len()).collect();
    // The output matrix, 32000 x 96 float32: the only tensor above the 10 MiB threshold.
    assert_eq!(sizes, [32000 * 96 * 4], "one cached tensor: {cached:?}");
    assert!(
        received[1] + sizes[0] <= received[0],
        "the second load received {} bytes, the first {}: the cache did not spare {} bytes",
        received[1],
        received[0],
        sizes[0]
    );
    eprintln!("bytes the worker received: first load {}, second {}", received[0], received[1]);
}

#[test]
fn the_images_run_llama_cpp_in_a_container_each_variant_its_way() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let model = TinyLlama::default().gguf();
    let as_built = LlamaServer::builder(&model).start().greedy(PROMPT, TOKENS);
    let created = "2026-11-01T10:00:00Z";
    let images = [
        (llama_image(&podman, &registry, "llama:good", created), true),
        (llama_image_rope(&podman, &registry, "llama:rope", created), false),
        (llama_image_slow(&podman, &registry, "llama:slow", created), true),
    ];
    for (index, (image, same)) in images.iter().enumerate() {
        let container = ServingContainer::start(&podman, image, &model);
        if index == 0 {
            for (argv, expect) in [
                (["llama-server", "--version"], "version:"),
                (["rpc-server", "--help"], "--cache"),
                (["ggml-rpc-server", "--help"], "--cache"),
            ] {
                let mut args = vec!["exec", &container.name];
                args.extend(argv);
                let output = podman.podman(&args);
                let text =
                    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
                assert!(output.status.success() && text.contains(expect), "{argv:?} in {image}: {text}");
            }
        }
        let answer = container.greedy();
        assert_eq!(answer == as_built, *same, "{image} answered {answer:?}, the build {as_built:?}");
    }
}

/// An image's `llama-server` serving the model in a container on the host network (podman's
/// testbed default), removed on drop.
struct ServingContainer<'a> {
    podman: &'a PodmanService,
    name: String,
    url: String,
}

impl<'a> ServingContainer<'a> {
    fn start(podman: &'a PodmanService, image: &str, model: &Path) -> ServingContainer<'a> {
        let port = free_port().to_string();
        let mount = format!("{}:/model.gguf:ro", model.display());
        let name = format!("llama-{port}");
        podman.podman_ok(&[
            "run",
            "-d",
            "--name",
            &name,
            "-v",
            &mount,
            image,
            "llama-server",
            "--model",
            "/model.gguf",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--threads",
            "1",
            "--ctx-size",
            "2048",
        ]);
        ServingContainer { podman, name, url: format!("http://127.0.0.1:{port}") }
    }

    /// The greedy answer, once the server answers (at most START_LIMIT).
    fn greedy(&self) -> Completion {
        let deadline = Instant::now() + START_LIMIT;
        loop {
            match greedy_completion(None, &self.url, PROMPT, TOKENS) {
                Ok(answer) => return answer,
                Err(error) if Instant::now() > deadline => {
                    let logs = self.podman.podman(&["logs", &self.name]);
                    panic!("{} did not answer: {error}\n{}", self.name, String::from_utf8_lossy(&logs.stderr));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

impl Drop for ServingContainer<'_> {
    fn drop(&mut self) {
        let _ = self.podman.podman(&["rm", "--force", "--time", "5", &self.name]);
    }
}
