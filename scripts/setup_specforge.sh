#!/usr/bin/env bash
# Optional: fetch SpecForge 0.2.0's wheel (385 kB, from the package registry) into the cache, so
# that `wave export --engine specforge` and tests/test_specforge.py check a run with SpecForge's
# own argument parser, config schema and loaders. The wheel is only read (its pure-Python parts
# are imported from the zip); it is never installed: it pins torch 2.11.0, transformers 5.8.1 and
# sglang 0.5.14, which the study's environment does not have. Idempotent: a second run only checks.
#
#   bash scripts/setup_specforge.sh                 # into $WAVE_CACHE/wheels (~/.cache/activation_wave/wheels)
#   PY=../env/bin/python bash scripts/setup_specforge.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PY:-.venv/bin/python}"
[[ -x "$PY" ]] || { echo "setup_specforge: run 'bash scripts/setup.sh' first (no $PY)" >&2; exit 1; }
PYTHONPATH=lib "$PY" -c "from activation_wave.engines.specforge import fetch_wheel; print(f'setup_specforge: {fetch_wheel()} (sha256 checked)')"
