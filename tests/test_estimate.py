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


def test_sampled_responses_are_planned_for(monkeypatch):
    monkeypatch.setenv("WAVE_MEMORY_GIB", "24")  # two samples with fp32 training records pass 8 GiB (estimated)
    one = dry_run(load_config("default"))["steps"]
    more = dry_run(load_config("default", {"data.samples_per_prompt": 2}))["steps"]
    assert more["responses"]["responses"] == 3 * one["responses"]["responses"]
    assert more["responses"]["hours"] > 2.9 * one["responses"]["hours"]
    assert more["capture"]["all_records_disk_gib"] > 2.5 * one["capture"]["all_records_disk_gib"]


# ----------------------------------------------------------------------------- memory (issue 24)

from activation_wave.core.config import ConfigError, StudyConfig  # noqa: E402
from activation_wave.study.estimate import GiB, Shape, check_fit, estimate_peak_gib  # noqa: E402

SMALL = Shape(n_layers=2, hidden=8, intermediate=16, vocab=100, heads=2, kv_heads=1, tied=True)


def test_peak_formulas_on_a_small_shape():
    cfg = load_config("smoke", {"capture.batch_size": 2, "capture.max_length": 10, "data.batch_size": 3,
                                "data.max_new_tokens": 5, "metrics.token_budget": 50, "select.k": 1,
                                "draft.batch_tokens": 20, "draft.ttt_steps": 2, "draft.draft_vocab": 30,
                                "draft.workers": 2, "data.max_prompts_per_source": 1, "data.samples_per_prompt": 0})
    w = SMALL.params * 4
    est = estimate_peak_gib(cfg, SMALL)
    b, s, hd = 3, 15, 4
    responses = w + 2 * 2 * b * 1 * hd * s * 4 + b * s * (4 * 8 + 3 * 16) * 4 + b * 2 * s * s * 4 + 2 * b * 100 * 4
    capture = w + 2 * 4 * 2 * 10 * 8 * 4 + 2 * 10 * 100 * 4 + 2 * 10 * 3 * 16 * 4 + 2 * 2 * 10 * 10 * 4
    metrics = 50 * 3 * 8 * 20 + 2 * 8 ** 2 * 8
    records = 2 * 10 * 2 * 8 * 2  # 2 sources x 1 prompt, min(10, 5 + 200) tokens, k + 1 layers, bf16
    draft_params = 5 * 8 * 8 + 3 * 8 * 16 + 30 * 8
    drafter = 2 * (w + records + draft_params * 16 + 20 * 2 * (3 * 30 + 7 * 8) * 4)
    expect = {"load": w, "responses": responses, "capture": capture, "metrics": metrics, "drafter": drafter}
    assert est == {k: round(v / GiB, 2) for k, v in expect.items()}
    # each grows with its keys
    bigger = estimate_peak_gib(load_config("smoke", {"capture.batch_size": 16}), KNOWN_SHAPES["smollm2-135m"])
    assert bigger["capture"] > 1.9 * estimate_peak_gib(load_config("smoke"), KNOWN_SHAPES["smollm2-135m"])["capture"] - 1


@pytest.mark.parametrize("profile", ["smoke", "default"])
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_shipped_profiles_fit_the_default_limit(profile, model, monkeypatch):
    monkeypatch.delenv("WAVE_MEMORY_GIB", raising=False)
    cfg = load_config(profile, model=model)
    check_fit(cfg, KNOWN_SHAPES[model])
    out = dry_run(cfg)
    assert max(out["memory"]["peak_gib"].values()) <= 8 and out["memory"]["over_limit"] == []


