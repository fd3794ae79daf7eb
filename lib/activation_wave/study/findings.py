"""One record per registered test: the number, interval, n, p and verdict word every page quotes.

The registry (``data/findings/registry.yaml``) lists each registered test once: its claim,
direction, statistic, null, rule, correction, lab-record page and registration commit, and its
amendments. :func:`evaluate` reads the experiments' results files (through the chapters'
``hypotheses`` functions, which compute the statistics) and words every verdict by one rule,
:func:`verdict`. :func:`record` writes the records to ``findings.json`` beside the main model's
results; the landing page, the glance page, each chapter's answer box, the README and
``wave select`` read them by test id (:func:`load`) and never word a verdict themselves.

>>> verdict("higher", -0.025, -0.011, 0.0, 0.0008)
('not supported', 'lower')
>>> verdict("higher", -0.007, 0.013, 0.0, 0.5)
('within noise', None)
>>> verdict("either", -0.036, -0.005, 0.0, 0.03)
('supported', 'lower')
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from activation_wave.core.config import StudyConfig
from activation_wave.core.paths import REPO_ROOT
from activation_wave.study.hypotheses import Hypothesis

__all__ = ["REGISTRY", "WORDS", "NAME", "Test", "Finding", "Findings", "registry", "verdict", "evaluate", "record",
           "load", "from_hypotheses", "layer_tests", "default_held"]

#: The registered tests, one entry each.
REGISTRY = REPO_ROOT / "data" / "findings" / "registry.yaml"
#: The results file (beside the main model's results) that holds the records.
NAME = "findings"
#: The verdict vocabulary: the same word means the same on every page.
WORDS = ("supported", "not supported", "within noise", "not testable")
#: The sides a statistic can fall on, by its null: differences and correlations, and speed ratios.
SIDES = {0.0: ("higher", "lower"), 1.0: ("faster", "slower")}


@dataclass(frozen=True)
class Test:
    """One registered test as the registry states it."""

    id: str
    claim: str
    direction: str  # higher | lower | either
    statistic: str
    unit: str
    null: float
    rule: str
    correction: str
    lab: str  # book page (and #label) of the registration as written on its day
    registered: dict[str, str]
    history: tuple[dict[str, str], ...] = ()
    arms: str | None = None  # "sets": one record per compared set
    layer_test: dict[str, str] | None = None  # the study's question on this model and budget: {model, budget}


@dataclass(frozen=True)
class Finding:
    """One record: a registered test (one arm of it, where it compares several sets), evaluated."""

    key: str  # the id pages quote: "H1", or "H5/combined" for an arm
    test: str
    arm: str | None
    claim: str
    direction: str
    compared: str | None  # the set or arm the statistic is of, where the test picks one (H1: the best rule's)
    word: str  # a word of WORDS, by :func:`verdict`
    side: str | None  # higher / lower (faster / slower for a ratio) where the interval excludes the null
    value: float | None
    lo: float | None
    hi: float | None
    null: float
    n: int | None
    unit: str
    p: float | None
    p_kind: str | None  # "Holm" or "one test"; None where the rule reads the interval only
    base: float | None  # the reference's value beside a difference (the default's tau)
    mde: float | None
    seeds: str | None  # the verdict word when seeds are resampled too (sensitivity analysis)
    statistic: str  # the chapter's one-line statement of the primary test
    note: str
    lab: str
    registered: str  # commit (date)
    amended: str | None = None  # the amendment the record states, if any: commit (date)
    earlier: tuple[dict[str, Any], ...] = ()  # earlier statements of the test with their records

    @property
    def label(self) -> str:
        """The word with its side where the side says something: "not supported (lower)"."""
        shown = self.word == "not supported" or (self.word == "supported" and self.direction == "either")
        return f"{self.word} ({self.side})" if self.side and shown else self.word

    @property
    def interval(self) -> str:
        """``[lo, hi]`` at the statistic's precision, or an empty string."""
        if self.lo is None or self.hi is None:
            return ""
        return f"[{self.lo:{_fmt(self)}}, {self.hi:{_fmt(self)}}]"


