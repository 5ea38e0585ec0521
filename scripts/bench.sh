#!/usr/bin/env bash
# Benchmarks, side by side in one run (hyperfine), on this machine:
#   1. a no-op `strix-toolbox refresh` against the seed script's podman-CLI sequence, and against
#      the API floor (the registry's manifest HEAD and the toolbox's inspect, each by curl);
#   2. `strix-toolbox enter NAME -- true` against `podman exec NAME true`;
#   3. `strix-toolbox detect` (it runs on every refresh), and `verify` on the running toolbox;
#   4. a no-op `cluster refresh` over 1, 2 and 3 nodes against the same refresh run node after node
#      over plain ssh (nodes: network namespaces with sshd, scripts/bench/cluster-nodes.sh);
#   5. the spread, with the upstream registry behind a rate-limited uplink (BENCH_UPLINK, tc tbf):
#      a 3-node `cluster refresh` of a new image against one node pulling it alone (and against the
#      3 nodes each pulling it, --spread off); then a no-op 3-node `cluster refresh` against one
#      node's refresh over ssh; the cluster commands each with a new ssh login (--ssh-persist 0) and
#      over the masters an earlier command left up (the default; the warm-up runs open them);
#   6. `cluster launch` to serving on 3 nodes, without Ray (the default) and with `--backend ray`,
#      against the same Ray steps typed by hand over ssh (Ray's head, each worker, `vllm serve`,
#      polling /health): tests/testsuite/bench_launch.rs;
#   8. `plan MODEL` of a Hub model with a 65.5 GB checkpoint (sparse shards on the Hub stand-in)
#      against huggingface_hub's get_safetensors_metadata: the time, and the bytes each read
#      (tests/testsuite/bench_plan.rs);
#   9. with the real vLLM's CPU build on one namespace node: `launch` to the first answer against
#      `vllm serve` typed by hand with the plan's flags, and `bench` against `vllm bench serve` on
#      the same server and lengths (tests/testsuite/bench_vllm.rs);
#   7. `strix-toolbox bench` beside AIPerf (PyPI) on the same llama-server endpoint: output tokens/s
#      within 10% (scripts/bench/bench-vs-aiperf.sh).
# Everything runs against private podman API services and a registry started here in a namespace of
# its own (the "upstream", reached as 127.0.0.1:PORT through relays), with fake host trees
# (tests/fixtures/strix-thunderbolt-only) whose device nodes are made by mknod.
# Needs root and scripts/test-deps.sh. Results: stdout and target/bench/*.md.
# BENCH_ONLY="cluster spread-noop" runs only those parts (refresh, floor, enter, verify, detect,
# cluster, spread-new, spread-noop, launch, plan, vllm, aiperf); the setup they need always runs.
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root=$PWD
runs=${BENCH_RUNS:-20}
# The spread's runs each move the new image through the uplink: fewer of them.
spread_runs=${BENCH_SPREAD_RUNS:-5}
uplink_rate=${BENCH_UPLINK:-40mbit}
new_image_mib=${BENCH_IMAGE_MIB:-32}

# The part NAME is to run.
wanted() { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }

work=$(mktemp -d /tmp/strix-bench.XXXXXX)
pids=()
WORK=$work
source scripts/bench/cluster-nodes.sh
spread_port=$((14000 + RANDOM % 900))
relay_port=$((spread_port + 1000))
cleanup() {
  # The ssh masters the cluster commands left up for the next one.
  if [ -f "$work/ssh_config" ]; then
    "$repo_root/target/release/strix-toolbox" cluster disconnect --ssh-config "$work/ssh_config" \
      --nodes node1,node2,node3 >/dev/null 2>&1 || true
  fi
  stop_cluster_nodes
  # The cluster CA a spread installed for its registry and its relay (this run's ports alone).
  local p
  for p in "$spread_port" "$relay_port"; do
    rm -rf /etc/containers/certs.d/192.168.2.1:"$p" /etc/docker/certs.d/192.168.2.1:"$p"
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  podman rm -f bench seed >/dev/null 2>&1 || true
  # podman 4.3 leaves a conmon per exec session; all of them name $work. SIGKILL: a terminated
  # conmon runs podman's cleanup first, which re-creates files under $work.
  pkill -9 -f "$work" 2>/dev/null || true
  sleep 0.5
  # vfs layers can be read-only directories.
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work" || echo "bench: could not remove $work entirely" >&2
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/registry" "$work/storage/root" "$work/storage/run"
# The upstream registry, in a namespace of its own behind a veth (10.231.0.1 here, .2 there): the
# one place every byte from upstream crosses, which `tc` rate-limits for the spread's benchmarks.
upstream_ns="strixb$$up"
upstream=10.231.0.2:$port
ip netns add "$upstream_ns"
ip -n "$upstream_ns" link set lo up
ip link add "sb$$u" type veth peer name up0 netns "$upstream_ns"
ip addr add 10.231.0.1/30 dev "sb$$u"
ip link set "sb$$u" up
ip -n "$upstream_ns" addr add 10.231.0.2/30 dev up0
ip -n "$upstream_ns" link set up0 up
cat > "$work/registry.yml" <<YAML
version: 0.1
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: $upstream
YAML
cat > "$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
CONF
cat > "$work/registries.conf" <<CONF
[[registry]]
location = "127.0.0.1:$port"
insecure = true
CONF
cat > "$work/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$work/storage/root"
runroot = "$work/storage/run"
CONF
export CONTAINERS_CONF=$work/containers.conf
export CONTAINERS_REGISTRIES_CONF=$work/registries.conf
export CONTAINERS_STORAGE_CONF=$work/storage.conf
# Only strix-toolbox talks to the API service; podman's CLI (the baseline) stays local.
api=unix://$work/podman.sock
export XDG_RUNTIME_DIR=$work/run
mkdir -p "$XDG_RUNTIME_DIR"

ip netns exec "$upstream_ns" docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
pids+=($!)
# This machine reaches it as 127.0.0.1:PORT too, as the nodes do.
socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "TCP:$upstream" </dev/null >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done
podman system service --time=0 "$api" </dev/null >"$work/podman.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/podman.sock" ] && break; sleep 0.1; done

