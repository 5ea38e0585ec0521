#!/opt/venv/bin/python3
"""A stand-in for `vllm serve`, named as such: no model, no GPU, one GPU per node as a Strix Halo
has. Across nodes it runs as vLLM's multiprocessing executor does (`--nnodes N --node-rank R
--master-addr A --master-port P`, `--headless` on every rank but 0): rank 0 listens on A:P and
serves the API only once every headless rank connected; a headless rank that cannot reach A:P
gives up with torch's own words. With STANDIN_VLLM_WITHOUT_NNODES=1 (an image's ENV) it is an older
vLLM, whose executor spans one node: none of those five flags exists, so its help does not name
them and argparse refuses them. With NCCL_DEBUG=INFO each rank logs RCCL's start-up lines (its
channels `via NET/Socket`: no RDMA here, and `Init COMPLETE`). Its help answers `--help[=all]`
and names every flag it takes; any other flag is refused, as vLLM's argparse does.

Over Ray it asks of the cluster what vLLM's Ray executor asks (an existing Ray cluster, a placement group of N {"GPU": 1} bundles spread over
N nodes, one actor per bundle), and serves /health and /v1/models only when all N actors answered.
Anything else is an error, with the reason on its output, like vLLM's own.

It answers completions as vLLM's OpenAI server does (POST /v1/completions, streamed or not, with
`usage`, `logprobs` (each token's text and log-probability, and `top_logprobs`: the `logprobs`
most likely tokens at each place, text to log-probability, at most --max-logprobs, 20 by default),
`return_token_ids`; POST /tokenize and /detokenize), from a toy model: a word is a token, and the continuation of a
prompt is a fixed function of its tokens, so the same prompt always gets the same answer; at each
place it ranks the words, the greedy one first and a runner-up close behind. STANDIN_WRONG_ANSWERS=N
makes every answer differ from its N-th token on, with words the right answer did not rank: an
image that serves garbage at full speed, for the gate to catch. STANDIN_TIED_ANSWERS=N makes every
answer take the runner-up at its N-th token (the two nearly tied: what another summation order
flips), and part from the right answer from there.

GET /metrics answers as vLLM's does (prometheus_client's text format, vllm/v1/metrics/loggers.py's
names, types, help and `engine`/`model_name` labels): the counters `vllm:prompt_tokens_total` and
`vllm:generation_tokens_total`, the gauges `vllm:num_requests_running`, `vllm:num_requests_waiting`
and `vllm:kv_cache_usage_perc`, all counting what it really served. Like vLLM's, it needs no API key.
While the file STANDIN_STALL_FILE names exists, it stalls as vLLM did in its reported deadlock:
completions are taken and counted as running, and no token comes (the port still takes
connections, /health, /v1/models and /metrics still answer); the requests go on once the file is
gone (at most STANDIN_STALL_MAX_SECONDS, 3600, later).

Extra endpoint for the tests: GET /ranks lists what each actor saw (its node's address and the
NCCL/Gloo/vLLM environment). The token itself is never printed: only whether it arrived, and its
sha256 so a test can tell it is the right one; the same for the API key, which, as vLLM's, comes
from --api-key or VLLM_API_KEY and is required (`Authorization: Bearer KEY`) on every /v1 path. With HF_HUB_OFFLINE=1, every rank looks up the
model's snapshot in its own node's cache (`local_files_only`, as vLLM does), and says what it found.
"""
import argparse
import hashlib
import http.server
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import time

SEEN_ENV = ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_NET_GDR_LEVEL",
            "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
            "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",
            "RAY_memory_monitor_refresh_ms", "HF_HUB_OFFLINE", "NCCL_DEBUG")


def log(level, message):
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"{level} {stamp} [stand-in vllm] {message}", flush=True)


def human_readable_int(text):
    """As vLLM's `human_readable_int` (--max-model-len): 32768, 32k (x1000) or 32K (x1024)."""
    scales = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1] in scales:
        return int(text[:-1]) * scales[text[-1]]
    return int(text)


