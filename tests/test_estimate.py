"""The paper profile's dry run works offline from a config alone (no weights, no hub)."""

import pytest

from activation_wave.cli import main
from activation_wave.core.config import load_config
from activation_wave.study.estimate import KNOWN_SHAPES, dry_run, model_shape


def test_known_shape_parameter_counts_match_published_sizes():
    assert 7.9e9 < KNOWN_SHAPES["meta-llama/Llama-3.1-8B-Instruct"].params < 8.2e9
    assert 70e9 < KNOWN_SHAPES["meta-llama/Llama-3.1-70B-Instruct"].params < 71.5e9
    assert 0.13e9 < KNOWN_SHAPES["smollm2-135m"].params < 0.14e9


@pytest.mark.parametrize("model, devices", [("meta-llama/Llama-3.1-8B-Instruct", 1), ("meta-llama/Llama-3.1-70B-Instruct", 3)])
def test_paper_dry_run_offline(model, devices, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = dry_run(load_config("paper", model=model))
    assert out["steps"]["load"]["devices"] == devices
    assert out["eagle3_default_layers"] == ([2, 16, 29] if devices == 1 else [2, 40, 77])
    assert out["steps"]["capture"]["disk_gib"] < out["steps"]["capture"]["all_records_disk_gib"]


def test_dry_run_cli(capsys):
    assert main(["dry-run", "--profile", "paper"]) == 0
    assert "Llama-3.1-8B" in capsys.readouterr().out


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no offline config"):
        model_shape("org/not-a-model")
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 128, '
                                          '"vocab_size": 100, "num_attention_heads": 4}')
    assert model_shape(str(tmp_path)).n_layers == 4


def test_sampled_responses_are_planned_for():
    one = dry_run(load_config("default"))["steps"]
    more = dry_run(load_config("default", {"data.samples_per_prompt": 2}))["steps"]
    assert more["responses"]["responses"] == 3 * one["responses"]["responses"]
    assert more["responses"]["hours"] > 2.9 * one["responses"]["hours"]
    assert more["capture"]["all_records_disk_gib"] > 2.5 * one["capture"]["all_records_disk_gib"]