# Stand-in image: busybox rootfs with the OCI created label, pushed to the loopback registry.
mkdir -p "$work/rootfs/bin" "$work/rootfs/etc"
cp /bin/busybox "$work/rootfs/bin/busybox"
for tool in sh sleep true cat dd env find; do ln -sf busybox "$work/rootfs/bin/$tool"; done
echo "root:x:0:0:root:/root:/bin/sh" > "$work/rootfs/etc/passwd"
echo "root:x:0:" > "$work/rootfs/etc/group"
tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
ref=127.0.0.1:$port/bench/vllm:latest
repo=127.0.0.1:$port/bench/vllm
podman import -q --change 'LABEL org.opencontainers.image.created=2026-11-01T10:00:00Z' \
  --change 'CMD ["/bin/sh"]' "$work/rootfs.tar" "$ref" >/dev/null
podman push -q "$ref"

# Fake host tree with real device nodes.
host=$work/host
cp -r tests/fixtures/strix-thunderbolt-only "$host"
grep -v '^#' "$host/devices.txt" | while read -r kind major minor node mode gid; do
  mkdir -p "$(dirname "$host/$node")"
  mknod -m "$mode" "$host/$node" "$kind" "$major" "$minor"
  chgrp "$gid" "$host/$node"
done

cargo build --release --quiet
strix="env CONTAINER_HOST=$api $repo_root/target/release/strix-toolbox"
flags=(--device "$host/dev/kfd:/dev/kfd" --device "$host/dev/dri:/dev/dri" --group-add 39 --group-add 105
  --security-opt seccomp=unconfined)

# First refresh creates; every benchmarked one is a no-op.
$strix --host-root "$host" refresh --image "$ref" --name bench --manager native
mkdir -p target/bench

if wanted refresh; then
echo "== refresh: no-op strix-toolbox vs the seed's podman CLI sequence"
hyperfine --warmup 2 --runs "$runs" --export-markdown target/bench/refresh.md \
  -n "seed script sequence (podman CLI)" "bash scripts/bench/seed-refresh.sh seed $ref $repo ${flags[*]}" \
  -n "strix-toolbox refresh (no-op)" "$strix --host-root $host refresh --image $ref --name bench --manager native"
fi

# The floor a no-op refresh cannot go under: what it must learn, asked by curl (the tag's digest
# from the registry, the toolbox from the API service).
manifest_types="application/vnd.oci.image.index.v1+json,application/vnd.oci.image.manifest.v1+json"
manifest_types+=",application/vnd.docker.distribution.manifest.list.v2+json"
manifest_types+=",application/vnd.docker.distribution.manifest.v2+json"
floor="curl -sfI -o /dev/null -H 'Accept: $manifest_types' http://127.0.0.1:$port/v2/bench/vllm/manifests/latest"
floor+=" && curl -sf -o /dev/null --unix-socket $work/podman.sock http://d/v4.0.0/libpod/containers/bench/json"
if wanted floor; then
echo "== refresh: no-op strix-toolbox vs the API floor (a manifest HEAD and a container inspect, by curl)"
hyperfine --warmup 2 --runs "$runs" --export-markdown target/bench/refresh-floor.md \
  -n "API floor (curl)" "$floor" \
  -n "strix-toolbox refresh (no-op)" "$strix --host-root $host refresh --image $ref --name bench --manager native"