@dataclass(frozen=True)
class Findings:
    """Every record of one run, and the registry they were evaluated by."""

    records: tuple[Finding, ...]
    tests: tuple[Test, ...] = field(default=())

    def __getitem__(self, key: str) -> Finding:
        for f in self.records:
            if f.key == key:
                return f
        raise KeyError(f"no findings record {key!r}; records: {[f.key for f in self.records]}")

    def get(self, key: str) -> Finding:
        """The record ``key``, or a "not testable" record saying the run has no results for it (a
        profile that leaves the experiment out), so a page renders on every profile."""
        try:
            return self[key]
        except KeyError:
            tid = key.split("/")[0]
            t = next((t for t in self.tests if t.id == tid), None)
            return Finding(key, tid, key.split("/")[1] if "/" in key else None, t.claim if t else "",
                           t.direction if t else "higher", None, "not testable", None, None, None, None,
                           t.null if t else 0.0, None, t.unit if t else "", None, None, None, None, None,
                           "not run in this profile", "", t.lab if t else "", "")

    def top(self, test: str) -> str:
        """The key of ``test``'s arm with the largest statistic (the set closest to beating the
        default), or ``test`` itself when it has no records."""
        arms = [r for r in self.of(test) if r.value is not None]
        return max(arms, key=lambda r: r.value).key if arms else test

    def counts(self, test: str) -> dict[str, int]:
        """How many arms of ``test`` the record words each way, for a page that counts them:
        ``n``, each word of :data:`WORDS` (spaces as underscores), and ``higher`` / ``lower``
        (arms whose interval lies on that side, whatever the word)."""
        arms = self.of(test)
        out = {"n": len(arms), **{w.replace(" ", "_"): sum(r.word == w for r in arms) for w in WORDS}}
        out.update(higher=sum(r.side in ("higher", "faster") for r in arms),
                   lower=sum(r.side in ("lower", "slower") for r in arms))
        return out

    def of(self, test: str) -> list[Finding]:
        """The records of one test (one per arm)."""
        return [f for f in self.records if f.test == test]

    def tally(self) -> dict[str, int]:
        """How many records carry each verdict word, in :data:`WORDS` order."""
        c = Counter(f.word for f in self.records)
        return {w: c.get(w, 0) for w in WORDS}


def registry(path: Path = REGISTRY) -> tuple[float, dict[str, Test]]:
    """(alpha, tests by id) from the registry file."""
    doc = yaml.safe_load(path.read_text())
    tests = {}
    for tid, t in doc["tests"].items():
        reg = t["registered"]
        tests[tid] = Test(id=tid, claim=t["claim"], direction=t["direction"], statistic=t["statistic"],
                          unit=t["unit"], null=float(t["no_effect"]), rule=t["rule"], correction=t["correction"],
                          lab=t["lab"], registered={"commit": str(reg["commit"]), "date": str(reg["date"])},
                          history=tuple({k: str(v) for k, v in h.items()} for h in t.get("history") or ()),
                          arms=t.get("arms"), layer_test=t.get("layer_test"))
        if tests[tid].direction not in ("higher", "lower", "either"):
            raise ValueError(f"{path}: test {tid}'s direction {t['direction']!r} is not higher, lower or either")
    return float(doc.get("alpha", 0.05)), tests


def verdict(direction: str, lo: float | None, hi: float | None, null: float, p: float | None,
            alpha: float = 0.05, testable: bool = True) -> tuple[str, str | None]:
    """(word, side): the one rule every record is worded by.

    "not testable" without an interval or when the instrument failed (``testable`` False);
    "within noise" when the 95% interval covers ``null``, or the p the test's correction gives
    is not below ``alpha``; else the side the interval lies on, and "supported" when that is the
    claimed side (``direction`` "either": any side), "not supported" when it is the other.
    """
    if not testable or lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "not testable", None
    up, down = SIDES.get(float(null), SIDES[0.0])
    if lo <= null <= hi or (p is not None and not p < alpha):
        return "within noise", None
    side = "higher" if lo > null else "lower"
    shown = up if side == "higher" else down
    return ("supported" if direction in ("either", side) else "not supported"), shown


_NAME = re.compile(r"^(?P<id>[A-Z]\d)(?P<third>, third budget)?(?: \((?P<arm>[^)]*)\))?$")


