#!/usr/bin/env bash
# README command (a): set up, run the study's default profile on the embedded model,
# and build the book (book/_build/html/index.html). Pass another profile as $1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/wave study --profile "${1:-default}" "${@:2}"