def parse(argv):
    parser = argparse.ArgumentParser(prog="vllm")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", add_help=False)
    # As vLLM's: `--help` alone, or `--help=all` (or a group, or a keyword).
    serve.add_argument("--help", "-h", nargs="?", const="", default=None, metavar="GROUP")
    serve.add_argument("model", nargs="?")
    serve.add_argument("--tensor-parallel-size", type=int, default=1)
    serve.add_argument("--pipeline-parallel-size", type=int, default=1)
    if os.environ.get("STANDIN_VLLM_WITHOUT_NNODES") != "1":
        serve.add_argument("--nnodes", type=int, default=1)
        serve.add_argument("--node-rank", type=int, default=0)
        serve.add_argument("--master-addr", default="127.0.0.1")
        serve.add_argument("--master-port", type=int, default=29501)
        serve.add_argument("--headless", action="store_true")
    serve.add_argument("--distributed-executor-backend", choices=["ray", "mp"], default=None)
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--served-model-name", default=None)
    serve.add_argument("--revision", default=None)
    serve.add_argument("--max-model-len", type=human_readable_int, default=None)
    # As vLLM's CacheConfig: the KV cache per GPU in bytes (it then skips profiling), its dtype.
    serve.add_argument("--kv-cache-memory-bytes", type=int, default=None)
    serve.add_argument("--kv-cache-dtype", default="auto",
                       choices=["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"])
    # As vLLM's ParallelConfig: data parallel replicas, and the experts spread over them.
    serve.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    serve.add_argument("--data-parallel-size-local", type=int, default=None)
    serve.add_argument("--data-parallel-start-rank", type=int, default=0)
    serve.add_argument("--data-parallel-address", default=None)
    serve.add_argument("--data-parallel-rpc-port", type=int, default=29550)
    serve.add_argument("--data-parallel-backend", choices=["mp", "ray"], default="mp")
    serve.add_argument("--enable-expert-parallel", action="store_true")
    serve.add_argument("--enforce-eager", action="store_true")
    # As vLLM's (the `-cc` shorthand from the versions whose compilation config has
    # cudagraph_mode): a JSON object, refused when it is not one.
    serve.add_argument("--compilation-config", "-cc", dest="compilation_config", type=json.loads, default=None)
    serve.add_argument("--gpu-memory-utilization", type=float, default=None)
    serve.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    for flag, default in (("nnodes", 1), ("node_rank", 0), ("headless", False)):
        if not hasattr(args, flag):
            setattr(args, flag, default)
    if args.help is not None:
        print(serve.format_help())
        sys.exit(0)
    if args.model is None:
        serve.error("the following arguments are required: model")
    return args


def find_model(model, revision):
    """Where this node's cache holds the model's snapshot, offline; None without HF_HUB_OFFLINE."""
    if os.environ.get("HF_HUB_OFFLINE") != "1":
        return None
    try:
        from huggingface_hub import snapshot_download
        return snapshot_download(model, revision=revision, local_files_only=True)
    except Exception as error:  # the test reads what went wrong
        return f"not found: {error}"


def ranks_over_ray(size, model, revision):
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
    alive = [n for n in ray.nodes() if n["Alive"]]
    log("INFO", f"Ray cluster: {len(alive)} node(s): {sorted(n['NodeManagerAddress'] for n in alive)}")
    host_ip = os.environ.get("VLLM_HOST_IP", "")
    if host_ip not in {n["NodeManagerAddress"] for n in alive}:
        raise SystemExit(f"ERROR VLLM_HOST_IP={host_ip!r} is not the address of any Ray node")
    group = placement_group([{"GPU": 1}] * size, strategy="STRICT_SPREAD")
    if not group.wait(timeout_seconds=60):
        raise SystemExit(f"ERROR the placement group of {size} GPU bundles (STRICT_SPREAD) is not ready: "
                         f"the cluster has {len(alive)} node(s) with "
                         f"{sum(n['Resources'].get('GPU', 0) for n in alive)} GPU(s)")

    # As vLLM's workers: a GPU each and no CPU, so a bundle of {"GPU": 1} fits them.
    @ray.remote(num_gpus=1, num_cpus=0)
    class Rank:
        def report(self):
            return {"ip": ray.util.get_node_ip_address(),
                    "env": {k: os.environ[k] for k in SEEN_ENV if k in os.environ},
                    "model": find_model(model, revision)}

    actors = [Rank.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=group, placement_group_bundle_index=i)).remote() for i in range(size)]
    return ray.get([a.report.remote() for a in actors], timeout=60)


