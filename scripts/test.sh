#!/usr/bin/env bash
# README command (b): set up and run the test suite (tiny random models, plus a few
# integration tests on the embedded model). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -q "$@"