fi

if wanted enter; then
echo "== enter: strix-toolbox enter -- true vs podman exec"
$strix enter bench -- true
hyperfine --warmup 3 --runs "$runs" --export-markdown target/bench/enter.md \
  -n "podman exec bench true" "podman exec bench true" \
  -n "strix-toolbox enter bench -- true" "$strix enter bench -- true"
fi

if wanted verify; then
echo "== verify a running toolbox (every check it has: devices open, limits, groups, env, RCCL search)"
hyperfine -N --warmup 2 --runs "$runs" --export-markdown target/bench/verify.md \
  -n "strix-toolbox verify bench" "$strix --host-root $host verify bench"
fi

if wanted detect; then
echo "== detect"
# -N: no shell in between; detect takes less time than hyperfine can calibrate a shell away.
hyperfine -N --warmup 3 --runs "$runs" --export-markdown target/bench/detect.md \
  -n "strix-toolbox detect" "$strix --host-root $host detect" \
  -n "strix-toolbox detect --json" "$strix --host-root $host detect --json"
fi

# The spread's registry: a stand-in for registry:2 made of Debian's docker-registry (TESTBED.md),
# pushed upstream like any image; the head pulls it once, before the timed runs.
registry_root=$work/registry-root
mkdir -p "$registry_root"/{bin,lib/x86_64-linux-gnu,lib64,etc/docker/registry,var/lib/registry,tmp}
cp /usr/bin/docker-registry "$registry_root/bin/registry"
cp /lib/x86_64-linux-gnu/libc.so.6 "$registry_root/lib/x86_64-linux-gnu/"
cp /lib64/ld-linux-x86-64.so.2 "$registry_root/lib64/"
chmod 1777 "$registry_root/tmp"
printf 'version: 0.1\nstorage:\n  filesystem: {rootdirectory: /var/lib/registry}\nhttp:\n  addr: :5000\n' \
  > "$registry_root/etc/docker/registry/config.yml"
tar -C "$registry_root" -cf "$work/registry-root.tar" .
registry_image=127.0.0.1:$port/strix-bench/registry:2.8
podman import -q --change 'ENTRYPOINT ["/bin/registry"]' --change 'CMD ["serve","/etc/docker/registry/config.yml"]' \
  "$work/registry-root.tar" "$registry_image" >/dev/null
podman push -q "$registry_image"
spread_flags="--spread-port $spread_port --spread-relay-port $relay_port --spread-registry-image $registry_image"

echo "== cluster refresh (no-op) vs the same refresh node after node over ssh"
mkdir -p "$work/bin"
ln -sf "$repo_root/target/release/strix-toolbox" "$work/bin/strix-toolbox"
UPSTREAM=$upstream PORT=$port start_cluster_nodes 3 tests/fixtures/strix-thunderbolt-only "$work/bin"
node_podman() { podman --remote --url "unix://$work/node$1/podman.sock" "${@:2}"; }
node_podman 1 pull -q "$registry_image" >/dev/null
cluster="$repo_root/target/release/strix-toolbox cluster refresh --ssh-config $work/ssh_config $spread_flags --image $ref --name bench --manager native --nodes"
node_refresh="strix-toolbox refresh --image $ref --name bench --manager native"
$cluster node1,node2,node3 >/dev/null
if wanted cluster; then
hyperfine --warmup 2 --runs "$runs" --export-markdown target/bench/cluster.md \
  -n "ssh refresh, 1 node" "ssh -F $work/ssh_config node1 $node_refresh" \
  -n "ssh refresh node after node, 2 nodes" "for n in node1 node2; do ssh -F $work/ssh_config \$n $node_refresh; done" \
  -n "ssh refresh node after node, 3 nodes" "for n in node1 node2 node3; do ssh -F $work/ssh_config \$n $node_refresh; done" \
  -n "cluster refresh, 1 node" "$cluster node1" \
  -n "cluster refresh, 2 nodes" "$cluster node1,node2" \
  -n "cluster refresh, 3 nodes" "$cluster node1,node2,node3" \
  -n "cluster refresh, 3 nodes, new ssh logins" "$cluster node1,node2,node3 --ssh-persist 0"
fi