def seen_here(model, revision, ip):
    return {"ip": ip, "env": {k: os.environ[k] for k in SEEN_ENV if k in os.environ},
            "model": find_model(model, revision)}


def rccl_started(rank, size):
    """RCCL's start-up lines as NCCL 2.28 prints them with NCCL_DEBUG=INFO over sockets
    (tests/fixtures/rccl-logs/nccl-2.28.9/; this machine has no RDMA): IB is switched off or finds
    no device, the Socket network takes over, the communicator forms, its channels connect."""
    if os.environ.get("NCCL_DEBUG") != "INFO":
        return
    where = f"{socket.gethostname()}:{os.getpid()}:{os.getpid()} [0] NCCL INFO"
    # NCCL names the interface it matched, without the exact-match '=' of NCCL_SOCKET_IFNAME.
    interface = os.environ.get('NCCL_SOCKET_IFNAME', 'eth0').lstrip('^').lstrip('=')
    address = os.environ.get("VLLM_HOST_IP", "127.0.0.1")
    if os.environ.get("NCCL_IB_DISABLE", "0") != "0":
        print(f"{where} NCCL_IB_DISABLE set by environment to {os.environ['NCCL_IB_DISABLE']}.", flush=True)
    else:
        print(f"{where} NET/IB : No device found.", flush=True)
    print(f"{where} Failed to initialize NET plugin IB", flush=True)
    print(f"{where} NET/Socket : Using [0]{interface}:{address}<0>", flush=True)
    print(f"{where} Initialized NET plugin Socket", flush=True)
    print(f"{where} Assigned NET plugin Socket to comm", flush=True)
    print(f"{where} Using network Socket", flush=True)
    init = f"ncclCommInitRankConfig comm 0x5a rank {rank} nranks {size} cudaDev 0 nvmlDev 0 busId c1000 commId 0x1"
    print(f"{where} {init} - Init START", flush=True)
    print(f"{where} {init} - Init COMPLETE", flush=True)
    for peer in ((rank + 1) % size, (rank - 1) % size):
        print(f"{where} Channel 00/0 : {rank}[0] -> {peer}[0] [send] via NET/Socket/0", flush=True)


def rendezvous_head(args, address, port, size):
    """Rank 0: every headless rank connects to ADDRESS:PORT (--master-addr/--master-port, or a data
    parallel deployment's --data-parallel-address/--data-parallel-rpc-port) and says what it saw."""
    ip = os.environ.get("VLLM_HOST_IP", address)
    ranks = {0: seen_here(args.model, args.revision, ip)}
    listener = socket.create_server((address, port))
    listener.settimeout(float(os.environ.get("STANDIN_HEAD_WAIT_SECONDS", "600")))
    log("INFO", f"rank 0 waits for {size - 1} headless rank(s) at {address}:{port}")
    peers = []
    while len(ranks) < size:
        try:
            peer, (peer_ip, _) = listener.accept()
        except socket.timeout:
            missing = sorted(set(range(size)) - set(ranks))
            raise SystemExit(f"ERROR ranks {missing} never connected to {address}:{port}")
        said = json.loads(peer.makefile().readline())
        ranks[said["rank"]] = {**said["seen"], "ip": peer_ip}
        log("INFO", f"rank {said['rank']} joined from {peer_ip}")
        peer.sendall(b"ok\n")
        peers.append(peer)
    rccl_started(0, size)
    return [ranks[rank] for rank in sorted(ranks)], peers