def _split(name: str) -> tuple[str, str | None]:
    """(test id, arm) of a chapter's hypothesis name: "H5 (combined)" -> ("H5", "combined");
    "H5, third budget (x)" -> ("H5c", "x"); "C1 (corpus drafter)" -> ("C1", "corpus drafter")."""
    m = _NAME.match(name)
    if m is None:
        raise ValueError(f"hypothesis name {name!r} names no registered test")
    return m["id"] + ("c" if m["third"] else ""), m["arm"]


def _record(test: Test, h: Hypothesis, arm: str | None, alpha: float) -> Finding:
    lo, hi = h.interval or (None, None)
    word, side = verdict(test.direction, lo, hi, test.null, h.p, alpha, testable=h.supported is not None)
    p_kind = None if h.p is None else ("Holm" if test.correction.startswith("Holm") else "one test")
    return Finding(key=f"{test.id}/{arm}" if test.arms and arm else test.id, test=test.id,
                   arm=arm if test.arms else None, claim=test.claim, direction=test.direction,
                   compared=arm if test.arms else h.compared, word=word, side=side, value=h.value, lo=lo,
                   hi=hi, null=test.null, n=h.n, unit=test.unit, p=h.p, p_kind=p_kind, base=h.base, mde=h.mde,
                   seeds=h.seeds, statistic=h.statistic, note=h.note, lab=test.lab,
                   registered=f"{test.registered['commit']} ({test.registered['date']})")


def from_hypotheses(hyps: Iterable[Hypothesis], tests: Mapping[str, Test], alpha: float = 0.05) -> Findings:
    """The records of the chapters' evaluated hypotheses, worded by :func:`verdict`. A test restated
    by an amendment ("C1 (corpus drafter)") is one record: the latest statement, with the earlier
    ones under ``earlier``. A hypothesis no test registers is an error (register it first)."""
    by_test: dict[str, list[tuple[str | None, Hypothesis]]] = {}
    for h in hyps:
        tid, arm = _split(h.name)
        if tid not in tests:
            raise ValueError(f"{h.name!r} is not in the registry {REGISTRY.name}: register test {tid} first")
        by_test.setdefault(tid, []).append((arm, h))
    out = []
    for tid, test in tests.items():
        got = by_test.get(tid, [])
        if test.arms:
            out += [_record(test, h, arm, alpha) for arm, h in got]
        elif got:
            statements = [_record(test, h, None, alpha) for _, h in got]
            *earlier, latest = statements
            if test.history and earlier:
                h = test.history[-1]
                latest = dataclasses.replace(latest, amended=f"{h['commit']} ({h['date']})", earlier=tuple(
                    {"statistic": e.statistic, "word": e.word, "value": e.value, "lo": e.lo, "hi": e.hi}
                    for e in earlier))
            out.append(latest)
    return Findings(tuple(out), tuple(tests.values()))


def word(h: Hypothesis) -> str:
    """The verdict word of one evaluated hypothesis by the registry's rule (for tests and tools
    that hold a single hypothesis; pages read the record)."""
    alpha, tests = registry()
    return from_hypotheses([h], tests, alpha).records[0].word


def evaluate(cfg: StudyConfig, root: str | Path | None = None) -> Findings:
    """Every registered test's record from the results files of ``cfg``'s run."""
    alpha, tests = registry()
    return from_hypotheses(hypotheses(cfg, root), tests, alpha)


def hypotheses(cfg: StudyConfig, root: str | Path | None = None) -> list[Hypothesis]:
    """Every evaluated hypothesis whose experiment has results in ``cfg``'s run (a profile, or a
    run in progress, may not have them all yet), in the registry's order."""
    from activation_wave.core.results import load_benchmarks, load_optional, load_result
    from activation_wave.study.chapters import cpu_payoff, cross_drafters as cd, drafter_data_scale
    from activation_wave.study.chapters import drafter_predictors as dp, drafter_recipe, drafter_strength
    from activation_wave.study.chapters import eagle3_speedup

    def get(name: str, cls: Any = None) -> Any:
        try:
            return load_result(name, cfg, root, cls=cls)
        except FileNotFoundError:
            return None

    bench = load_benchmarks()
    pred, cross, ch11 = get(dp.NAME, dp.DrafterPredictors), get("07_cross_drafters", cd.CrossDrafterResult), \
        get(cpu_payoff.NAME, cd.CrossDrafterResult)
    return ((eagle3_speedup.evaluate_hypotheses(pred) if pred is not None else [])
            + drafter_strength.hypotheses(load_optional(drafter_strength.NAME, cfg, root))
            + drafter_data_scale.hypotheses(load_optional(drafter_data_scale.NAME, cfg, root))
            + (cd.evaluate_hypotheses(cross) if cross is not None else [])
            + drafter_recipe.hypotheses(load_optional("recipe", cfg, root))
            + cpu_payoff.evaluate_hypotheses(bench.get(cpu_payoff.BENCH), ch11,
                                             layer_test=bench.get(cpu_payoff.LAYER_TEST)))


