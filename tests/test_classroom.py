"""The classroom page's exercises on the book's own data: Exercise 8 (paired bootstrap, Holm, MDE)
reproduces the library's H1 row from the committed data file, and Exercise 7 reads the measured
costs the cost page shows. The light set-up (scripts/setup_class.sh) runs every exercise from a
fresh clone: that run is opt-in (``pytest -m try_it tests/test_classroom.py``; it installs two
wheels)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from activation_wave.benchmarks.vllm_speed import cost_model_rows
from activation_wave.core.stats import holm, min_detectable_delta, paired_bootstrap

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "classroom.md"
RESULTS = ROOT / "data" / "results" / "default" / "smollm2-135m" / "06_predictors.json"
FINDINGS = ROOT / "data" / "results" / "default" / "findings.json"


def solution(exercise: int) -> str:
    """The Python block of the solution that follows the admonition of ``exercise``."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f":::{{admonition}} Exercise {exercise}:")
    return re.search(r"```python\n(.*?)```", text[start:], flags=re.S).group(1)


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _data_module():
    spec = importlib.util.spec_from_file_location("classroom_data", ROOT / "scripts" / "classroom_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_data_file_is_the_results_files_per_prompt_tau():
    mod = _data_module()
    doc = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert mod.OUT.read_text(encoding="utf-8") == mod.table(doc), \
        "book/classroom-h1-tau.csv is stale: .venv/bin/python scripts/classroom_data.py"


#: The row Exercise 8's solution prints, as the results-at-a-glance table words it.
ROW = re.compile(r"H1 \| best rule (?P<set>\S+): delta tau = (?P<delta>\S+) \[(?P<lo>\S+), (?P<hi>\S+)\], "
                 r"Holm p = (?P<p>\S+), n = (?P<n>\d+) prompts, MDE = (?P<mde>\S+) \| (?P<word>[a-z ]+)$", re.M)


def test_exercise_8_reproduces_the_h1_row_of_the_library():
    printed = run(solution(8))
    print(printed)
    m = ROW.search(printed)
    assert m, printed
    doc = json.loads(RESULTS.read_text(encoding="utf-8"))
    sets = {s["set"]: s for s in doc["sets"]}
    rules = [c for c in doc["comparisons"] if c["family"] == "rules"]
    ref = np.array(sets[doc["reference"]]["per_seed"], float)
    # the library's own computation, on the per-seed values (seeds averaged per prompt inside)
    lib = {c["set"]: paired_bootstrap(np.array(sets[c["set"]]["per_seed"], float), ref, n_boot=doc["n_boot"], seed=0)
           for c in rules}
    adj = dict(zip(lib, holm([d.p for d in lib.values()])))
    best = max(lib, key=lambda s: lib[s].mean)
    d = lib[best]
    mde = min_detectable_delta(d.sd, d.n, alpha=0.05 / len(lib))
    assert m["set"] == best and int(m["n"]) == d.n
    assert (m["delta"], m["lo"], m["hi"], m["mde"]) == tuple(f"{v:+.3f}" if i < 3 else f"{v:.3f}" for i, v in
                                                           enumerate((d.mean, d.lo, d.hi, mde)))
    assert m["p"] == f"{adj[best]:.2g}"
    # ... and the numbers the drafters page stored (the results file the pages read)
    stored = next(c for c in rules if c["set"] == best)
    assert abs(d.mean - stored["delta"]) < 1e-12 and abs(d.lo - stored["lo"]) < 1e-12 and abs(d.hi - stored["hi"]) < 1e-12
    assert abs(adj[best] - stored["p_holm_rules"]) < 1e-12 and abs(mde - stored["mde_holm"]) < 1e-12
    assert m["word"] == ("supported" if d.lo > 0 and adj[best] < 0.05 else "not supported" if d.hi < 0 else "within noise")


def test_exercise_8_agrees_with_the_findings_record_when_there_is_one():
    """The record every page quotes (one per registered test), where the findings file exists."""
    if not FINDINGS.exists():
        pytest.skip("no findings file yet (data/results/default/findings.json)")
    records = json.loads(FINDINGS.read_text(encoding="utf-8"))["records"]
    h1 = next((r for r in records if r["key"] == "H1"), None)
    assert h1 is not None, "the findings file has no H1 record"
    m = ROW.search(run(solution(8)))
    assert h1["compared"] == m["set"] and h1["n"] == int(m["n"]) and h1["word"] == m["word"]
    assert (f"{h1['value']:+.3f}", f"{h1['lo']:+.3f}", f"{h1['hi']:+.3f}") == (m["delta"], m["lo"], m["hi"])
    assert f"{h1['p']:.2g}" == m["p"] and f"{h1['mde']:.3f}" == m["mde"] and h1["p_kind"] == "Holm"
    assert h1["statistic"].startswith(f"best rule {m['set']}: delta tau = {m['delta']} [{m['lo']}, {m['hi']}]")


def test_exercise_7_reads_the_measured_costs_of_the_cost_page():
    printed = run(solution(7))
    print(printed)
    rows = cost_model_rows(json.loads((ROOT / "data" / "results" / "benchmarks.json").read_text(encoding="utf-8")))
    loop = next(r for r in rows if r["path"].startswith("study loop"))
    lc = next(r for r in rows if r["path"].startswith("llama.cpp, 1"))
    assert f"a round costs {loop['round_in_plain_steps']:.2f} plain steps" in printed
    assert f"break-even is tau = {loop['round_in_plain_steps']:.2f}" in printed
    assert f"measured {loop['speedup']:.2f}x" in printed
    assert f"llama.cpp: a round costs {lc['round_in_plain_steps']:.2f} plain steps" in printed
    assert f"at most {lc['ceiling']:.2f}x" in printed


def test_the_page_says_ninety_minutes_and_uses_the_studys_wave():
    text = PAGE.read_text(encoding="utf-8")
    assert "90-minute" in text and "60–90" not in text and "60-90" not in text
    commands = re.findall(r"^(?:\s*)(wave|\.venv/bin/wave)\b", "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S)),
                          flags=re.M)
    assert commands and set(commands) == {".venv/bin/wave"}, commands
    assert "bash scripts/setup_class.sh" in text


# ------------------------------------------------------------ the light set-up, from a fresh clone
@pytest.mark.try_it
def test_setup_class_from_a_fresh_clone_runs_every_exercise(tmp_path, request):
    if "try_it" not in (request.config.getoption("-m") or ""):
        pytest.skip("installs NumPy and matplotlib into a fresh clone: pytest -m try_it tests/test_classroom.py")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    # the working tree's versions of the files under test (committed ones are what a clone has)
    for rel in ("scripts/setup_class.sh", "book/classroom.md", "book/classroom-h1-tau.csv"):
        (clone / rel).write_bytes((ROOT / rel).read_bytes())
    t0 = time.time()
    setup = subprocess.run(["bash", "scripts/setup_class.sh"], cwd=clone, capture_output=True, text=True, timeout=900)
    took = time.time() - t0
    print(f"\n[setup_class] {took:.0f} s wall: {setup.stdout.strip()}")
    assert setup.returncode == 0, setup.stderr[-2000:]
    py = clone / ".venv-class" / "bin" / "python"
    listed = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(sorted(d.metadata['Name'].lower() "
                             "for d in m.distributions()))"], capture_output=True, text=True).stdout
    assert "torch" not in listed and "'numpy'" in listed and "'matplotlib'" in listed, listed
    blocks = re.findall(r"```python\n(.*?)```", (clone / "book" / "classroom.md").read_text(encoding="utf-8"), re.S)
    script = "ns = {}\n" + "".join(f"exec(compile({b!r}, 'exercise block {i}', 'exec'), ns)\n"
                                   for i, b in enumerate(blocks, 1))
    t0 = time.time()
    out = subprocess.run([str(py), "-c", script], cwd=clone, capture_output=True, text=True, timeout=600)
    print(f"[setup_class] every solution ({len(blocks)} blocks) in one session: {time.time() - t0:.0f} s")
    assert out.returncode == 0, out.stderr[-2000:]
    assert ROW.search(out.stdout), out.stdout[-2000:]
    assert took < 60 * 3, f"setup_class took {took:.0f} s"