def headless_rank(args, address, port, rank, size):
    """Rank R: connect to rank 0 (retrying while it starts), say what this node saw, stay until it goes."""
    limit = float(os.environ.get("STANDIN_RENDEZVOUS_SECONDS", "30"))
    deadline = time.monotonic() + limit
    while True:
        try:
            connection = socket.create_connection((address, port), timeout=3)
            break
        except ConnectionRefusedError:
            if time.monotonic() >= deadline:
                raise SystemExit(f"ERROR torch.distributed.DistNetworkError: Connection refused by "
                                 f"({address}, {port})")
            time.sleep(0.5)
        except OSError:
            if time.monotonic() >= deadline:
                raise SystemExit(f"ERROR torch.distributed.DistNetworkError: The client socket has timed out after "
                                 f"{int(limit * 1000)}ms while trying to connect to ({address}, {port}).")
    ip = connection.getsockname()[0]
    seen = seen_here(args.model, args.revision, ip)
    connection.sendall((json.dumps({"rank": rank, "seen": seen}) + "\n").encode())
    connection.settimeout(None)
    reader = connection.makefile()
    if reader.readline().strip() != "ok":
        raise SystemExit("ERROR rank 0 did not take this rank in")
    log("INFO", f"headless rank {rank} on {ip} joined rank 0 at {address}:{port}")
    rccl_started(rank, size)
    reader.readline()  # until rank 0 goes
    log("INFO", "rank 0 went away: shutting down")
    sys.exit(0)


def presence(value):
    return f"present (sha256 {hashlib.sha256(value.encode()).hexdigest()})" if value else "absent"


BOS = 1
FIRST_WORD_ID = 100
WORDS = ("the", "harbour", "town", "woke", "slowly", "nets", "quay", "gulls", "baker", "bread", "hill",
         "church", "bridge", "market", "wool", "copper", "apples", "salt", "light", "river", "winter", "long",
         "swallows", "early", "low", "stone", "road", "sea", "wind", "boat")


def word_id(word):
    return FIRST_WORD_ID + int(hashlib.sha256(word.encode()).hexdigest(), 16) % len(WORDS)


def tokenize(text, add_special):
    return ([BOS] if add_special else []) + [word_id(word) for word in text.split()]


# vLLM's default --max-logprobs.
MAX_LOGPROBS = 20
# The toy's ranking at a place: the words at these steps from the greedy one (7 and 30 are
# coprime, so every word has a rank); a wrong answer's word (one step on) ranks 14th.
RANK_STEP = 7


def continuation(prompt_ids, count):
    """The toy model's greedy answer, each token with its ranking (word ids and log-probabilities,
    most likely first): token k is a hash of the prompt and k; wrong or tied from the N-th on."""
    wrong_from = int(os.environ.get("STANDIN_WRONG_ANSWERS", "-1"))
    tied_at = int(os.environ.get("STANDIN_TIED_ANSWERS", "-1"))
    seed = hashlib.sha256(json.dumps(prompt_ids).encode()).hexdigest()
    tokens = []
    for k in range(count):
        index = int(hashlib.sha256(f"{seed}:{k}".encode()).hexdigest(), 16) % len(WORDS)
        if 0 <= wrong_from <= k or 0 <= tied_at < k:
            index = (index + 1) % len(WORDS)
        ranking = [(FIRST_WORD_ID + (index + RANK_STEP * rank) % len(WORDS), logprob(k, rank))
                   for rank in range(len(WORDS))]
        if k == tied_at:
            (first, high), (second, low) = ranking[0], ranking[1]
            ranking[0], ranking[1] = (second, high), (first, low)
        tokens.append(ranking)
    return tokens


def piece(token):
    return " " + WORDS[token - FIRST_WORD_ID]


