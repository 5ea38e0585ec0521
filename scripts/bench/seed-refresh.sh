#!/usr/bin/env bash
# The baseline: what refresh_toolbox.sh did on every run, with podman's CLI
# (remove, pull, three inspects, tag, create, two image lists). Used only by scripts/bench.sh.
set -euo pipefail
name=$1 ref=$2 repo=$3
shift 3
podman rm -f "$name" >/dev/null 2>&1 || true
podman pull -q "$ref" >/dev/null
created=$(podman image inspect --format '{{index .Labels "org.opencontainers.image.created"}}' "$ref")
podman image inspect --format '{{.Id}}' "$ref" >/dev/null
podman image inspect --format '{{.Digest}}' "$ref" >/dev/null
tag=$(date -u -d "$created" +%Y%m%d-%H%M%S)
podman tag "$ref" "$repo:$tag"
podman create --name "$name" "$@" "$ref" sleep infinity >/dev/null
podman images "$repo" >/dev/null
podman images --format '{{.Tag}}' "$repo" >/dev/null
