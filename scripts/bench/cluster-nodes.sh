#!/usr/bin/env bash
# Cluster nodes for the benchmark (sourced by scripts/bench.sh), wired like the real ones and like
# the test suite's (tests/testsuite/support/cluster): each node is a network namespace with its own
# sshd, reached over a management veth; its own podman API service runs inside it (so its
# `--network host` containers see the node's interfaces); the nodes share a Thunderbolt link
# (`thunderbolt0` on a bridge, 192.168.2.I/24, MTU 65520); and they reach the upstream registry
# only as 127.0.0.1:PORT through relays on their management veth (the "uplink"), which the caller
# can rate-limit where it serves the registry. Traffic stays on addresses inside namespaces made here.
# Needs: WORK (a directory), UPSTREAM (the registry's host:port as the relays reach it), PORT (the
# name nodes use: 127.0.0.1:PORT), CONTAINERS_CONF and CONTAINERS_REGISTRIES_CONF exported, root.
#   start_cluster_nodes N FIXTURE BIN_DIR   → $WORK/ssh_config with Host node1..nodeN
#   stop_cluster_nodes

cluster_ns_prefix="strixb$$"

start_cluster_nodes() {
  local count=$1 fixture=$2 bin_dir=$3 i
  local switch="${cluster_ns_prefix}sw"
  mkdir -p /run/sshd "$WORK/ssh"
  ssh-keygen -q -t ed25519 -N '' -f "$WORK/ssh/id"
  : > "$WORK/ssh_config"
  ip netns add "$switch"
  ip -n "$switch" link add br0 mtu 65520 type bridge
  ip -n "$switch" link set br0 up
  for i in $(seq "$count"); do
    local ns="${cluster_ns_prefix}n$i" node="$WORK/node$i"
    mkdir -p "$node/home" "$node/run" "$node/storage"
    # Management link: 10.231.I.1 here, 10.231.I.2 in the node.
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "sb$$m$i" type veth peer name mgmt0 netns "$ns"
    ip addr add "10.231.$i.1/30" dev "sb$$m$i"
    ip link set "sb$$m$i" up
    ip -n "$ns" addr add "10.231.$i.2/30" dev mgmt0
    ip -n "$ns" link set mgmt0 up
    # The cluster link.
    ip -n "$ns" link add thunderbolt0 mtu 65520 type veth peer name "port$i" mtu 65520 netns "$switch"
    ip -n "$switch" link set "port$i" master br0 up
    ip -n "$ns" addr add "192.168.2.$i/24" dev thunderbolt0
    ip -n "$ns" link set thunderbolt0 up
    # The uplink: 127.0.0.1:PORT in the node, relayed to the upstream registry.
    socat "TCP-LISTEN:$PORT,bind=10.231.$i.1,fork,reuseaddr" "TCP:$UPSTREAM" </dev/null >/dev/null 2>&1 &
    pids+=($!)
    nsenter --net="/run/netns/$ns" socat "TCP-LISTEN:$PORT,bind=127.0.0.1,fork,reuseaddr" "TCP:10.231.$i.1:$PORT" \
      </dev/null >/dev/null 2>&1 &
    pids+=($!)

    cp -r "$fixture" "$node/host"
    # A boot id of the node's own, as a real node's /proc has (the namespaces share the machine's).
    mkdir -p "$node/host/proc/sys/kernel/random"
    cat /proc/sys/kernel/random/uuid > "$node/host/proc/sys/kernel/random/boot_id"
    grep -v '^#' "$node/host/devices.txt" | while read -r kind major minor path mode gid; do
      mkdir -p "$(dirname "$node/host/$path")"
      mknod -m "$mode" "$node/host/$path" "$kind" "$major" "$minor"
      chgrp "$gid" "$node/host/$path"
    done

    cat > "$node/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$node/storage/root"
runroot = "$node/storage/run"
CONF
    CONTAINERS_STORAGE_CONF="$node/storage.conf" XDG_RUNTIME_DIR="$node/run" \
      nsenter --net="/run/netns/$ns" podman system service --time=0 "unix://$node/podman.sock" \
      </dev/null >"$node/podman.log" 2>&1 &
    pids+=($!)

    ssh-keygen -q -t ed25519 -N '' -f "$node/hostkey"
    cp "$WORK/ssh/id.pub" "$node/authorized_keys"
    cat > "$node/sshd_config" <<CONF
ListenAddress 10.231.$i.2
HostKey $node/hostkey
PidFile $node/sshd.pid
AuthorizedKeysFile $node/authorized_keys
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
SetEnv CONTAINER_HOST=unix://$node/podman.sock STRIX_HOST_ROOT=$node/host XDG_RUNTIME_DIR=$node/run HOME=$node/home PATH=$bin_dir:/usr/sbin:/usr/bin:/sbin:/bin NO_COLOR=1 CONTAINERS_CONF=$CONTAINERS_CONF CONTAINERS_REGISTRIES_CONF=$CONTAINERS_REGISTRIES_CONF
CONF
    ip netns exec "$ns" /usr/sbin/sshd -f "$node/sshd_config" -E "$node/sshd.log"
    cat >> "$WORK/ssh_config" <<CONF
Host node$i
  HostName 10.231.$i.2
  User root
  IdentityFile $WORK/ssh/id
  IdentitiesOnly yes
  UserKnownHostsFile $WORK/ssh/known_hosts
  StrictHostKeyChecking accept-new
  BatchMode yes
CONF
  done
  for i in $(seq "$count"); do
    for _ in $(seq 100); do [ -S "$WORK/node$i/podman.sock" ] && break; sleep 0.1; done
  done
}

stop_cluster_nodes() {
  local node ns
  for node in "$WORK"/node*; do
    if [ -f "$node/sshd.pid" ]; then kill "$(cat "$node/sshd.pid")" 2>/dev/null || true; fi
    # Containers first (the registry container, toolboxes), while the node's podman still answers.
    if [ -S "$node/podman.sock" ]; then
      podman --remote --url "unix://$node/podman.sock" rm --all --force --time 0 >/dev/null 2>&1 || true
    fi
  done
  for ns in $(ip netns list | awk '{print $1}' | grep "^${cluster_ns_prefix}" || true); do
    ip netns del "$ns"
  done
}
