#!/usr/bin/env bash
# Cluster nodes for the benchmark (sourced by scripts/bench.sh): each node is a network namespace
# with its own sshd, reached over a management veth; its strix-toolbox runs against its own podman
# API service and fake host tree (sshd's SetEnv). Traffic stays on addresses inside namespaces
# made here. Needs: WORK (a directory), REGISTRY_CONF/CONTAINERS_CONF set, root.
#   start_cluster_nodes N FIXTURE BIN_DIR   → $WORK/ssh_config with Host node1..nodeN
#   stop_cluster_nodes

cluster_ns_prefix="strixb$$"

start_cluster_nodes() {
  local count=$1 fixture=$2 bin_dir=$3 i
  mkdir -p /run/sshd "$WORK/ssh"
  ssh-keygen -q -t ed25519 -N '' -f "$WORK/ssh/id"
  : > "$WORK/ssh_config"
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

    cp -r "$fixture" "$node/host"
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
      podman system service --time=0 "unix://$node/podman.sock" </dev/null >"$node/podman.log" 2>&1 &
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
SetEnv CONTAINER_HOST=unix://$node/podman.sock STRIX_HOST_ROOT=$node/host XDG_RUNTIME_DIR=$node/run HOME=$node/home PATH=$bin_dir:/usr/sbin:/usr/bin:/sbin:/bin NO_COLOR=1
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
  done
  for ns in $(ip netns list | awk '{print $1}' | grep "^${cluster_ns_prefix}n" || true); do
    ip netns del "$ns"
  done
}
