"""C2 again (issue 65, the fourteenth amendment): the design, its summary and how C2 is worded from it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from activation_wave.benchmarks import large_drafter as ld
from activation_wave.benchmarks import layer_test_1p5b as lt
from activation_wave.core.config import load_config
from activation_wave.draft.experiment import drafter_dir
from activation_wave.select.across_models import third_drafter_config
from activation_wave.study import findings
from activation_wave.study.chapters import cpu_payoff as cpu


class _Folder:
    def __init__(self, path):
        self.path = path


def test_the_design_is_the_registered_one_and_its_first_default_drafter_is_the_eighths(tmp_path):
    """Seed 0 of the default triple is the eighth amendment's committed drafter (no retraining);
    every other drafter differs from it by its seed and layers only, and they train seed by seed."""
    dconf = ld.drafter_config(third_drafter_config(load_config("default")))
    sets = {"eagle3-default": [2, 14, 25], "combined": [2, 25, 27]}
    jobs = lt.jobs(sets, dconf)
    assert [(name, c.seed) for name, _, c in jobs] == [("eagle3-default", 0), ("combined", 0), ("eagle3-default", 1),
                                                       ("combined", 1), ("eagle3-default", 2), ("combined", 2)]
    folder = _Folder(tmp_path)
    assert drafter_dir(folder, jobs[0][1], jobs[0][2]).name == "L2-14-25-1024f68829b4"  # data/drafters holds it
    assert all(dataclasses.replace(c, seed=0) == dconf for _, _, c in jobs)
    assert len({drafter_dir(folder, ids, c).name for _, ids, c in jobs}) == 6
    assert lt.SETS[0] == cpu.DEFAULT_SET and lt.NAME == cpu.LAYER_TEST


def test_the_benchmark_runs_only_when_named():
    from activation_wave.benchmarks.suite import OPT_IN, entries

    assert lt.NAME in OPT_IN and entries()[lt.NAME] is lt.run


def _taus(rng, base, shift, seeds=3, n=32):
    return base + shift + rng.normal(0, 0.05, size=(seeds, n))


def test_the_summary_pairs_each_set_with_the_default_over_seed_averaged_prompts():
    rng = np.random.default_rng(0)
    base = rng.uniform(1.1, 1.6, size=32)
    taus = {"eagle3-default": _taus(rng, base, 0.0), "combined": _taus(rng, base, -0.1)}
    s = lt.summarize(lt.SETS, {"eagle3-default": [2, 14, 25], "combined": [2, 25, 27]}, taus,
                     ok={"eagle3-default": True, "combined": True}, n_boot=2000)
    c = s["comparisons"]["combined"]
    assert c["hi"] < 0 and c["p_holm"] == c["p"] and c["n"] == 32  # one set compared: Holm is its own p
    assert -0.13 < c["mean"] < -0.07 and 0 < c["mde"] < 0.1
    assert s["sets"]["combined"]["seeds"] == 3 and s["not_compared"] == []
    # a set whose drafter failed the instrument check is reported, not compared
    s = lt.summarize(lt.SETS, {"eagle3-default": [2, 14, 25], "combined": [2, 25, 27]}, taus,
                     ok={"eagle3-default": True, "combined": False}, n_boot=200)
    assert s["comparisons"] == {} and s["not_compared"] == ["combined"]


def _entry(mean, lo, hi, p, ok=True):
    comparisons = {"combined": {"mean": mean, "lo": lo, "hi": hi, "p": p, "p_holm": p, "n": 32, "mde": 0.07}} if ok \
        else {}
    return {"reference": "eagle3-default", "comparisons": comparisons, "not_compared": [] if ok else ["combined"],
            "min_prompts": 16, "sets": {"eagle3-default": {"tau": 1.34, "layers": [2, 14, 25], "seeds": 3},
                                        "combined": {"tau": 1.30, "layers": [2, 25, 27], "seeds": 3}},
            "drafters": [{"instrument_ok": ok}]}


@pytest.mark.parametrize("mean,lo,hi,p,ok,word", [(-0.04, -0.07, -0.01, 0.004, True, "not supported"),
                                                 (0.01, -0.02, 0.04, 0.5, True, "within noise"),
                                                 (0.05, 0.02, 0.08, 0.002, True, "supported"),
                                                 (0.0, 0.0, 0.0, 1.0, False, "not testable")])
def test_c2s_latest_statement_is_the_amendments_with_the_first_kept_as_earlier(mean, lo, hi, p, ok, word):
    hs = cpu.evaluate_hypotheses(None, None, layer_test=_entry(mean, lo, hi, p, ok))
    assert [h.name for h in hs] == ["C1", "C2", "C2 (drafters that draft)"]
    alpha, tests = findings.registry()
    (c2,) = findings.from_hypotheses(hs, tests, alpha).of("C2")
    assert c2.word == word and c2.base == 1.34
    assert len(c2.earlier) == 1 and c2.amended  # the 128-response statement stays in the record, as earlier
    assert [h.name for h in cpu.evaluate_hypotheses(None, None)] == ["C1", "C2"]  # no entry: the first statement


def test_the_page_table_lists_each_seed_and_the_instrument_check():
    e = _entry(-0.04, -0.07, -0.01, 0.004)
    e["sets"]["eagle3-default"] |= {"tau_ci": [1.30, 1.38], "prompts": 32}
    e["sets"]["combined"] |= {"tau_ci": [1.26, 1.34], "prompts": 32}
    e["registration"] = lt.REGISTRATION
    e["drafters"] = [{"set": name, "seed": s, "tau": 1.3 + s / 100, "prompts_accepting": 30 - s, "prompts": 32,
                      "instrument_ok": True, "train_cpu_min": 70.0, "cpu": "AMD EPYC"}
                     for name in ("eagle3-default", "combined") for s in (2, 0, 1)]
    t = cpu.c2_frame(e)
    assert list(t["set"]) == ["eagle3-default", "combined"] and t.loc[0, "seeds"] == "0, 1, 2"
    assert t.loc[0, "tau per seed"] == "1.300, 1.310, 1.320" and t.loc[1, "prompts with an accepted draft"] == \
        "30/32, 29/32, 28/32"
    assert t.loc[0, "tau [95% interval]"] == "1.340 [1.300, 1.380]"
    v = cpu.c2_values(e)
    assert (v["c2_cpu_min"], v["c2_drafters"], v["c2_ok"], v["c2_rival"], v["c2_cpu"]) == (420, 6, 6, "combined",
                                                                                          "AMD EPYC")
    assert (v["c2_default_layers"], v["c2_seeds"], v["c2_mde"]) == ("[2, 14, 25]", 3, 0.07)
