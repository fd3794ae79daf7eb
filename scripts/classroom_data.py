"""Write the classroom's data file for its statistics exercise: the per-prompt offline tau of the
EAGLE-3 default and of the four selection rules' sets on SmolLM2-135M (default profile), each
value the mean over the set's seeds, from the drafters page's results file.

    .venv/bin/python scripts/classroom_data.py          # writes book/classroom-h1-tau.csv

tests/test_classroom.py checks that the committed file equals what this writes, and that the
exercise's NumPy solution reproduces the library's H1 row from it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "data" / "results" / "default" / "smollm2-135m" / "06_predictors.json"
OUT = ROOT / "book" / "classroom-h1-tau.csv"
#: The reference first, then the selection rules (the Holm family of H1), in the results file's order.
REFERENCE = "eagle3-default"


def table(doc: dict) -> str:
    sets = {s["set"]: s for s in doc["sets"]}
    rules = [c["set"] for c in doc["comparisons"] if c["family"] == "rules"]
    cols = [REFERENCE, *rules]
    seeds = {len(sets[c]["seeds"]) for c in cols}
    lines = [
        "# Per-prompt offline tau (tokens per target pass, chain depth "
        f"{doc['depth']}) of SmolLM2-135M drafters, default profile;",
        f"# each value is the mean over the set's {'/'.join(map(str, sorted(seeds)))} seeds. "
        "Columns: the EAGLE-3 default, then the selection rules' sets.",
        "# layers: " + "; ".join(f"{c} {sets[c]['layers']}" for c in cols),
        f"# source: data/results/default/smollm2-135m/06_predictors.json (written by scripts/classroom_data.py)",
        "prompt," + ",".join(cols),
    ]
    for i, pid in enumerate(doc["prompt_ids"]):
        vals = [sets[c]["per_prompt"][i] for c in cols]
        lines.append(pid + "," + ",".join(repr(float(v)) for v in vals))
    return "\n".join(lines) + "\n"


def main() -> int:
    doc = json.loads(SOURCE.read_text(encoding="utf-8"))
    OUT.write_text(table(doc), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(doc['prompt_ids'])} prompts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
