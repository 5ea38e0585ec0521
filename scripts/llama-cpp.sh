#!/usr/bin/env bash
# llama.cpp for the tests' real inference engine: `llama-server` and its RPC server, built for the
# CPU with the RPC backend, from the llama.cpp tree vendored in a pinned llama-cpp-python sdist
# (PyPI carries it; the tree has tools/server, tools/rpc, gguf-py and the test vocabularies), and
# a virtualenv with that tree's `gguf` package, which the tests write their tiny models with.
#
# Built once per machine into the machine's test cache (STRIX_TEST_CACHE, default
# ~/.cache/strix-toolbox-tests/llama-cpp/KEY; KEY: the pin and everything that changes the build),
# so a fresh clone builds nothing. target/llama-cpp/current points at the last one made
# or found; the tests read it (tests/testsuite/support/llama_cpp.rs). Prints that directory.
#
#   bin/llama-server, bin/ggml-rpc-server   static: they need only glibc and libstdc++
#   models/ggml-vocab-llama-spm.gguf        the llama SPM vocabulary
#   venv/                                   Debian's python3 with gguf, numpy, pyyaml
#   build.txt                               what was built, from what, and how long it took
#
# scripts/test.sh runs it before `cargo test`, so no test builds llama.cpp under a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
url="https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$version.tar.gz"
tree="llama_cpp_python-$version/vendor/llama.cpp"

# What the tests need and nothing more, compiled in the least time that keeps inference exact:
# - RPC on, CPU only; GGML_NATIVE off so the binaries run on any x86-64 with AVX2 (the images
#   carry them to other machines); no OpenMP (ggml's own thread pool: no libgomp to carry).
# - static libraries: two self-contained binaries, nothing to find at run time.
# - no UI (the server embeds none, and never downloads one), no HTTPS (loopback only);
#   LLAMA_CURL is gone from this llama.cpp (it only warns), so it is not passed.
# - -O1: what makes the build long is C++ compile work, not the tiny model's inference.
# - no llamafile sgemm: a large template file; ggml's own kernels compute the same products.
cmake_flags=(
  -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG"
  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
  -DBUILD_SHARED_LIBS=OFF
  -DGGML_RPC=ON
  -DGGML_NATIVE=OFF
  -DGGML_OPENMP=OFF
  -DGGML_LLAMAFILE=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_APP=OFF
)
targets=(llama-server ggml-rpc-server)
python_packages=(numpy==2.4.4 pyyaml==6.0.2)

# The layout above is part of the key too: bump it when what goes into KEY/ changes.
layout=1
key="$version-$(printf '%s\n' "$sha256" "$layout" "${cmake_flags[@]}" "${targets[@]}" "${python_packages[@]}" \
  | sha256sum | cut -c1-12)"
root="${STRIX_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strix-toolbox-tests}/llama-cpp"
out="$root/$key"
mkdir -p "$root"

# One build at a time (two test runs started together share it).
exec 9>"$root/lock"
flock 9

if [[ ! -f "$out/build.txt" ]]; then
  rm -rf "$out" "$out.partial"
  work="$out.partial"
  mkdir -p "$work/src" "$work/bin" "$work/models"
  log="$root/$key.log"
  : >"$log"
  echo "llama-cpp: building llama.cpp from llama-cpp-python $version (log: $log)" >&2
  fail() {
    tail -n 40 "$log" >&2
    echo "llama-cpp: $1 failed; the whole log is $log" >&2
    exit 1
  }
  started=$SECONDS

  curl -fsSL --retry 3 -o "$work/sdist.tar.gz" "$url" || fail "downloading $url"
  echo "$sha256  $work/sdist.tar.gz" | sha256sum -c --quiet - || fail "checking the sdist's sha256"
  tar -xzf "$work/sdist.tar.gz" -C "$work/src" "$tree" || fail "unpacking $tree"
  src="$work/src/$tree"

  cmake -S "$src" -B "$work/build" "${cmake_flags[@]}" >>"$log" 2>&1 || fail "configuring"
  cmake --build "$work/build" --parallel "$(nproc)" --target "${targets[@]}" >>"$log" 2>&1 || fail "building"
  built=$SECONDS
  cp "$work/build/bin/llama-server" "$work/build/bin/ggml-rpc-server" "$work/bin/"
  cp "$src/models/ggml-vocab-llama-spm.gguf" "$work/models/"
  for binary in "$work"/bin/*; do
    "$binary" --help >/dev/null 2>&1 || fail "running $binary --help"
  done

  # Debian's interpreter, whatever python3 comes first on PATH (as scripts/test-deps.sh does).
  /usr/bin/python3 -m venv "$work/venv" >>"$log" 2>&1 || fail "making the venv (python3-venv)"
  "$work/venv/bin/python" -m pip install -q --disable-pip-version-check "${python_packages[@]}" >>"$log" 2>&1 \
    || fail "installing ${python_packages[*]}"
  "$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$src/gguf-py" >>"$log" 2>&1 \
    || fail "installing gguf from $tree/gguf-py"

  rm -rf "$work/src" "$work/build" "$work/sdist.tar.gz"
  mv "$work" "$out"
  {
    echo "llama-cpp-python $version sha256 $sha256"
    echo "cmake ${cmake_flags[*]}"
    echo "targets ${targets[*]}"
    echo "python ${python_packages[*]}"
    echo "build seconds $((built - started)) on $(nproc) cores; total seconds $((SECONDS - started))"
  } >"$out/build.txt"
  echo "llama-cpp: built in $((built - started)) s" >&2
fi

mkdir -p target/llama-cpp
ln -sfn "$out" target/llama-cpp/current
echo "$out"
