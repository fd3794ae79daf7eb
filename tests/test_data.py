"""Prompt sets: the team's file, HumanEval, user JSONL files and their errors."""

import json
from collections import Counter

import pytest

from activation_wave.core.config import DataConfig
from activation_wave.models.prompts import TEAM_PROMPTS, PromptFileError, humaneval_prompts, load_prompts, read_prompt_jsonl


def test_team_prompts_cover_eight_categories_with_fixed_split():
    ps = read_prompt_jsonl(TEAM_PROMPTS)
    assert len(ps) >= 240
    cats = Counter(p.category for p in ps)
    assert set(cats) == {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}
    assert all(Counter(p.split for p in ps if p.category == c)["eval"] >= 4 for c in cats)
    assert len({p.text for p in ps}) == len(ps)


def test_humaneval_from_package():
    ps = humaneval_prompts()
    assert len(ps) == 164
    assert ps[0].id == "HumanEval/0" and "def has_close_elements" in ps[0].text
    assert sum(p.split == "eval" for p in ps) == 32  # HumanEval/4, /9, ..., /159


def test_small_subsets_are_balanced_across_categories():
    ps = load_prompts(DataConfig(sources=("team",), max_prompts_per_source=8))
    assert len({p.category for p in ps}) == 8


def test_user_jsonl_ignores_extra_fields(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"prompt": "hi", "extra": 1}) + "\n\n" + json.dumps({"prompt": "yo", "id": "b", "category": "x"}) + "\n")
    ps = load_prompts(DataConfig(sources=(str(f),)))
    assert [p.text for p in ps] == ["hi", "yo"] and ps[1].id == "b" and ps[1].category == "x"


@pytest.mark.parametrize("content, message", [
    ('{"prompt": "ok"}\n{"prompt": \n', r"p\.jsonl:2: not valid JSON"),
    ('{"text": "no prompt field"}\n', r"p\.jsonl:1: .*\"prompt\""),
    ('{"prompt": "a", "id": "x"}\n{"prompt": "b", "id": "x"}\n', r"p\.jsonl:2: duplicate id"),
    ('{"prompt": "a", "split": "test"}\n', r"p\.jsonl:1: split"),
    ('', "no prompts"),
])
def test_malformed_prompt_file_names_file_and_line(tmp_path, content, message):
    f = tmp_path / "p.jsonl"
    f.write_text(content)
    with pytest.raises(PromptFileError, match=message):
        read_prompt_jsonl(f)


def test_unknown_source():
    """Sources are checked in the config (issue 24), before any prompt is read."""
    from activation_wave.core.config import ConfigError

    with pytest.raises(ConfigError, match="'sharegpt' is not a prompt source"):
        DataConfig(sources=("sharegpt",))