def _doc(f: Findings) -> dict[str, Any]:
    from activation_wave.core.results import to_jsonable

    return {"tally": f.tally(), "records": [{**to_jsonable(r), "label": r.label} for r in f.records]}


def path(cfg: StudyConfig, root: str | Path | None = None) -> Path:
    """``findings.json`` of ``cfg``'s profile: beside its models' results folders (one file for the
    profile, whichever model a command names)."""
    from activation_wave.core.results import results_dir

    return results_dir(cfg, root).parent / f"{NAME}.json"


def record(cfg: StudyConfig, root: str | Path | None = None) -> Findings:
    """:func:`evaluate`, and write the records to :func:`path` (atomically, through the write layer)
    when they differ from the file's."""
    import time

    from activation_wave.core import files
    from activation_wave.core.results import RESULTS_OWNED, git_commit, read_json_object

    got = evaluate(cfg, root)
    doc, where = _doc(got), path(cfg, root)
    old = read_json_object(where, "it is rebuilt from the results files") if where.exists() else None
    if old is None or {k: old.get(k) for k in doc} != doc:
        files.write_json(where, {"name": NAME, "config": {"profile": cfg.profile, "registry": str(REGISTRY.relative_to(
            REPO_ROOT))}, "written": time.strftime("%Y-%m-%dT%H:%M:%S"), "git_commit": git_commit(), **doc},
            RESULTS_OWNED, indent=1, sort_keys=False)
    return got


def load(cfg: StudyConfig, root: str | Path | None = None) -> Findings:
    """The records as written (:func:`record`); a missing file names the command that writes it."""
    from activation_wave.core.results import read_json_object

    where = path(cfg, root)
    if not where.exists():
        raise FileNotFoundError(f"{where} does not exist: run `wave findings --profile {cfg.profile}` (or any page "
                                "that quotes a registered test) to write it")
    doc = read_json_object(where, f"run `wave findings --profile {cfg.profile}` to rebuild it")
    names = {f.name for f in dataclasses.fields(Finding)}
    recs = tuple(Finding(**{k: (tuple(v) if k == "earlier" else v) for k, v in r.items() if k in names})  # label: derived
                 for r in doc["records"])
    return Findings(recs, tuple(registry()[1].values()))


def layer_tests(f: Findings) -> Any:
    """The study's question (does a rule's set draft better than the default?) on each model and
    budget a registered test asks it on (the registry's ``layer_test``), one row per test: the
    model, the drafters' budget (the amendment's, where the record states one that names it), the
    test, its arms' verdict words, and what they say of the default: "not beaten" (no arm
    supported), "beaten" (an arm supported) or "not testable" (every arm)."""
    import pandas as pd

    rows = []
    for t in (t for t in f.tests if t.layer_test):
        recs = f.of(t.id)
        if not recs:
            continue
        amended = [h for h in t.history if h.get("budget")] if any(r.amended for r in recs) else []
        words = Counter(r.label for r in recs)
        held = ("not testable" if all(r.word == "not testable" for r in recs)
                else "beaten" if any(r.word == "supported" for r in recs) else "not beaten")
        rows.append({"model": t.layer_test["model"], "budget": amended[-1]["budget"] if amended
                     else t.layer_test["budget"], "test": t.id,
                     "verdict": "; ".join(f"{n} {w}" if len(recs) > 1 else w for w, n in words.items()),
                     "the default": held})
    return pd.DataFrame(rows, columns=["model", "budget", "test", "verdict", "the default"])


