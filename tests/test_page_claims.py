"""The pages claim no more than the tests allow (issue 44), checked on the committed results
files and executed pages of the default profile:

* the strength and recipe results files carry a seed-sensitivity analysis and each page says
  which verdicts it changes;
* every registered p carries its Monte Carlo error, and no verdict word changes across 20
  bootstrap seeds;
* the results files name the commit that registered their hypotheses;
* no executed page types a figure of minutes, CPU-minutes or a data multiple outside its
  dated registration text, and every CPU-minute figure a page prints is one the results hold
  (through :mod:`activation_wave.study.training_costs`, the one source).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from activation_wave.study import training_costs as costs
from activation_wave.benchmarks import recipe as rc
from activation_wave.core.results import REPO_ROOT
from activation_wave.core.stats import p_mcse
from activation_wave.study.chapters import drafter_recipe as dr
from activation_wave.study.chapters import drafter_strength as st

RESULTS = REPO_ROOT / "data" / "results" / "default" / "smollm2-135m"
BOOK = REPO_ROOT / "book"
#: Typed figures of time or data that a page may not state in prose (they must be glued).
TYPED = re.compile(r"\b\d[\d,.]*\s*(?:to\s*\d[\d,.]*\s*)?(?:CPU-)?(?:minutes|hours|min\b|CPU-hours|CPU-days)"
                   r"|\b\d[\d,.]*\s*(?:x|times)\s+(?:today's|the benchmark's|more)\s+(?:training\s+)?data")


def _load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def _arr(rows: list) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in r] for r in rows], float)


def _strength_taus(doc: dict) -> dict[str, dict[str, np.ndarray]]:
    return {b["name"]: {s["set"]: _arr(s["per_seed"]) for s in b["sets"]} for b in doc["budgets"]}


def _strength_words(doc: dict, seed: int) -> dict[str, str]:
    taus = _strength_taus(doc)
    n = doc["budgets"][0]["comparison"][0]["n_boot"]
    words = {}
    for bud, t in taus.items():
        plain = {k: v for k, v in t.items() if not k.endswith(st.NORM)}
        words |= {f"{bud}/{r['set']}": st.verdict(r) for r in st.comparisons(plain, n_boot=n, seed=seed)}
    top = {k: v for k, v in taus[st.TOP].items() if not k.endswith(st.NORM)}
    words |= {f"H5/{r['set']}": st.verdict(r) for r in st.interaction(top, taus[st.BOTTOM], n_boot=n, seed=seed)}
    words |= {f"H6/{r['set']}": st.verdict(r)
              for r in st.norm_effects(taus[st.TOP], doc["design"]["norm_sets"], n_boot=n, seed=seed)}
    return words


def _recipe_words(doc: dict, seed: int) -> dict[str, str]:
    arms = [a for a in doc["arms"] if not a.get("post_hoc")]
    rows = rc.compare(_arr(doc["base"]["per_seed_tau"]), {a["name"]: _arr(a["per_seed_tau"]) for a in arms},
                      n_boot=arms[0]["n_boot"], seed=seed)
    return {r["name"]: dr.verdict(r) for r in rows}


# ----------------------------------------------------------------------------- seeds and Monte Carlo error


def test_results_files_carry_a_seed_sensitivity_analysis():
    for doc, n_registered in ((_load(st.NAME), None), (_load(rc.NAME), None)):
        rows = doc["seed_sensitivity"]
        assert rows, "no seed_sensitivity in the results file"
        for r in rows:
            lo, hi = (r["lo"], r["hi"]) if "lo" in r else (r["delta_lo"], r["delta_hi"])
            assert lo <= r["delta"] <= hi and 0 <= r["p"] <= 1 and 0 <= r["p_holm"] <= 1
            assert r["changed"] == (r["verdict"] != r["registered_verdict"])
    strength = _load(st.NAME)
    n_registered = (sum(len(b["comparison"]) for b in strength["budgets"]) + len(strength["interaction"])
                    + len(strength["norm_arm"]) + len(strength.get("interaction_corpus") or []))
    assert len(strength["seed_sensitivity"]) == n_registered  # every registered comparison, none left out


def _glued(page: str) -> dict[str, str]:
    """The text values an executed page glued, by name."""
    import ast

    out = {}
    for c in json.loads((BOOK / "chapters" / f"{page}.ipynb").read_text())["cells"]:
        for o in c.get("outputs", []):
            name = ((o.get("metadata") or {}).get("scrapbook") or {}).get("name")
            text = (o.get("data") or {}).get("application/papermill.record/text/plain")
            if name and text:
                try:
                    out[name] = ast.literal_eval("".join(text))
                except (ValueError, SyntaxError):
                    out[name] = "".join(text)
    return out


def test_each_page_names_the_verdicts_the_seed_analysis_changes():
    doc = _load(rc.NAME)
    moved = [r for r in doc["seed_sensitivity"] if r["changed"]]
    glued = _glued("10_drafter_recipe")  # the executed page says it, from its results file
    assert glued["seed_changed"] == len(moved) and glued["seed_n"] == len(doc["seed_sensitivity"])
    assert [r["arm"] for r in dr.seed_rows(doc)] == [r["name"] for r in moved]  # one table row per changed verdict
    # the robustness page: the counts in its sentence and one table row per changed verdict
    strength = _load(st.NAME)
    moved = [r for r in strength["seed_sensitivity"] if r["changed"]]
    glued = _glued("06b_drafter_strength")
    assert glued["strength_sens_changed"] == len(moved) and glued["strength_sens_n"] == len(strength["seed_sensitivity"])
    assert [(r["comparison"], r["set"]) for r in st.sensitivity_table(strength)] == [(r["comparison"], r["set"])
                                                                                     for r in moved]


def test_every_registered_p_carries_its_monte_carlo_error():
    strength, recipe = _load(st.NAME), _load(rc.NAME)
    rows = ([c for b in strength["budgets"] for c in b["comparison"]] + strength["interaction"] + strength["norm_arm"]
            + [a for a in recipe["arms"] if not a.get("post_hoc")])
    for r in rows:
        assert r["n_boot"] >= 200_000
        assert r["p_mcse"] == pytest.approx(p_mcse(r["p"], r["n_boot"]))
        assert r["p_holm_mcse"] <= 0.005  # every p stable to the second decimal


@pytest.mark.slow
def test_no_verdict_word_changes_across_20_bootstrap_seeds():
    strength, recipe = _load(st.NAME), _load(rc.NAME)
    s0, r0 = _strength_words(strength, 0), _recipe_words(recipe, 0)
    filed = {f"{b['name']}/{c['set']}": st.verdict(c) for b in strength["budgets"] for c in b["comparison"]}
    filed |= {f"H5/{r['set']}": st.verdict(r) for r in strength["interaction"]}
    filed |= {f"H6/{r['set']}": st.verdict(r) for r in strength["norm_arm"]}
    assert s0 == filed and r0 == {a["name"]: dr.verdict(a) for a in recipe["arms"] if not a.get("post_hoc")}
    for seed in range(1, 20):
        assert _strength_words(strength, seed) == s0, seed
        assert _recipe_words(recipe, seed) == r0, seed


def test_a_p_at_the_line_is_worded_as_such_and_not_as_a_side():
    row = {"delta": -0.011, "lo": -0.023, "hi": -0.0001, "n": 96}
    assert {st.verdict(row | {"p_holm": p}) for p in (0.0496, 0.0501, 0.054)} == {"close to the line"}
    assert st.verdict(row | {"p_holm": 0.03}) == "lower" and st.verdict(row | {"p_holm": 0.07}) == "within noise"
    assert dr.verdict({"delta": -0.01, "p_holm": 0.049}) == "close to the line"


# ----------------------------------------------------------------------------- registrations


@pytest.mark.parametrize("name,notebook", [(st.NAME, "notebooks/06b_drafter_strength.py"),
                                           (rc.NAME, "notebooks/10_drafter_recipe.py")])
def test_results_files_name_the_commit_that_registered_them(name, notebook):
    reg = _load(name)["pre_registration"]
    commit = reg["commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    git = ["git", "-C", str(REPO_ROOT)]
    if subprocess.run([*git, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode != 0:
        pytest.skip("a shallow clone without the registration's commit")
    touched = subprocess.run([*git, "show", "--name-only", "--format=", commit], capture_output=True, text=True).stdout
    assert notebook in touched.split()


# ----------------------------------------------------------------------------- one cost, one multiple


def _cells(page: Path) -> list[tuple[str, str, str]]:
    """(cell type, source, text outputs) of an executed page; a markdown page is one cell."""
    if page.suffix == ".md":
        return [("markdown", page.read_text(), "")]
    nb = json.loads(page.read_text())
    out = []
    for c in nb["cells"]:
        texts = []
        for o in c.get("outputs", []):
            for v in (o.get("data") or {}).values():
                texts.append("".join(v) if isinstance(v, list) else str(v))
            texts.append("".join(o.get("text", "")))
        out.append((c["cell_type"], "".join(c["source"]), "\n".join(texts)))
    return out


def _registration(source: str) -> bool:
    """A dated registration cell (its figures are what was known on that day, kept as written)."""
    return bool(re.search(r"\(sec-[\w-]*prereg\)=", source))


def _pages() -> list[Path]:
    # classroom.md times its lessons (15 min per part), a plan, not a measured cost; operate.md is
    # the operator's reference (the README's detail, moved): what a setup, a build or a benchmark
    # command took on a named machine and day, not a cost a finding rests on
    return sorted(BOOK.glob("chapters/**/*.ipynb")) + [p for p in BOOK.glob("*.md")
                                                        if p.name not in ("classroom.md", "operate.md")]


def test_no_page_types_a_figure_of_minutes_or_a_data_multiple():
    typed = []
    for page in _pages():
        for kind, source, _ in _cells(page):
            if kind != "markdown" or _registration(source):
                continue
            prose = re.sub(r"\{glue:[a-z]+\}`[^`]*`", "", source)
            typed += [f"{page.relative_to(BOOK)}: {m.group(0)!r}" for m in TYPED.finditer(prose)]
    assert not typed, "typed figures (glue them from the results):\n" + "\n".join(typed)


def test_the_typed_figure_check_can_fail():
    assert TYPED.search("about 14 CPU-minutes per drafter") and TYPED.search("19x today's data")
    assert TYPED.search("it took 2.5 hours") and not TYPED.search("{glue:text}`x` CPU-minutes")


def _held_minutes() -> set[float]:
    """Every CPU-minute figure the results hold, through the functions the pages call."""
    bench = json.loads((REPO_ROOT / "data" / "results" / "benchmarks.json").read_text())
    recipe = _load(rc.NAME)
    vals = [b["cpu_min"] for b in costs.budget_cpu_min(bench, recipe).values()]
    proj = dr.data_projection(bench, dr.projection_marks(bench))
    vals += [m[k] for m in proj["marks"] for k in ("cpu_min", "cpu_min_lo", "cpu_min_hi") if m[k] is not None]
    vals += [p["cpu_s"] / 60 for p in proj["curve"]]
    vals += [a["cpu_s"] / 60 for a in [recipe["base"], *recipe["arms"]]]
    vals.append(recipe["base"]["curve"][-1]["cpu_s"] / 60)  # the equal-cost reading's point
    scale = _load("data_scale")  # the data-scale page: its curve's points and its projection
    vals += [p["cpu_s"] / 60 for p in scale["points"]]
    sp = scale["target"].get("projection") or {}
    vals += [sp[k] for k in ("from_cpu_min", "cpu_min", "cpu_min_lo", "cpu_min_hi") if sp.get(k) is not None]
    if "large_drafter" in bench:  # chapter 11's corpus drafter (issue 42)
        vals += [bench["large_drafter"][k] for k in ("train_cpu_min", "all_stages_cpu_min") if k in bench["large_drafter"]]
        vals += [r["train_cpu_min"] for r in bench["large_drafter"].get("stages") or []]  # its training stages
    for name in ("large_drafter_indist", "large_drafter_indist_all", "large_drafter_indist_cont",
                 "large_drafter_indist_samples", "large_drafter_indist_steps"):  # chapter 11: amendments 8-13
        if name in bench:
            vals.append(bench[name]["train_cpu_min"])
    return {round(v, d) for v in vals for d in (0, 1)}


def test_every_cpu_minute_figure_a_page_prints_is_held_by_the_results():
    held = _held_minutes()
    stray = []
    for page in _pages():
        for _, _, outputs in _cells(page):
            for m in re.finditer(r"(\d[\d,]*(?:\.\d+)?) CPU-minutes", outputs):
                v = float(m.group(1).replace(",", ""))
                if round(v, 1) not in held and round(v) not in held:
                    stray.append(f"{page.relative_to(BOOK)}: {m.group(0)}")
    assert not stray, "CPU-minute figures no results file holds:\n" + "\n".join(stray)


def test_the_cost_page_and_the_recipe_page_give_one_break_even_per_engine():
    """One number per quantity: the break-even tau the recipe page projects its data curve to is
    the one the cost page states, for the PyTorch decoder and for llama.cpp on the 135M target."""
    bench = json.loads((REPO_ROOT / "data" / "results" / "benchmarks.json").read_text())
    marks = dr.break_even_taus(bench)
    glued = _glued("11_cpu_payoff")
    assert marks["our PyTorch loop"] == pytest.approx(glued["pt_break_even"], abs=1e-4)
    assert marks["llama.cpp, 1 thread"] == pytest.approx(glued["be_small_1"])
    proj = dr.data_projection(bench, dr.projection_marks(bench))
    assert [m["online_tau"] for m in proj["marks"]] == list(marks.values())  # no target of the work among them
