"""Strict configs and profiles."""

import pytest

from activation_wave.core.config import PROFILES, ConfigError, load_config, parse_overrides
from activation_wave.study.steps import study_config


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
    with pytest.raises(ConfigError, match="expected an integer"):
        load_config("smoke", {"capture.batch_size": "four"})
    with pytest.raises(ConfigError, match="true or false"):
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


@pytest.mark.parametrize("profile", PROFILES)
def test_second_architecture_pages_share_the_cross_model_capture(profile, tmp_path):
    """The study's per-chapter runs on the second architecture (model + dotted overrides)
    get exactly the config of the cross-model chapter, hence its capture cache."""
    from activation_wave.select.across_models import cross_config, cross_overrides
    from activation_wave.study.notebooks import SECOND_ARCH
    from activation_wave.study.runner import _runs

    cfg = load_config(profile)
    assert load_config(profile, cross_overrides(cfg), model=cfg.cross.model) == cross_config(cfg)
    runs = _runs(profile, None, tmp_path, {"profile": profile, "model": "", "overrides": "{}"}, None)
    second = [r for r in runs if r[0].startswith("second/")]
    assert [r[0].split("/")[1] for r in second] == SECOND_ARCH
    assert all(r[2].parent == tmp_path / "second" and cfg.cross.model in r[4] for r in second)
    assert {r[3]["model"] for r in second} == {cfg.cross.model}
    # a study run on the cross model itself shows the profile's own model as the second one
    swapped = [r for r in _runs(profile, cfg.cross.model, tmp_path, {}, None) if r[0].startswith("second/")]
    assert {r[3]["model"] for r in swapped} == {cfg.model}


@pytest.mark.parametrize("profile", PROFILES)
def test_third_architecture_pages_share_its_capture(profile, tmp_path):
    """A profile with a ``third`` model gets chapters 1-5 on it, with exactly the config
    :func:`third_config` gives (so chapter 7 reads the same capture); one without gets none."""
    from activation_wave.select.across_models import extra_architectures, third_config, third_overrides
    from activation_wave.study.notebooks import THIRD_ARCH
    from activation_wave.study.runner import _runs

    cfg = load_config(profile)
    runs = _runs(profile, None, tmp_path, {"profile": profile, "model": "", "overrides": "{}"}, None)
    third = [r for r in runs if r[0].startswith("third/")]
    if not cfg.third.model:
        assert third == [] and len(extra_architectures(cfg)) == 1
        assert "07b_qwen" not in [r[0] for r in runs] and "07_gemma" in [r[0] for r in runs]
        with pytest.raises(ValueError, match="names no third architecture"):
            third_config(cfg)
        return
    assert load_config(profile, third_overrides(cfg), model=cfg.third.model) == third_config(cfg)
    assert third_config(cfg).data.engine == cfg.third.engine
    assert [r[0].split("/")[1] for r in third] == THIRD_ARCH and "07b_qwen" in [r[0] for r in runs]
    assert all(r[2].parent == tmp_path / "third" and cfg.third.model in r[4] and "{doc}`07b_qwen`" in r[4]
               for r in third)
    assert [c.model for c in extra_architectures(cfg)] == [cfg.cross.model, cfg.third.model]
    # naming the third model as the study's model shows no third page of it
    assert not [r for r in _runs(profile, cfg.third.model, tmp_path, {}, None) if r[0].startswith("third/")]
