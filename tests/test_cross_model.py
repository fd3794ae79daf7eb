"""The other architectures' pages: which models each compares, and the values they glue
(planted results, every branch of the words)."""

from __future__ import annotations

import math

import pytest

from activation_wave.core.config import load_config
from activation_wave.select.across_models import ModelSummary
from activation_wave.study.chapters import cross_model as ch


def _summary(model, n=4):
    return ModelSummary(model=model, n_layers=n, hidden_size=8, ids=list(range(n + 1)),
                        relative_depth=[i / n for i in range(n + 1)], entropy=[1.0] * (n + 1),
                        cka=[[1.0] * (n + 1)] * (n + 1), compartments=[(0, 1), (2, n)],
                        sets={"combined": [1, 2, 4], "eagle3-default": [2, 2, 1]}, default=[2, 2, 1],
                        percentile={"combined": 99.5, "eagle3-default": 40.0}, n_tokens=100, filtered=True)


def test_each_page_compares_the_study_model_with_one_other():
    cfg = load_config("default")
    assert ch.other_config(cfg, "cross").model == "gemma3-270m"
    assert ch.other_config(cfg, "third").model == "qwen2.5-coder-1.5b"
    assert ch.other_config(load_config("smoke"), "third") is None
    with pytest.raises(ValueError, match="cross"):
        ch.other_config(cfg, "fourth")
    assert ch.NAMES == {"cross": "07_cross_model", "third": "07b_third_model"}


def test_model_values_name_the_models_plainly_and_render_without_a_second():
    v = ch.model_values(ch.CrossModelResult([_summary("smollm2-135m"), _summary("gemma3-270m")]))
    assert (v["cross_0_name"], v["cross_1_name"]) == ("SmolLM2-135M", "Gemma-3-270M")
    assert v["cross_1_compartments"] == 2 and v["cross_1_combined"] == "[1, 2, 4]" and v["cross_1_default_pct"] == 40.0
    alone = ch.model_values(ch.CrossModelResult([_summary("smollm2-135m")]))
    assert set(alone) == set(v) and alone["cross_1_name"] == "none" and math.isnan(alone["cross_1_default_pct"])
    assert list(ch.percentile_table(ch.CrossModelResult([_summary("gemma3-270m")]))["rule"]) == ["combined",
                                                                                               "EAGLE-3 default"]


def _filtering(removed):
    return {"sink": {"removed": removed, "cliff": {"from_layer": 11, "to_layer": 12, "drop": 2.19}}}


@pytest.mark.parametrize("removed, words", [("all", "all three"), ("some", "some, not all"), ("none", "none")])
def test_outlier_values_word_how_many_treatments_remove_the_fall(removed, words):
    v = ch.outlier_values(_filtering("all"), _filtering(removed))
    assert v["tf_first_removed"] == "all three" and v["tf_other_removed"] == words
    assert (v["tf_other_from"], v["tf_other_to"], v["tf_other_drop"]) == (11, 12, 2.19)


def test_outlier_values_without_the_filtering_page_say_not_measured():
    v = ch.outlier_values(_filtering("all"), None)
    assert v["tf_other_removed"] == ch.NOT_MEASURED and v["tf_other_to"] == -1 and math.isnan(v["tf_other_drop"])
    assert set(v) == set(ch.outlier_values(None, None))
