"""Guards over what a reader of the book sees (activation_wave.study.pages): the checker
finds each defect planted in a page (the pages themselves are checked in test_book_pages.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from activation_wave.study import pages as P




def _nb(tmp_path: Path, markdown: list[str], glued: dict[str, str] | None = None,
        shown: list[dict] | None = None) -> Path:
    """A tiny executed notebook: markdown cells and one code cell that glued ``glued`` and
    showed the outputs ``shown``."""
    outputs = [{"output_type": "display_data", "data": {"application/papermill.record/text/plain": v},
                "metadata": {"scrapbook": {"mime_prefix": "application/papermill.record/", "name": k}}}
               for k, v in (glued or {}).items()] + (shown or [])
    cells = [{"cell_type": "markdown", "metadata": {}, "source": m} for m in markdown]
    cells.append({"cell_type": "code", "metadata": {}, "source": "glue()", "outputs": outputs, "execution_count": 1})
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _problems(tmp_path: Path, text: str, glued: dict[str, str] | None = None, budget: int | None = None) -> list[str]:
    return P.page_problems(P.reader_text(_nb(tmp_path, [text], glued)), budget)


def test_reader_text_substitutes_glue_and_skips_code_and_try_it(tmp_path):
    page = P.reader_text(_nb(tmp_path, [
        "# Title\n\nTau is {glue:text}`tau:.2f` over {glue:text}`n:d` prompts, {term}`CKA` too.",
        "```{admonition} Answer\nThe default holds.\n```\n\n```python\nsecret_code_name = 1\n```",
        "```{glue:figure} fig\n:name: fig-x\n\nA caption with words.\n```",
        "## Try it\n\nRun `wave select --json` and look at ledger_key."],
        {"tau": "1.23456", "n": "32"}))
    assert "Tau is 1.23 over 32 prompts, CKA too." in page.prose
    assert "Answer" in page.prose and "The default holds." in page.prose
    assert "secret_code_name" not in page.text
    assert "A caption with words." in page.text and "A caption with words." not in page.prose
    assert "ledger" not in page.text


@pytest.mark.parametrize(("text", "found"), [
    ("The eighth amendment trained longer.", "lab-record word 'amendment'"),
    ("Measured on its stage 3 drafter.", "lab-record word 'stage 3'"),
    ("At 16x@B2 the drafter reads more.", "lab-record word '16x@'"),
    ("The B2 budget was larger.", "lab-record word 'B2'"),
    ("As the issue asked, it ran.", "lab-record word 'issue'"),
    ("Read from the ledger entry.", "lab-record word 'ledger'"),
    ("Committed in d29d550 before training.", "lab-record word 'd29d550'"),
    ("The speedup_vs_plain_t0 column rose.", "lab-record word 'speedup_vs_plain_t0'"),
    ("Empty until the screen has run.", "placeholder 'empty until'"),
    ("The recipe study has not finished.", "placeholder 'has not finished'"),
    ("It rose from 1.000 to 1.000 nats.", "'from 1.000 to 1.000': equal numbers"),
    ("Acceptance\tau was low.", "control character '\\t'"),
    ("It removes the the cliff.", "repeated word 'the the'"),
    ("As chapter 9 shows, it pays.", "'chapter 9' typed into prose"),
    ("The map falls into 1 compartments, 0-28.", "'1 compartments': one, in the plural"),
    ("The default reads from 3 compartment.", "'3 compartment': a count, in the singular"),
    ("Layer entropy rises with depth, from 4.72 nats to 4.29 at layer 12.", "'rises with depth, from 4.72"),
    ("Entropy falls from 1.2 to 3.4 nats.", "'falls from 1.2 to 3.4': the numbers go the other way"),
    ("The cache sits in /root/.cache/activation_wave/capture/x.", "machine path '/root/.cache"),
])
def test_each_planted_defect_is_found(tmp_path, text, found):
    problems = _problems(tmp_path, text)
    assert any(p.startswith(found) for p in problems), problems


def test_a_glued_value_is_checked_like_typed_text(tmp_path):
    problems = _problems(tmp_path, "Tau went from {glue:text}`a:.2f` to {glue:text}`b:.2f`.", {"a": "1.001", "b": "0.999"})
    assert any("equal numbers" in p for p in problems)
    assert not _problems(tmp_path, "Tau went from {glue:text}`a:.2f` to {glue:text}`b:.2f`.", {"a": "1.1", "b": "1.3"})


def test_long_sentences_and_budgets(tmp_path):
    words = [f"w{i}" for i in range(200)]
    long = " ".join(words[:P.MAX_SENTENCE + 1]) + "."
    assert any(p.startswith(f"sentence of {P.MAX_SENTENCE + 1} words") for p in _problems(tmp_path, long))
    short = " ".join(words[:P.MAX_SENTENCE]) + ". " + "Then " + " ".join(words[101:110]) + "."
    assert not _problems(tmp_path, short)
    assert _problems(tmp_path, short, budget=P.MAX_SENTENCE + 9) == [f"{P.MAX_SENTENCE + 10} words of prose (budget {P.MAX_SENTENCE + 9})"]


def test_a_clean_page_has_no_problems(tmp_path):
    text = ("# Does the default hold?\n\n```{admonition} Answer\nYes: tau 1.52 [1.47, 1.58], n = 32, within noise.\n```\n\n"
            "The drafter reads three layers, as {doc}`the selection page <05_layer_selection>` shows.\n\n"
            "| rule | tau |\n|---|---|\n| default | 1.52 |")
    assert _problems(tmp_path, text, budget=100) == []


def test_a_try_it_paragraph_is_skipped_to_its_end(tmp_path):
    page = P.reader_text(_nb(tmp_path, ["Before.\n\n**Try it.** Run the smoke profile\nand read ledger_key in it.\n\nAfter."]))
    assert "Before." in page.text and "After." in page.text
    assert "ledger_key" not in page.text and "smoke" not in page.text


def test_a_sentence_may_start_with_bold(tmp_path):
    text = " ".join(f"w{i}" for i in range(40)) + ". **Part I** " + " ".join(f"v{i}" for i in range(40)) + "."
    assert not _problems(tmp_path, text)


def test_a_value_glued_by_another_notebook_is_read_from_it(tmp_path):
    _nb(tmp_path, [], {"verdict": "'within noise'", "tau": "1.2345"})
    page = tmp_path / "other.md"
    page.write_text("The set is {glue:text}`page.ipynb::verdict`, tau {glue:text}`page.ipynb::tau:.2f`.")
    assert P.reader_text(page).prose == "The set is within noise, tau 1.23."


def test_counts_and_directions_that_hold_are_not_flagged(tmp_path):
    text = ("The map falls into 1 compartment and 4 compartments over 4096 response positions. Entropy rises "
            "from 4.29 to 4.72 nats and falls from 4.72 to 2.20 at layer 1; layers [1, 2] and index 1 sets it.")
    assert _problems(tmp_path, text) == []


def test_machine_paths_and_markdown_tables_in_outputs_are_found(tmp_path):
    shown = [{"output_type": "stream", "name": "stderr",
              "text": ["/work/main/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning\n"]},
             {"output_type": "display_data", "metadata": {},
              "data": {"text/markdown": ["| | |\n", "|---|---|\n", "| model | smollm2-135m |"], "text/plain": ["<Markdown>"]}}]
    problems = P.page_problems(P.reader_text(_nb(tmp_path, ["# A page"], shown=shown)), None)
    assert any(p.startswith("machine path '/work/main/.venv") for p in problems), problems
    assert any(p.startswith("a markdown table in an output") for p in problems), problems
    clean = [{"output_type": "stream", "name": "stdout", "text": ["14 shards at <cache>/capture/smollm2-135m-1\n"]}]
    assert P.page_problems(P.reader_text(_nb(tmp_path, ["# A page"], shown=clean)), None) == []


def test_links_citations_math_and_code_read_as_the_book_prints_them(tmp_path):
    """A sentence is counted as a reader reads it: a {doc} link as the linked page's title, a
    citation as "Name et al. (year)", an inline formula and a code span with their words."""
    (tmp_path / "other.md").write_text("# Which layers do the selection rules choose?\n\nText.")
    page = P.reader_text(_nb(tmp_path, [
        "As {doc}`other` shows, {cite:t}`skean2025layer` track it; $\\lambda = 0.5$ picks `wave select` sets."]))
    assert "As Which layers do the selection rules choose? shows, Skean et al. (2025) track it" in page.prose
    assert page.prose.split().count("Code") == 2 and "lambda" in page.prose.split()
    assert len(page.prose.split()) == 22


def test_inline_math_counts_toward_a_sentence(tmp_path):
    """55 words, a formula of five (S, 2, a, b, c) and one more: 61 words (the formula is not one word)."""
    text = " ".join(f"w{i}" for i in range(55)) + " $S_2(\\{a, b, c\\})$ ends."
    assert any(p.startswith("sentence of 61 words") for p in _problems(tmp_path, text)), _problems(tmp_path, text)


def test_a_formula_does_not_repeat_the_word_before_it(tmp_path):
    assert _problems(tmp_path, "The Gram matrix is $K K^T$ and the triple's $S_2$ is high.") == []
