"""Strict configs and profiles."""

import pytest

from activation_wave.config import PROFILES, ConfigError, load_config, parse_overrides
from activation_wave.pipeline import study_config


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_load(profile):
    cfg = load_config(profile)
    assert cfg.profile == profile
    assert cfg.data.max_new_tokens > 0


def test_overrides_are_typed():
    cfg = load_config("smoke", {"capture.batch_size": "3", "select.filtered": "false", "data.sources": "team,humaneval"})
    assert cfg.capture.batch_size == 3
    assert cfg.select.filtered is False
    assert cfg.data.sources == ("team", "humaneval")


def test_unknown_keys_rejected_with_known_keys_listed():
    with pytest.raises(ConfigError, match="known keys"):
        load_config("smoke", {"capture.batchsize": 4})
    with pytest.raises(ConfigError, match="unknown section"):
        load_config("smoke", {"captur.batch_size": 4})
    with pytest.raises(ConfigError, match="unknown profile"):
        load_config("fast")
    with pytest.raises(ConfigError, match="expected int"):
        load_config("smoke", {"capture.batch_size": "four"})
    with pytest.raises(ConfigError, match="true/false"):
        load_config("smoke", {"select.filtered": "maybe"})


def test_frozen():
    cfg = load_config("smoke")
    with pytest.raises(Exception):
        cfg.data.max_new_tokens = 3  # type: ignore[misc]


def test_cli_and_papermill_overrides_agree():
    a = load_config("smoke", parse_overrides(["data.max_new_tokens=9"]), model="gemma3-270m")
    b = study_config("smoke", model="gemma3-270m", data__max_new_tokens=9)
    assert a == b
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["data.max_new_tokens"])