# The spread. A new image: the stand-in's root and BENCH_IMAGE_MIB of random bytes (one layer that
# compresses to itself). Before each timed run, the nodes it goes to lose it again (toolbox and
# image), and the head's registry its storage: every run fetches it from upstream anew.
mkdir -p "$work/rootfs/data"
head -c "$((new_image_mib << 20))" /dev/urandom > "$work/rootfs/data/blob"
tar -C "$work/rootfs" -cf "$work/rootfs-new.tar" .
new_ref=127.0.0.1:$port/bench/vllm:new
podman import -q --change 'LABEL org.opencontainers.image.created=2026-11-08T10:00:00Z' \
  --change 'CMD ["/bin/sh"]' "$work/rootfs-new.tar" "$new_ref" >/dev/null
podman push -q "$new_ref"
# By id: the nodes' copies carry other names (the pin the refresh gave them).
new_id=$(podman image inspect --format '{{.Id}}' "$new_ref")
# `forget NODE...`: those nodes lose the toolbox and the new image, the head's registry its storage.
cat > "$work/forget" <<SCRIPT
#!/usr/bin/env bash
for i in "\$@"; do
  podman --remote --url "unix://$work/node\$i/podman.sock" rm -f bench bench-strix-new bench-strix-old >/dev/null 2>&1
  podman --remote --url "unix://$work/node\$i/podman.sock" rmi -f "$new_id" >/dev/null 2>&1
done
rm -rf "$work/node1/home/.local/share/strix-toolbox/registry/storage/docker"
true
SCRIPT
chmod +x "$work/forget"
tc -n "$upstream_ns" qdisc add dev up0 root tbf rate "$uplink_rate" burst 256kb latency 400ms
strix=$repo_root/target/release/strix-toolbox
new_cluster="$strix cluster refresh --ssh-config $work/ssh_config $spread_flags --image $new_ref --name bench --manager native --nodes node1,node2,node3"
new_single="ssh -F $work/ssh_config node1 strix-toolbox refresh --image $new_ref --name bench --manager native"

if wanted spread-new; then
echo "== spread: a new image (${new_image_mib} MiB) to 3 nodes vs one node pulling it alone, upstream at $uplink_rate"
hyperfine --warmup 1 --runs "$spread_runs" --export-markdown target/bench/spread-new-image.md \
  --prepare "$work/forget 1" -n "one node pulls it alone (refresh over ssh)" "$new_single" \
  --prepare "$work/forget 1 2 3" -n "cluster refresh, 3 nodes, spread from the head" "$new_cluster" \
  --prepare "$work/forget 1 2 3" -n "cluster refresh, 3 nodes, --spread off" "$new_cluster --spread off"
fi

if wanted spread-noop; then
echo "== spread: no-op 3-node cluster refresh vs one node's refresh over ssh, upstream at $uplink_rate"
$new_cluster >/dev/null
# Each cluster command with a new ssh login per node (--ssh-persist 0), and over the masters the
# warm-up runs left up (the default: what every command after the first gets).
hyperfine --warmup 2 --runs "$runs" --export-markdown target/bench/spread-noop.md \
  -n "ssh refresh, 1 node (no-op)" "$new_single" \
  -n "cluster refresh, 3 nodes (no-op), new ssh logins" "$new_cluster --ssh-persist 0" \
  -n "cluster refresh, 3 nodes (no-op), masters reused" "$new_cluster" \
  -n "cluster refresh, 3 nodes (no-op), --spread off, new ssh logins" "$new_cluster --spread off --ssh-persist 0" \
  -n "cluster refresh, 3 nodes (no-op), --spread off, masters reused" "$new_cluster --spread off"
fi

if wanted launch; then
echo "== launch: cluster launch to serving without Ray and over Ray vs the Ray steps by hand over ssh, 3 nodes"
# The test suite's cluster (Thunderbolt nodes, podman inside each, the node image with Ray and the
# stand-in vLLM): the benchmark is an ignored test of the suite, so it shares that wiring.
cargo test --release --quiet --test testsuite bench_launch -- --ignored --nocapture
fi

if wanted plan; then
echo "== plan: plan MODEL of a 65.5 GB Hub checkpoint vs huggingface_hub's safetensors metadata read"
cargo test --release --quiet --test testsuite bench_plan -- --ignored --nocapture
fi

if wanted vllm; then
echo "== vllm: the real vLLM (CPU build): launch vs vllm serve by hand to the first answer; bench vs vllm bench serve"
# tests/testsuite/bench_vllm.rs, on one namespace node with the CPU image (scripts/vllm-cpu.sh).
bash scripts/vllm-cpu.sh >/dev/null
cargo test --release --quiet --test testsuite bench_vllm -- --ignored --nocapture --test-threads 1
fi

if wanted aiperf; then
echo "== bench: strix-toolbox bench beside AIPerf on one llama-server (tiny llama model, CPU), output tokens/s"
# Its own script: it needs no root and nothing above (scripts/bench/bench-vs-aiperf.sh).
bash scripts/bench/bench-vs-aiperf.sh
fi
