"""One record per registered test, and every page agrees with it (issue 62).

The findings record (``data/results/default/findings.json``) is what the chapters' results
files give today; every page of the book (main parts, the per-architecture appendix pages, the
markdown pages) and the README quote it without disagreeing; and the guard catches each kind of
disagreement when one is planted (``test_the_guard_catches_*``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from activation_wave.core.config import load_config
from activation_wave.core.paths import REPO_ROOT
from activation_wave.study import agreement, findings
from activation_wave.study import pages as P
from activation_wave.study.hypotheses import Hypothesis

CFG = load_config("default")


@pytest.fixture(scope="module")
def F() -> findings.Findings:
    return findings.load(CFG)


def test_the_committed_record_is_what_the_results_give_today(F):
    fresh = findings.evaluate(CFG)
    assert [r.key for r in fresh.records] == [r.key for r in F.records]
    for new, old in zip(fresh.records, F.records):
        assert findings.quoted(new) == findings.quoted(old), f"{new.key}: run `wave findings --profile default`"
    assert F.tally() == fresh.tally() and sum(F.tally().values()) == len(F.records)


def test_every_registered_test_is_in_the_registry_once_with_its_registration():
    alpha, tests = findings.registry()
    assert alpha == 0.05 and len(tests) == len(set(tests))
    for t in tests.values():
        assert t.direction in ("higher", "lower", "either") and t.lab.startswith("lab/")
        assert (REPO_ROOT / "book" / f"{t.lab.split('#')[0]}.md").is_file(), t.id
        assert len(t.registered["commit"]) >= 7 and t.registered["date"].startswith("2026-")
    # a test restated by an amendment is one test with a history, not two
    assert "C1" in tests and tests["C1"].history and not any("corpus" in k for k in tests)


def test_an_amended_test_is_one_record_with_its_earlier_statement(F):
    c1 = [r for r in F.records if r.test == "C1"]
    assert len(c1) == 1 and c1[0].amended and c1[0].earlier and c1[0].earlier[0]["word"] in findings.WORDS


@pytest.mark.parametrize("direction, lo, hi, null, p, want", [
    ("higher", 0.01, 0.05, 0.0, 0.01, ("supported", "higher")),
    ("higher", -0.05, -0.01, 0.0, 0.01, ("not supported", "lower")),
    ("higher", -0.01, 0.05, 0.0, 0.5, ("within noise", None)),
    ("higher", 0.01, 0.05, 0.0, 0.06, ("within noise", None)),  # the interval excludes 0, Holm does not
    ("either", -0.05, -0.01, 0.0, 0.01, ("supported", "lower")),
    ("lower", -0.05, -0.01, 0.0, None, ("supported", "lower")),
    ("higher", 0.3, 0.4, 1.0, None, ("not supported", "slower")),
    ("higher", 0.9, 1.2, 1.0, None, ("within noise", None)),
    ("higher", None, None, 0.0, None, ("not testable", None))])
def test_one_rule_words_every_record(direction, lo, hi, null, p, want):
    assert findings.verdict(direction, lo, hi, null, p) == want


def test_a_drafter_that_accepts_nothing_makes_a_test_not_testable():
    _, tests = findings.registry()
    h = Hypothesis("C2", "", "", None, "", (0.004, 0.008), value=0.006, p=0.0002, n=32)
    assert findings.from_hypotheses([h], tests).records[0].word == "not testable"


def _h(name, lo, hi, p=0.01, ok=True):
    return Hypothesis(name, "", "", ok or None, "", (lo, hi), value=(lo + hi) / 2, p=p, n=32)


def test_the_layer_tests_say_on_which_models_and_budgets_the_default_held():
    """One row per test the registry marks as the study's question: "beaten" when an arm is
    supported, "not beaten" otherwise, "not testable" when no arm could be tested; an amended
    test's row names the amendment's budget once the record states it."""
    _, tests = findings.registry()
    hs = [_h("H1", -0.03, -0.01), _h("H7 (combined)", 0.01, 0.03), _h("H7 (last-k)", -0.02, 0.01, 0.5),
          _h("G1", -0.02, 0.02, 0.7), _h("C2", 0.0, 0.01, ok=False)]
    F = findings.from_hypotheses(hs, tests)
    t = findings.layer_tests(F).set_index("test")
    assert list(t.index) == ["H1", "H7", "G1", "C2"]
    assert list(t["the default"]) == ["not beaten", "beaten", "not beaten", "not testable"]
    assert t.loc["H7", "verdict"] == "1 supported; 1 within noise" and t.loc["C2", "budget"] == "one epoch on 128 responses"
    assert findings.default_held(F) == {"tests": 4, "models": 3, "held": 2, "beaten": 1, "not_testable": 1,
                                        "models_testable": 2, "models_held": 1, "beaten_on": "SmolLM2-135M"}
    # C2 restated by the fourteenth amendment: its row takes the amendment's budget and word
    F = findings.from_hypotheses(hs + [_h("C2 (drafters that draft)", -0.05, -0.01)], tests)
    row = findings.layer_tests(F).set_index("test").loc["C2"]
    assert row["budget"] == tests["C2"].history[-1]["budget"] and row["the default"] == "not beaten"
    assert findings.default_held(F)["models_testable"] == 3
    # every row not testable (the smoke profile, which trains no 1.5B drafters and states C2 alone)
    F = findings.from_hypotheses([_h("C2", 0.0, 0.01, ok=False)], tests)
    assert findings.default_held(F) == {"tests": 1, "models": 1, "held": 0, "beaten": 0, "not_testable": 1,
                                        "models_testable": 0, "models_held": 0, "beaten_on": "no model"}


def test_a_hypothesis_no_test_registers_is_refused():
    _, tests = findings.registry()
    with pytest.raises(ValueError, match="register test H9 first"):
        findings.from_hypotheses([Hypothesis("H9", "", "", True, "", (0.1, 0.2))], tests)


def _pages() -> list[Path]:
    entries = P.main_pages() + P.architecture_pages()
    return [P.page_file(e) for e in entries]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(P.BOOK)))
def test_every_page_agrees_with_the_record(page, F):
    problems = agreement.page_problems(page, F)
    assert not problems, f"{page.relative_to(P.BOOK)}: " + "; ".join(problems[:8])


def test_the_readme_quotes_the_record(F):
    text = (REPO_ROOT / "README.md").read_text()
    assert findings.readme_block(F) in text, "run `wave findings --profile default --readme`"
    assert not agreement.text_problems(text, F)


# ------------------------------------------------------------------ the guard, planted defects
def _nb(markdown: str, glued: dict[str, object]) -> dict:
    outs = [{"output_type": "display_data", "metadata": {"scrapbook": {"name": k, "mime_prefix": ""}},
             "data": {"text/plain": repr(v)}} for k, v in glued.items()]
    return {"cells": [{"cell_type": "markdown", "source": markdown, "metadata": {}},
                      {"cell_type": "code", "source": "", "metadata": {}, "outputs": outs}]}


def test_the_guard_catches_a_glued_number_that_differs_from_the_record(F):
    good = findings.glued(F, {"h1": "H1"})
    assert not agreement.glue_problems(_nb("", good), F)
    bad = dict(good, f_h1_figure="+0.018 [+0.011, +0.025]")
    assert agreement.glue_problems(_nb("", bad), F) == [
        f"f_h1_figure = '+0.018 [+0.011, +0.025]', the record H1 says {good['f_h1_figure']!r}"]
    wrong_word = dict(good, f_h1_label="supported")
    assert "f_h1_label" in agreement.glue_problems(_nb("", wrong_word), F)[0]


def test_the_guard_catches_a_verdict_word_that_differs_from_the_record(F):
    word = F["H2"].word
    other = next(w for w in findings.WORDS if w != word)
    assert not agreement.text_problems(f"Over the triples, H2 is {word}.", F)
    assert agreement.text_problems(f"Over the triples, H2 is {other}.", F)
    # a table row that names the test is one statement
    assert agreement.text_problems(f"| H2 | rho | {other} |", F)


def test_the_guard_catches_supported_beside_an_interval_that_includes_no_effect(F):
    assert agreement.text_problems("The random set is supported: +0.003 [-0.007, +0.013].", F)
    assert agreement.text_problems("n-gram is supported at 1.21x [0.96, 1.55].", F)
    assert not agreement.text_problems("The set is not supported: -0.020 [-0.030, -0.009].", F)


def test_the_guard_catches_a_value_glued_twice_and_a_name_never_glued():
    nb = _nb("H1 is {glue:text}`f_h1_label` and {glue:text}`missing`.", {"f_h1_label": "within noise"})
    nb["cells"][1]["outputs"] *= 2
    problems = agreement.glue_name_problems(nb)
    assert "'f_h1_label' glued 2 times (the last one wins silently)" in problems
    assert "'missing' is used by the markdown but never glued" in problems


def test_the_guard_catches_typed_chapter_numbers_and_machine_paths():
    page = P.PageText(prose="See chapter 6's budget.", text="See chapter 6's budget.",
                      outputs="read from /root/.cache/activation_wave/capture/x")
    problems = " ".join(P.page_problems(page, None))
    assert "chapter 6" in problems and "/root/" in problems


def test_each_executed_page_glues_every_name_it_uses_once():
    for page in _pages():
        if page.suffix == ".ipynb":
            nb = json.loads(page.read_text())
            assert not agreement.glue_name_problems(nb), page.relative_to(P.BOOK)


def test_a_planted_copy_of_a_real_page_fails(F):
    """The landing page as committed passes; the same page with one glued word changed fails."""
    page = P.page_file("chapters/intro")
    nb = json.loads(page.read_text())
    assert not agreement.glue_problems(nb, F)
    bad = copy.deepcopy(nb)
    for cell in bad["cells"]:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook", {})
            if meta.get("name") == "f_h1_label":
                o["data"][meta["mime_prefix"] + "text/plain"] = "'supported'"
    assert agreement.glue_problems(bad, F)


def test_wave_findings_prints_the_records(capsys, F):
    """`wave findings --json` prints the same records and tally as the committed file."""
    from activation_wave.cli import main

    assert main(["findings", "--profile", "default", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tally"] == F.tally() and [r["key"] for r in doc["records"]] == [r.key for r in F.records]