def detokenize(tokens):
    """vLLM's POST /detokenize: the text of `tokens`, special tokens left out. A word is a token, so
    the text tokenizes back to as many tokens (not always the same ids: the toy hashes words)."""
    return "".join(piece(FIRST_WORD_ID + (token - FIRST_WORD_ID) % len(WORDS)) for token in tokens
                   if token >= FIRST_WORD_ID).lstrip()


def logprob(k, rank=0):
    """The greedy word's, then a runner-up 0.02 nats behind, then the rest far behind."""
    top = -0.7 - 0.1 * (k % 7)
    return top if rank == 0 else top - 0.02 if rank == 1 else top - 2.0 * rank


def completion_logprobs(tokens, top):
    """OpenAI's completion form, as vLLM fills it: `top` most likely tokens at each place (the
    greedy one among them)."""
    offsets, at = [], 0
    for ranking in tokens:
        offsets.append(at)
        at += len(piece(ranking[0][0]))
    return {"text_offset": offsets, "token_logprobs": [ranking[0][1] for ranking in tokens],
            "tokens": [piece(ranking[0][0]) for ranking in tokens],
            "top_logprobs": [{piece(t): value for t, value in ranking[:max(top, 1)]} for ranking in tokens]}


class Served:
    """What it really served, as vLLM's scheduler and its Prometheus logger count it."""

    def __init__(self, model_name):
        self.lock = threading.Lock()
        self.model_name = model_name
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.running = 0
        self.kv_tokens = 0

    def start(self, prompt_tokens):
        with self.lock:
            self.prompt_tokens += prompt_tokens
            self.running += 1
            self.kv_tokens += prompt_tokens

    def generated(self, count=1):
        with self.lock:
            self.generation_tokens += count
            self.kv_tokens += count

    def finish(self, held):
        with self.lock:
            self.running -= 1
            self.kv_tokens -= held

    def exposition(self):
        """prometheus_client's text format 0.0.4: HELP, TYPE, labels sorted, floats."""
        name = self.model_name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        labels = f'{{engine="0",model_name="{name}"}}'
        with self.lock:
            families = [
                ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                 self.running),
                ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0),
                ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                 min(1.0, self.kv_tokens / KV_CACHE_TOKENS)),
                ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", self.prompt_tokens),
                ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
                 self.generation_tokens),
            ]
        lines = []
        for metric, kind, help_text, value in families:
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}", f"{metric}{labels} {float(value)!r}"]
        return ("\n".join(lines) + "\n").encode()


# The toy's KV cache: how many tokens it holds when full.
KV_CACHE_TOKENS = 65536


def wait_while_stalled():
    """While STANDIN_STALL_FILE exists, no token: the request waits (bounded), counted as running."""
    stall_file = os.environ.get("STANDIN_STALL_FILE")
    if not stall_file:
        return
    deadline = time.monotonic() + float(os.environ.get("STANDIN_STALL_MAX_SECONDS", "3600"))
    while os.path.exists(stall_file) and time.monotonic() < deadline:
        time.sleep(0.1)


def compile_graphs(args):
    """As vLLM's compilation/backends.py: torch.compile's graphs under VLLM_CACHE_ROOT (vllm/envs.py,
    default ~/.cache/vllm) in torch_compile_cache/HASH/rank_0_0/backbone, loaded from there when an
    earlier start saved them, else compiled and saved. --enforce-eager compiles nothing (-O0)."""
    if args.enforce_eager:
        return
    root = os.environ.get("VLLM_CACHE_ROOT") or os.path.join(os.path.expanduser("~"), ".cache", "vllm")
    digest = hashlib.sha256(args.model.encode()).hexdigest()[:10]
    backbone = os.path.join(root, "torch_compile_cache", digest, "rank_0_0", "backbone")
    log("INFO", f"Using cache directory: {backbone} for vLLM's torch.compile")
    graph = os.path.join(backbone, "graph")
    if os.path.exists(graph):
        log("INFO", "Directly load the compiled graph(s) for compile range (1, 2048) from the cache, took 0.010 s")
        return
    os.makedirs(backbone, exist_ok=True)
    with open(graph, "w") as saved:
        saved.write(args.model)
    log("INFO", "Compiling a graph for compile range (1, 2048) takes 0.010 s")


