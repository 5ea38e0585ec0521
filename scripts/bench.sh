#!/usr/bin/env bash
# Benchmarks, side by side in one run (hyperfine), on this machine:
#   1. a no-op `strix-toolbox refresh` against the seed script's podman-CLI sequence;
#   2. `strix-toolbox enter NAME -- true` against `podman exec NAME true`;
#   3. `strix-toolbox detect` (it runs on every refresh), and `verify` on the running toolbox;
#   4. a no-op `cluster refresh` over 1, 2 and 3 nodes against the same refresh run node after node
#      over plain ssh (nodes: network namespaces with sshd, scripts/bench/cluster-nodes.sh).
# Everything runs against a private podman API service and a loopback registry started here,
# with a fake host tree (tests/fixtures/strix-thunderbolt-only) whose device nodes are made by mknod.
# Needs root and scripts/test-deps.sh. Results: stdout and target/bench/*.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root=$PWD
runs=${BENCH_RUNS:-20}

work=$(mktemp -d /tmp/strix-bench.XXXXXX)
pids=()
WORK=$work
source scripts/bench/cluster-nodes.sh
cleanup() {
  stop_cluster_nodes
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
cat > "$work/registry.yml" <<YAML
version: 0.1
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$port
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

docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
pids+=($!)
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

echo "== refresh: no-op strix-toolbox vs the seed's podman CLI sequence"
hyperfine --warmup 2 --runs "$runs" --export-markdown target/bench/refresh.md \
  -n "seed script sequence (podman CLI)" "bash scripts/bench/seed-refresh.sh seed $ref $repo ${flags[*]}" \
  -n "strix-toolbox refresh (no-op)" "$strix --host-root $host refresh --image $ref --name bench --manager native"

echo "== enter: strix-toolbox enter -- true vs podman exec"
$strix enter bench -- true
hyperfine --warmup 3 --runs "$runs" --export-markdown target/bench/enter.md \
  -n "podman exec bench true" "podman exec bench true" \
  -n "strix-toolbox enter bench -- true" "$strix enter bench -- true"

echo "== verify a running toolbox (every check it has: devices open, limits, groups, env, RCCL search)"
hyperfine -N --warmup 2 --runs "$runs" --export-markdown target/bench/verify.md \
  -n "strix-toolbox verify bench" "$strix --host-root $host verify bench"

echo "== detect"
# -N: no shell in between; detect takes less time than hyperfine can calibrate a shell away.
hyperfine -N --warmup 3 --runs "$runs" --export-markdown target/bench/detect.md \
  -n "strix-toolbox detect" "$strix --host-root $host detect" \
  -n "strix-toolbox detect --json" "$strix --host-root $host detect --json"

echo "== cluster refresh (no-op) vs the same refresh node after node over ssh"
mkdir -p "$work/bin"
ln -sf "$repo_root/target/release/strix-toolbox" "$work/bin/strix-toolbox"
start_cluster_nodes 3 tests/fixtures/strix-thunderbolt-only "$work/bin"
cluster="$repo_root/target/release/strix-toolbox cluster refresh --ssh-config $work/ssh_config --image $ref --name bench --manager native --nodes"
node_refresh="strix-toolbox refresh --image $ref --name bench --manager native"
$cluster node1,node2,node3 >/dev/null
hyperfine --warmup 2 --runs "$runs" --export-markdown target/bench/cluster.md \
  -n "ssh refresh, 1 node" "ssh -F $work/ssh_config node1 $node_refresh" \
  -n "ssh refresh node after node, 2 nodes" "for n in node1 node2; do ssh -F $work/ssh_config \$n $node_refresh; done" \
  -n "ssh refresh node after node, 3 nodes" "for n in node1 node2 node3; do ssh -F $work/ssh_config \$n $node_refresh; done" \
  -n "cluster refresh, 1 node" "$cluster node1" \
  -n "cluster refresh, 2 nodes" "$cluster node1,node2" \
  -n "cluster refresh, 3 nodes" "$cluster node1,node2,node3"
