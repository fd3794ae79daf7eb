#!/usr/bin/env bash
# The classroom's light set-up: .venv-class with NumPy and matplotlib only, the versions the study
# was run with (requirements.lock), for the exercises of the classroom page (book/classroom.md).
# One command, under a minute on a laptop; the study itself (torch, the models, `wave`) needs
# `bash scripts/setup.sh` instead (see README.md).
#
#   bash scripts/setup_class.sh            # then: .venv-class/bin/python
#
# Idempotent: a second run only checks the imports.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
# matplotlib and its dependencies, each pinned as in requirements.lock
want=(numpy matplotlib contourpy cycler fonttools kiwisolver packaging pillow pyparsing python-dateutil)
pins=()
for name in "${want[@]}"; do
    pin=$(grep -i -E "^${name}==" requirements.lock || true)
    [[ -n "$pin" ]] || { echo "setup_class: ${name} is not in requirements.lock" >&2; exit 1; }
    pins+=("$pin")
done

# The venv without a pip of its own (ensurepip takes longer than the install), filled by this Python's
# pip (--python, pip >= 22.3); a Python without a usable pip gets a venv with one, as usual.
if "$PY" -m pip --python "$(command -v "$PY")" --version >/dev/null 2>&1; then
    [[ -x .venv-class/bin/python ]] || "$PY" -m venv --without-pip .venv-class
    pip=("$PY" -m pip --python .venv-class/bin/python)
else
    [[ -x .venv-class/bin/python ]] || "$PY" -m venv .venv-class
    [[ -x .venv-class/bin/pip ]] || .venv-class/bin/python -m ensurepip -q
    pip=(.venv-class/bin/python -m pip)
fi
if ! .venv-class/bin/python -c "import numpy, matplotlib" 2>/dev/null; then
    "${pip[@]}" install -q --disable-pip-version-check --only-binary :all: --no-deps "${pins[@]}"
fi
.venv-class/bin/python -c "import numpy, matplotlib; print(f'setup_class: ready (.venv-class, numpy {numpy.__version__}, matplotlib {matplotlib.__version__})')"