def default_held(f: Findings) -> dict[str, int]:
    """How :func:`layer_tests`' rows read, for a sentence: ``tests`` and ``models`` with a row,
    ``held`` (no rule's set beat the default), ``beaten`` and ``not_testable``, and the
    ``models_held`` / ``models_testable`` on which the default held on every testable row, and
    ``beaten_on``: the models with a "beaten" row, in the table's order ("no model" when none)."""
    rows = layer_tests(f).to_dict("records")
    said = Counter(r["the default"] for r in rows)
    testable = [r for r in rows if r["the default"] != "not testable"]
    models = {r["model"] for r in testable}
    held = {m for m in models if all(r["the default"] == "not beaten" for r in testable if r["model"] == m)}
    return {"tests": len(rows), "models": len({r["model"] for r in rows}), "held": said["not beaten"],
            "beaten": said["beaten"], "not_testable": said["not testable"],
            "models_testable": len(models), "models_held": len(held),
            "beaten_on": ", ".join(dict.fromkeys(r["model"] for r in rows if r["the default"] == "beaten")) or "no model"}


def table(f: Findings, keys: Sequence[str] | None = None) -> Any:
    """The records as the glance page and the landing page show them: test, claim, statistic
    with its interval and n, p, and the verdict word (with its side)."""
    import pandas as pd

    rows = []
    for r in f.records if keys is None else [f[k] for k in keys]:
        q = quoted(r)
        rows.append({"test": r.key, "claim": r.claim, "statistic": q["figure"], "n": q["n"],
                     "p": q["p"] and f"{q['p']} ({r.p_kind})", "verdict": r.label})
    return pd.DataFrame(rows, columns=["test", "claim", "statistic", "n", "p", "verdict"])


def glue_key(key: str) -> str:
    """The glue name prefix of a record: "H5/last-k" -> "f_H5_last_k"."""
    return "f_" + re.sub(r"[^A-Za-z0-9]", "_", key)


def quoted(r: Finding) -> dict[str, str]:
    """What a page may quote of a record, as the text it shows: ``label`` (the word with its side),
    ``word``, ``figure`` (value, interval and base), ``value``, ``interval``, ``n`` (with its unit),
    ``p``, ``base``, ``compared``."""
    fmt = _fmt(r)
    return {"label": r.label, "word": r.word, "figure": _figure(r),
            "value": "" if r.value is None else f"{r.value:{fmt}}{'x' if r.null == 1.0 else ''}",
            "interval": r.interval, "n": f"{r.n} {r.unit}" if r.n else "",
            "p": "" if r.p is None else f"{r.p:.2g}", "base": "" if r.base is None else f"{r.base:.2f}",
            "compared": r.compared or ""}


def glued(f: Findings, keys: Iterable[str] | Mapping[str, str] | None = None) -> dict[str, str]:
    """What a page glues of each record: ``f_<name>_<field>`` for every field of :func:`quoted`, and
    ``f_<name>_key`` naming the record (the guard in ``tests/test_findings_guard.py`` reads it).
    ``keys``: record keys (``name`` is the key, :func:`glue_key`), or {name: key} where a page names
    a record it picks from the data ("scale": the best rule's arm of H7).

    >>> sorted(glued(Findings((Finding("H1", "H1", None, "c", "higher", None, "within noise", None, 0.1, -0.1,
    ...     0.3, 0.0, 96, "prompts", 0.5, "Holm", 1.3, None, None, "", "", "", ""),)), {"h1": "H1"}))[:3]
    ['f_h1_base', 'f_h1_compared', 'f_h1_figure']
    """
    pairs = ([(glue_key(r.key)[2:], r.key) for r in f.records] if keys is None else
             list(keys.items()) if isinstance(keys, Mapping) else [(glue_key(k)[2:], k) for k in keys])
    out = {}
    for name, key in pairs:
        out[f"f_{name}_key"] = key
        out.update({f"f_{name}_{field}": v for field, v in quoted(f.get(key)).items()})
    return out


def glue(f: Findings, keys: Iterable[str] | Mapping[str, str] | None = None) -> None:
    """Glue :func:`glued` for a page."""
    from activation_wave.study.glue import glue_values

    glue_values(**glued(f, keys))