def test_too_large_a_batch_is_refused_in_one_line_naming_the_key(monkeypatch, capsys):
    monkeypatch.delenv("WAVE_MEMORY_GIB", raising=False)
    cfg = load_config("smoke", {"capture.batch_size": 1000})
    with pytest.raises(ConfigError, match=r"step capture needs ~\d.* above the 8 GiB limit") as err:
        check_fit(cfg, KNOWN_SHAPES["smollm2-135m"])
    msg = str(err.value)
    assert "\n" not in msg and "WAVE_MEMORY_GIB" in msg
    fit = int(msg.split("--set capture.batch_size=")[1].split(")")[0])
    assert 1 <= fit < 1000
    check_fit(load_config("smoke", {"capture.batch_size": fit}), KNOWN_SHAPES["smollm2-135m"])
    with pytest.raises(ConfigError):
        check_fit(load_config("smoke", {"capture.batch_size": fit + 1}), KNOWN_SHAPES["smollm2-135m"])
    assert main(["dry-run", "--set", "capture.batch_size=1000"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "capture.batch_size" in lines[0]


def test_memory_limit_from_the_environment(monkeypatch):
    cfg = load_config("smoke", {"metrics.token_budget": 100000})
    monkeypatch.delenv("WAVE_MEMORY_GIB", raising=False)
    with pytest.raises(ConfigError, match="metrics.token_budget to at most"):
        check_fit(cfg, KNOWN_SHAPES["smollm2-135m"])
    monkeypatch.setenv("WAVE_MEMORY_GIB", "64")
    check_fit(cfg, KNOWN_SHAPES["smollm2-135m"])
    monkeypatch.setenv("WAVE_MEMORY_GIB", "0.5")
    with pytest.raises(ConfigError, match="above the 0.5 GiB limit"):
        check_fit(load_config("smoke"), KNOWN_SHAPES["smollm2-135m"])
    for bad in ("abc", "-3", "0", "inf", "nan"):
        monkeypatch.setenv("WAVE_MEMORY_GIB", bad)
        with pytest.raises(ConfigError, match="WAVE_MEMORY_GIB = .* is not a positive number"):
            check_fit(load_config("smoke"), KNOWN_SHAPES["smollm2-135m"])


def test_paper_dry_run_reports_without_refusing_unless_the_limit_is_set(monkeypatch, capsys):
    monkeypatch.delenv("WAVE_MEMORY_GIB", raising=False)
    cfg = load_config("paper", model="meta-llama/Llama-3.1-8B-Instruct")
    out = dry_run(cfg)
    assert "capture" in out["memory"]["over_limit"]
    with pytest.raises(ConfigError, match="WAVE_MEMORY_GIB"):  # the steps refuse
        check_fit(cfg, KNOWN_SHAPES["meta-llama/Llama-3.1-8B-Instruct"])
    assert main(["dry-run", "--profile", "paper"]) == 0
    assert "over the limit" in capsys.readouterr().out
    monkeypatch.setenv("WAVE_MEMORY_GIB", "4000")
    assert dry_run(cfg)["memory"]["over_limit"] == []
    monkeypatch.setenv("WAVE_MEMORY_GIB", "16")
    assert main(["dry-run", "--profile", "paper"]) == 2


def test_responses_from_llamacpp_cost_the_weights_only():
    """With data.engine llamacpp the PyTorch target does not generate: its KV cache and
    prefill activations do not count, so a batch that would not fit passes."""
    from activation_wave.study.estimate import estimate_peak_gib

    shape = KNOWN_SHAPES["smollm2-135m"]
    torch_gen = estimate_peak_gib(load_config("default"), shape)
    lc = estimate_peak_gib(load_config("default", {"data.engine": "llamacpp"}), shape)
    assert lc["responses"] == lc["load"] < torch_gen["responses"]
    assert {k: v for k, v in lc.items() if k != "responses"} == {k: v for k, v in torch_gen.items() if k != "responses"}


def test_chapter_9_plans_the_paper_profile_whatever_the_memory_limit(monkeypatch):
    """scripts/study.sh sets WAVE_MEMORY_GIB for the default profile; chapter 9's paper-profile
    plan must still report (it stopped the default run with a memory error before)."""
    from activation_wave.study.chapters import performance as perf

    monkeypatch.setenv("WAVE_MEMORY_GIB", "17")
    (row,) = perf.paper_estimates(["meta-llama/Llama-3.1-8B-Instruct"])
    assert row["GPUs (80 GB)"] >= 1 and row["params (B)"] > 7