def main():
    args = parse(sys.argv[1:])
    log("INFO", "HF_TOKEN: " + presence(os.environ.get("HF_TOKEN")))
    api_key = args.api_key or os.environ.get("VLLM_API_KEY")
    log("INFO", "API key: " + presence(api_key))
    world = args.tensor_parallel_size * args.pipeline_parallel_size
    log("INFO", f"args: model={args.model} tp={args.tensor_parallel_size} pp={args.pipeline_parallel_size} "
                f"backend={args.distributed_executor_backend} nnodes={args.nnodes} rank={args.node_rank} "
                f"port={args.port} enforce_eager={args.enforce_eager} "
                f"compilation_config={json.dumps(args.compilation_config, sort_keys=True)} "
                f"max_model_len={args.max_model_len} dp={args.data_parallel_size} "
                f"expert_parallel={args.enable_expert_parallel}")
    if args.kv_cache_memory_bytes:
        # vLLM's gpu_worker.py when the cache's size is given: no profiling, the size as asked.
        gib = args.kv_cache_memory_bytes / 2**30
        log("INFO", f"reserved {gib:.2f} GiB memory for KV Cache as specified by kv_cache_memory_bytes config "
                    "and skipped memory profiling. This does not respect the gpu_memory_utilization config.")
    signal.signal(signal.SIGTERM, lambda *_: (log("INFO", "Shutting down"), os._exit(0)))
    peers = []
    if args.distributed_executor_backend == "ray":
        ranks = ranks_over_ray(world, args.model, args.revision)
    elif args.nnodes > 1:
        if world != args.nnodes:
            raise SystemExit(f"ERROR world size {world} over {args.nnodes} nodes needs {world / args.nnodes:g} "
                             f"GPU(s) per node: this node has one")
        if args.headless != (args.node_rank > 0):
            raise SystemExit("ERROR every node but rank 0 runs --headless")
        if args.headless:
            headless_rank(args, args.master_addr, args.master_port, args.node_rank, args.nnodes)
        ranks, peers = rendezvous_head(args, args.master_addr, args.master_port, args.nnodes)
    elif args.data_parallel_size > 1:
        # A data parallel deployment across nodes (vLLM's docs/serving/data_parallel_deployment.md):
        # each node runs --data-parallel-size-local engines from --data-parallel-start-rank; the
        # head's API server meets the others at --data-parallel-address:--data-parallel-rpc-port.
        local = args.data_parallel_size if args.data_parallel_size_local is None else args.data_parallel_size_local
        if world * local != 1:
            raise SystemExit(f"ERROR {local} local DP rank(s) of TP {args.tensor_parallel_size} x PP "
                             f"{args.pipeline_parallel_size} need that many GPUs: this node has one")
        if args.headless != (args.data_parallel_start_rank > 0):
            raise SystemExit("ERROR every node but the one with DP rank 0 runs --headless")
        if args.data_parallel_address is None:
            raise SystemExit("ERROR a data parallel deployment across nodes needs --data-parallel-address")
        if args.headless:
            headless_rank(args, args.data_parallel_address, args.data_parallel_rpc_port,
                          args.data_parallel_start_rank, args.data_parallel_size)
        ranks, peers = rendezvous_head(args, args.data_parallel_address, args.data_parallel_rpc_port,
                                       args.data_parallel_size)
    elif world == 1:
        ranks = [seen_here(args.model, args.revision, os.environ.get("VLLM_HOST_IP", ""))]
    else:
        raise SystemExit("ERROR parallelism across GPUs of one node needs that many GPUs: this node has one")
    for rank, seen in enumerate(ranks):
        log("INFO", f"rank {rank} on {seen['ip']}: {json.dumps(seen['env'], sort_keys=True)} model: {seen['model']}")
    compile_graphs(args)
    load = float(os.environ.get("STANDIN_LOAD_SECONDS", "0"))
    if load:
        log("INFO", f"Loading weights took {load:.2f} seconds")
        time.sleep(load)
    name = args.served_model_name or args.model
    served = Served(name)
    # As vLLM's ModelCard: the context it serves (the model's own when not asked; the toy's 4096).
    max_model_len = args.max_model_len or 4096
    models = {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "vllm", "root": args.model,
                                          "max_model_len": max_model_len}]}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/metrics":
                body = served.exposition()
                self.send_response(200)
                self.send_header("content-type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            bodies = {"/health": b"", "/v1/models": json.dumps(models).encode(), "/ranks": json.dumps(ranks).encode()}
            if self.path not in bodies:
                self.send_error(404)
                return
            if self.unauthorized():
                return self.answer(401, {"error": "Unauthorized"})
            body = bodies[self.path]
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
            except ValueError as error:
                return self.answer(400, {"object": "error", "message": f"not JSON: {error}"})
            if self.path == "/tokenize":
                tokens = tokenize(body.get("prompt", ""), body.get("add_special_tokens", True))
                return self.answer(200, {"count": len(tokens), "max_model_len": max_model_len, "tokens": tokens})
            if self.path == "/detokenize":
                return self.answer(200, {"prompt": detokenize(body.get("tokens", []))})
            if self.path != "/v1/completions":
                return self.send_error(404)
            if self.unauthorized():
                return self.answer(401, {"error": "Unauthorized"})
            if body.get("model") != name:
                return self.answer(404, {"object": "error", "message": f"The model `{body.get('model')}` does not exist."})
            top = body.get("logprobs")
            if top is not None and top > MAX_LOGPROBS:
                return self.answer(400, {"object": "error", "type": "BadRequestError", "code": 400,
                                         "message": f"Requested sample logprobs of {top}, which is greater than max "
                                                    f"allowed: {MAX_LOGPROBS}"})
            prompt = body.get("prompt", "")
            prompt_ids = prompt if isinstance(prompt, list) else tokenize(prompt, True)
            served.start(len(prompt_ids))
            produced = 0
            try:
                wait_while_stalled()
                ranked = continuation(prompt_ids, int(body.get("max_tokens", 16)))
                tokens = [ranking[0][0] for ranking in ranked]
                usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(tokens),
                         "total_tokens": len(prompt_ids) + len(tokens)}
                head = {"id": "cmpl-standin", "object": "text_completion", "created": int(time.time()),
                        "model": name}
                if not body.get("stream"):
                    served.generated(len(tokens))
                    produced = len(tokens)
                    choice = {"index": 0, "text": "".join(piece(t) for t in tokens), "finish_reason": "length",
                              "stop_reason": None,
                              "logprobs": completion_logprobs(ranked, top) if top is not None else None,
                              "token_ids": tokens if body.get("return_token_ids") else None}
                    return self.answer(200, {**head, "choices": [choice], "usage": usage})
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for k, token in enumerate(tokens):
                    served.generated()
                    produced += 1
                    last = k == len(tokens) - 1
                    choice = {"index": 0, "text": piece(token), "logprobs": None,
                              "finish_reason": "length" if last else None, "stop_reason": None}
                    self.wfile.write(f"data: {json.dumps({**head, 'choices': [choice]})}\n\n".encode())
                    self.wfile.flush()
                if (body.get("stream_options") or {}).get("include_usage"):
                    self.wfile.write(f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            finally:
                served.finish(len(prompt_ids) + produced)

        def unauthorized(self):
            """As vLLM's AuthenticationMiddleware: every /v1 path wants the key, /health does not."""
            return api_key and self.path.startswith("/v1") and self.headers.get("Authorization") != f"Bearer {api_key}"

        def answer(self, status, value):
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server((args.host, args.port), Handler)
    log("INFO", f"Starting vLLM API server on http://{args.host}:{args.port}")
    server.serve_forever()


if __name__ == "__main__":
    main()
