"""Result objects round-trip through the results file; the one JSON converter."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from activation_wave.core.config import load_config
from activation_wave.core.results import from_jsonable, load_optional, load_result, save_result, to_jsonable


@dataclass(frozen=True)
class Inner:
    layers: tuple[int, ...]
    score: float | None


@dataclass(frozen=True)
class Outer:
    label: str
    best: Inner
    by_set: dict[str, Inner]
    curve: list[float]


def test_to_jsonable_converts_numpy_and_non_finite_values():
    doc = to_jsonable({"a": np.float32(0.5), "b": np.arange(3), "c": (1, np.int64(2)), "d": float("inf"),
                       "e": np.bool_(True), 3: float("nan")})
    assert doc == {"a": 0.5, "b": [0, 1, 2], "c": [1, 2], "d": None, "e": True, "3": None}
    json.dumps(doc)  # plain JSON types only


def test_result_object_round_trips_through_the_results_file(tmp_path):
    cfg = load_config("smoke")
    obj = Outer(label="x", best=Inner((2, 15, 27), 1.25), by_set={"a": Inner((1,), float("nan"))},
                curve=[0.1, 0.2])
    path = save_result("demo", obj, cfg, tmp_path)
    raw = json.loads(path.read_text())
    assert raw["name"] == "demo" and raw["config"]["profile"] == "smoke" and raw["best"]["layers"] == [2, 15, 27]
    back = load_result("demo", cfg, tmp_path, cls=Outer)
    assert back.best == Inner((2, 15, 27), 1.25)
    assert back.by_set["a"].score is None and back.curve == [0.1, 0.2]


def test_loading_a_file_from_another_version_names_the_fix(tmp_path):
    cfg = load_config("smoke")
    save_result("demo", {"layers": [1], "score": 0.5, "extra": 1}, cfg, tmp_path)
    with pytest.raises(ValueError, match="re-run its chapter"):
        load_result("demo", cfg, tmp_path, cls=Inner)
    with pytest.raises(FileNotFoundError, match="wave study --profile smoke --only missing"):
        load_result("missing", cfg, tmp_path)
    assert load_optional("missing", cfg, tmp_path) is None  # an optional page renders without it
    assert load_optional("demo", cfg, tmp_path)["extra"] == 1


def test_a_field_named_like_a_meta_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match="collide"):
        save_result("demo", {"name": "x"}, load_config("smoke"), tmp_path)


def test_from_jsonable_keeps_fixed_length_tuples():
    assert from_jsonable(tuple[int, float], [1, 2]) == (1, 2.0)
    assert math.isclose(from_jsonable(float, 3), 3.0)


def test_results_record_cache_keys_not_machine_paths(tmp_path, monkeypatch):
    from activation_wave.core.results import cache_key, cache_path

    root = tmp_path / "cache"
    monkeypatch.setenv("WAVE_CACHE", str(root))
    drafter = root / "capture" / "m-1" / "drafters" / "L2-x"
    path = save_result("demo", {"capture": str(root / "capture" / "m-1"), "runs": [{"path": drafter}],
                                "other": "/elsewhere/x", "note": "a sentence"}, load_config("smoke"), tmp_path)
    raw = json.loads(path.read_text())
    assert raw["capture"] == "capture/m-1" and raw["runs"][0]["path"] == "capture/m-1/drafters/L2-x"
    assert raw["other"] == "/elsewhere/x" and raw["note"] == "a sentence" and str(tmp_path) not in path.read_text()
    assert cache_key(drafter) == "capture/m-1/drafters/L2-x" and cache_key("data/results") == "data/results"
    assert cache_path(raw["runs"][0]["path"]) == drafter
    # files written before keys hold another machine's absolute path: re-rooted under this cache
    assert cache_path("/root/.cache/activation_wave/capture/m-1/drafters/L2-x") == drafter
    assert cache_path(tmp_path) == tmp_path  # an existing absolute path stays as it is


def test_chapter_7_names_where_the_third_models_responses_come_from(tmp_path):
    """The agreement check is quoted when the third model's responses come from llama.cpp,
    and its absence is said; a profile without a third model says nothing."""
    import json

    from activation_wave.core.config import load_config
    from activation_wave.core.results import results_dir
    from activation_wave.select.across_models import third_config
    from activation_wave.study.chapters.cross_model import responses_values

    assert responses_values(load_config("smoke"), tmp_path)["cross_third"] == "none"
    cfg = load_config("smoke", {"third.model": "qwen2.5-coder-1.5b", "third.engine": "llamacpp"})
    unchecked = responses_values(cfg, tmp_path)
    assert unchecked["cross_engine"] == "llama.cpp" and unchecked["cross_agree_n"] == 0
    folder = results_dir(third_config(cfg), tmp_path)
    folder.mkdir(parents=True)
    (folder / "llamacpp_agreement.json").write_text(json.dumps(
        {"agreement": {"identical": 7, "compared": 8, "mean_prefix_share": 0.9844}}))
    v = responses_values(cfg, tmp_path)
    assert (v["cross_agree_same"], v["cross_agree_n"], round(v["cross_agree_prefix"])) == (7, 8, 98)