def _figure(r: Finding) -> str:
    if r.value is None:
        return r.statistic
    unit = "x" if r.null == 1.0 else ""
    base = f" on a base of {r.base:.2f}" if r.base is not None else ""
    return f"{r.value:{_fmt(r)}}{unit} {r.interval}{base}"


def _fmt(r: Finding) -> str:
    """The format of a record's numbers: ratios to 2 places, tau differences to 3, rho with a sign."""
    return ".2f" if r.null == 1.0 else ("+.3f" if r.unit == "prompts" else "+.2f")


#: The README's block that quotes the records (filled by ``wave findings --readme``).
README_START, README_END = "<!-- findings:start -->", "<!-- findings:end -->"
def headline(f: Findings) -> dict[str, str]:
    """The records the README and the landing page quote, {the name pages glue them under: record
    key}: H1, the arm of H7 (16 times the prompts) of the set H1 found best, G1 (the second
    model), C2 (the third), H2 and C1 (llama.cpp, 1.5B)."""
    return {"h1": "H1", "scale": f"H7/{f.get('H1').compared or 'combined'}", "g1": "G1", "c2": "C2", "h2": "H2",
            "c1": "C1"}


def readme_block(f: Findings) -> str:
    """The README's findings block: a table of the headline records (claim, result with interval,
    n, p, verdict) and the tally, between :data:`README_START` and :data:`README_END`."""
    rows = ["| test | claim | result [95% interval] | n | p | verdict |", "|---|---|---|---|---|---|"]
    for key in headline(f).values():
        r, q = f.get(key), quoted(f.get(key))
        rows.append(f"| {r.key} | {r.claim} | {q['figure']} | {q['n']} | {q['p'] or '-'} | **{r.label}** |")
    tally = " · ".join(f"{w}: {n}" for w, n in f.tally().items())
    rows.append(f"| all | {len(f.records)} records of {len({r.test for r in f.records})} tests | {tally} | | | |")
    return "\n".join([README_START, *rows, README_END])


def fill_readme(readme: Path, f: Findings) -> bool:
    """Replace the block of ``readme`` by :func:`readme_block` (through the write layer; the file
    must hold the block's markers). True when the file changed."""
    from activation_wave.core import files

    text = readme.read_text()
    a, b = text.find(README_START), text.find(README_END)
    if a < 0 or b < a:
        raise files.WriteRefused(f"{readme} has no {README_START} ... {README_END} block: add the two markers where "
                                 "the findings go, then run `wave findings --readme` again")
    new = text[:a] + readme_block(f) + text[b + len(README_END):]
    if new == text:
        return False
    files.write_text(readme, new, lambda p: None if README_START in p.read_text() else "it has no findings block")
    return True


def _dig(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[part] if isinstance(doc, Mapping) else doc[int(part)]
    return doc


def drafters(cfg: StudyConfig, root: str | Path | None = None, registry_path: Path = REGISTRY) -> list[dict[str, Any]]:
    """The named drafters of the registry with the tau each page quotes for them (None where the
    run has no such result): name, layers, budget, seeds, which tau, its value, its page."""
    from activation_wave.core.results import load_benchmarks, read_json_object, results_dir

    doc = yaml.safe_load(registry_path.read_text())
    base, bench, out = results_dir(cfg, root).parent, load_benchmarks(), []
    for name, d in (doc.get("drafters") or {}).items():
        src = d["source"]
        try:
            if "bench" in src:
                value = _dig(bench[src["bench"]], src["path"])
            else:
                res = read_json_object(base / src["file"], "run the page that writes it")
                value = (next(s["tau"] for s in res["sets"] if s["set"] == src["set"]) if "set" in src else
                         next(p["tau"] for p in res["points"] if p["label"] == src["point"]) if "point" in src
                         else _dig(res, src["path"]))
        except (KeyError, IndexError, StopIteration, FileNotFoundError, TypeError, ValueError):
            value = None
        out.append({"drafter": name, "layers": d["layers"], "budget": d["budget"], "seeds": d["seeds"],
                    "which tau": d["tau"], "tau": None if value is None else round(float(value), 2), "page": d["page"]})
    return out
