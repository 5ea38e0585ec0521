#!/usr/bin/env bash
# Makes examples/hosts/ from the test fixtures: each example is its fixture's files, with every
# device node its devices.txt lists made a link to /dev/null (git cannot hold device nodes; a link
# to a character device counts as one, and /dev/null is one on every Linux machine). Run it after
# changing a fixture; tests/testsuite/examples.rs fails while they differ.
set -euo pipefail
cd "$(dirname "$0")/.."

# example name → the fixture it is made from
declare -A FIXTURE_OF=(
  [e810-roce]=strix-e810-healthy
  [thunderbolt-only]=strix-thunderbolt-only
)

for example in "${!FIXTURE_OF[@]}"; do
  fixture="tests/fixtures/${FIXTURE_OF[$example]}"
  target="examples/hosts/$example"
  rm -rf "$target"
  mkdir -p "$target"
  cp -a "$fixture/." "$target/"
  rm "$target/devices.txt"
  # devices.txt lines: TYPE MAJOR MINOR PATH MODE GID
  while read -r kind _major _minor path _mode _gid; do
    case "$kind" in '' | '#'*) continue ;; esac
    mkdir -p "$(dirname "$target/$path")"
    ln -s /dev/null "$target/$path"
  done <"$fixture/devices.txt"
  echo "$target (from $fixture)"
done
