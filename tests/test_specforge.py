"""The hand-off to SpecForge 0.2.0 (issue 57, item 5): ``wave export --engine specforge``
writes a training run, SpecForge's own code accepts it, and ``wave speculate`` reads back
a checkpoint in the layouts SpecForge saves.

Tests marked by the ``specforge`` fixture import SpecForge 0.2.0 from its wheel in the cache
(``bash scripts/setup_specforge.sh`` fetches it; never installed) and skip, saying so, where it
is absent. The others run on tiny random models only, with no network.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from helpers import permutation_target
from transformers import LlamaConfig, LlamaForCausalLM

from activation_wave import cli
from activation_wave.core.config import load_config
from activation_wave.engines import specforge as sf
from activation_wave.models.drafter import (DrafterError, Eagle3Drafter, expected_state_shapes, load_drafter,
                                            rope_inv_freq, save_drafter, specforge_layout)

LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}


def tiny_config(**kw) -> LlamaConfig:
    """A 4-block Llama config (hidden 32, vocab 128) with Llama 3's RoPE scaling, as the paper's target has."""
    return LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=256, rope_parameters=dict(LLAMA3_ROPE), **kw)


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_tokenizer):
    """A tiny target saved as a model folder (with tokenizer), a prompt file (two eval prompts),
    and a drafter on layers 1,2,3 with a 64-token draft vocabulary."""
    root = tmp_path_factory.mktemp("specforge")
    target = permutation_target(tiny_tokenizer)
    target.model.save_pretrained(root / "model")
    tiny_tokenizer.save_pretrained(root / "model")
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"count {i} {i + 1} {i + 2}",
                                           "split": "eval" if i % 3 == 2 else "train"}) + "\n" for i in range(6)))
    drafter = Eagle3Drafter.from_target(target.model, layers=[1, 2, 3], draft_ids=list(range(0, 128, 2)), seed=3)
    with torch.no_grad():  # away from the init, so equal outputs mean equal weights
        for p in drafter.trainable_parameters():
            p.add_(0.05 * torch.randn_like(p))
    return {"root": root, "model": root / "model", "prompts": prompts, "target": target, "drafter": drafter}


def export_args(world, run_dir: Path, *extra: str) -> list[str]:
    return ["export", "--engine", "specforge", "--model", str(world["model"]), "--run-dir", str(run_dir),
            "--sources", str(world["prompts"]), "--chat-template", "qwen", "--gpus", "2",
            "--set", "draft.draft_vocab=64", *extra]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def save_specforge_state(drafter: Eagle3Drafter, output_dir: Path, run_id: str, step: int) -> Path:
    """What SpecForge 0.2.0's trainer saves (training/controller.py save_checkpoint, through
    training/checkpoint.py): ``{run_id}-step{N}/training_state.pt`` with the draft weights without
    the frozen embedding, and a ``{run_id}-latest`` link."""
    folder = output_dir / f"{run_id}-step{step}"
    folder.mkdir(parents=True)
    weights = {k: v for k, v in drafter.state_dict().items() if "embed" not in k}
    torch.save({"draft_state_dict": weights, "global_step": step, "epoch": 1, "strategy": "eagle3",
                "run_id": run_id, "world_size": 1}, folder / "training_state.pt")
    os.symlink(folder.name, output_dir / f"{run_id}-latest")
    return folder


def same_outputs(a: Eagle3Drafter, b: Eagle3Drafter, steps: int = 3, atol: float = 0.0) -> None:
    """``a`` and ``b`` give the same draft logits at every training-time-test step."""
    torch.manual_seed(0)
    feats = torch.randn(2, 7, a.spec.k * a.spec.target_hidden_size)
    ids = torch.randint(0, a.spec.vocab_size, (2, 7))
    lengths = torch.tensor([7, 5])
    with torch.no_grad():
        for x, y in zip(a.unroll(a.fuse(feats), ids, lengths, steps), b.unroll(b.fuse(feats), ids, lengths, steps)):
            torch.testing.assert_close(a.logits(x), b.logits(y), atol=atol, rtol=0)


# ----------------------------------------------------------------------------- the run folder


def test_draft_config_names_the_layers_in_both_conventions():
    cfg = sf.draft_config(tiny_config().to_dict(), [1, 2, 3], draft_vocab=4096, target_path="org/tiny")
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["num_hidden_layers"] == 1
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]  # vLLM, llama.cpp: hidden_states indices
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]  # SpecForge, SGLang: index - 1
    assert cfg["draft_vocab_size"] == 128  # capped at the target's vocabulary
    assert cfg["rope_theta"] == 10000.0 and cfg["rope_scaling"]["rope_type"] == "llama3"
    assert cfg["activation_wave_export"]["target_num_hidden_layers"] == 4


def test_rope_inv_freq_is_transformers_llama3():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = tiny_config(head_dim=8)
    want = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")[0]
    got = rope_inv_freq(8, 10000.0, tuple((k, v) for k, v in LLAMA3_ROPE.items() if k != "rope_theta"))
    torch.testing.assert_close(got, want.float())


@pytest.mark.parametrize("fused", [False, True])
def test_expected_state_shapes_are_a_real_drafters(tiny_llama, fused):
    d = Eagle3Drafter.from_target(tiny_llama, layers=[1, 2, 3], draft_ids=list(range(0, 128, 4)), fused_norm=fused)
    real = {k: tuple(v.shape) for k, v in d.state_dict().items() if not k.startswith("embed_tokens")}
    assert expected_state_shapes(d.spec) == real


def test_export_writes_a_run_with_the_profiles_settings(world, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))  # no wheel here: the check is skipped, said so
    run = tmp_path / "run"
    code, out, err = run_cli(export_args(world, run, "--layers", "1,2,3", "--set", "draft.epochs=3",
                                         "--set", "draft.lr=1e-4"), capsys)
    assert code == 0, err
    assert "SpecForge ids [0, 1, 2]" in out and "not checked" in out and "setup_specforge.sh" in out
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()) == sorted(sf.RUN_FILES)
    man = json.loads((run / sf.MANIFEST).read_text())
    assert man["layers"] == {"hidden_states": [1, 2, 3], "specforge": [0, 1, 2], "basis": "given (--layers)"}
    assert man["data"]["records"] == 4  # the 4 train prompts; the 2 eval prompts stay out
    rows = [json.loads(line) for line in (run / "data" / "prompts.jsonl").read_text().splitlines()]
    assert [r["conversations"][0]["role"] for r in rows] == ["user"] * 4 and "p2" not in {r["id"] for r in rows}
    import yaml

    doc = yaml.safe_load((run / "run.yaml").read_text())
    assert doc["training"]["num_epochs"] == 3 and doc["training"]["learning_rate"] == 1e-4
    assert doc["training"]["ttt_length"] == 7  # SpecForge's own, not the smoke profile's CPU budget of 2
    assert doc["training"]["warmup_ratio"] == 0.015  # SpecForge's own, not the profile's 0.05
    assert man["specforge"]["wheel_sha256"] == sf.WHEEL_SHA256 and sf.WHEEL_SHA256 in man["specforge"]["code"]
    assert "not carried: SpecForge's 7" in out and "draft.ttt_steps = 2" in out
    assert doc["data"]["max_length"] == 384 and doc["deployment"]["trainer"]["nproc_per_node"] == 2
    assert doc["training"]["accumulation_steps"] == 3  # ceil(2048 tokens / (384 x 2 GPUs))
    assert doc["model"]["draft_model_config"] == "draft_config.json"
    for name, digest in man["sha256"].items():
        assert sf._sha256((run / name).read_bytes()) == digest
    man.pop("command")  # as typed; every other path in the manifest is relative to the run folder
    assert str(tmp_path) not in json.dumps(man).replace(str(world["model"]), "")


def test_export_refuses_folders_the_study_did_not_make(world, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    code, _, err = run_cli(export_args(world, foreign, "--layers", "1,2,3"), capsys)
    assert code == 2 and "did not make" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    code, _, err = run_cli(export_args(world, foreign, "--layers", "1,2,3", "--force"), capsys)
    assert code == 2 and "did not make" in err  # --force never writes into a folder of someone else
    run = tmp_path / "run"
    assert run_cli(export_args(world, run, "--layers", "1,2,3"), capsys)[0] == 0
    assert run_cli(export_args(world, run, "--layers", "1,2,3"), capsys)[0] == 0  # our run: rewritten
    (run / "outputs").mkdir()
    (run / "outputs" / "keep").write_text("SpecForge's")
    code, _, err = run_cli(export_args(world, run, "--layers", "1,2,3"), capsys)
    assert code == 2 and "SpecForge has written into" in err and "--force" in err
    assert run_cli(export_args(world, run, "--layers", "1,2,3", "--force"), capsys)[0] == 0
    assert (run / "outputs" / "keep").read_text() == "SpecForge's"


@pytest.mark.parametrize("layers, needle", [("1,2", "only k = 3"), ("1,2,4", "cannot capture hidden_states [4]"),
                                            ("1,2,9", "9")])
def test_export_refuses_layer_sets_specforge_cannot_train(world, tmp_path, monkeypatch, capsys, layers, needle):
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    code, _, err = run_cli(export_args(world, tmp_path / "run", "--layers", layers), capsys)
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_export_without_layers_takes_wave_selects_set(tmp_path, tiny_tokenizer, monkeypatch, capsys):
    """No --layers: the capture and `wave select` run as `wave select` runs them, and the run reads
    the set it exports (here the EAGLE-3 default of an 8-block model, a method whose set SpecForge
    can train whatever the statistics)."""
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    target = permutation_target(tiny_tokenizer, n_layers=8)
    target.model.save_pretrained(tmp_path / "model8")
    tiny_tokenizer.save_pretrained(tmp_path / "model8")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"tell {i} then {i + 1}",
                                           "split": "eval" if i % 4 == 3 else "train"}) + "\n" for i in range(8)))
    tiny = ["--set", f"data.sources={prompts}", "--set", "data.max_new_tokens=8", "--set", "data.batch_size=4",
            "--set", "capture.records_per_shard=2", "--set", "capture.max_length=128", "--set", "draft.draft_vocab=64",
            "--set", "metrics.token_budget=64", "--set", "select.n_random=2", "--set", "select.n_bootstrap=3",
            "--set", "select.method=eagle3-default"]
    run = tmp_path / "run"
    code, out, err = run_cli(["export", "--engine", "specforge", "--model", tmp_path / "model8", "--run-dir", run,
                              "--sources", prompts, "--chat-template", "qwen", *tiny], capsys)
    assert code == 0, err
    man = json.loads((run / sf.MANIFEST).read_text())
    assert man["layers"]["hidden_states"] == [2, 4, 5] and man["layers"]["basis"].startswith("wave select: ")
    assert json.loads((run / "draft_config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] \
        == [1, 3, 4]


def test_export_asks_for_its_flags(world, tmp_path, capsys):
    code, _, err = run_cli(["export", "--engine", "specforge", "--model", str(world["model"])], capsys)
    assert code == 2 and "--run-dir" in err
    code, _, err = run_cli(["export", "--engine", "llamacpp", "--model", str(world["model"])], capsys)
    assert code == 2 and "--draft and --out" in err


def test_launch_script_runs_the_planned_training_command(world, tmp_path, monkeypatch, capsys):
    """`bash launch.sh train` calls exactly the command the manifest (and SpecForge's planner) names."""
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    assert run_cli(export_args(world, run, "--layers", "1,2,3"), capsys)[0] == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("torchrun", "specforge"):
        (bin_dir / tool).write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" {tool} "$@" > "{tmp_path}/{tool}.argv"\n')
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    import subprocess

    for step in ("train", "export"):
        subprocess.run(["bash", str(run / "launch.sh"), step], check=True, env=env, cwd=tmp_path)
    man = json.loads((run / sf.MANIFEST).read_text())
    assert (tmp_path / "torchrun.argv").read_text().split("\n")[:-1] == man["run"]["train"]
    assert (tmp_path / "specforge.argv").read_text().split()[1:5] == ["export", "--to", "sglang", "--checkpoint"]


def test_dry_run_of_the_paper_profile_prints_the_hand_off(capsys, monkeypatch):
    monkeypatch.delenv("WAVE_MEMORY_GIB", raising=False)
    code, out, err = run_cli(["dry-run", "--profile", "paper"], capsys)
    assert code == 0, err
    assert "wave export --engine specforge --profile paper --run-dir runs/specforge-paper" in out
    assert "torchrun --standalone --nproc_per_node 8 --module specforge.cli train --config run.yaml" in out
    assert "epochs 10" in out and "ttt 7" in out and "max length 2048" in out and "draft vocab 32000" in out
    code, out, _ = run_cli(["dry-run", "--profile", "paper", "--json"], capsys)
    assert json.loads(out)["handoff"]["settings"]["batch"]["accumulation_steps"] == 1
    code, out, _ = run_cli(["dry-run", "--profile", "smoke"], capsys)
    assert "hand-off" not in out


# ----------------------------------------------------------------------------- SpecForge's layout, read back


def test_speculate_loader_reads_specforges_training_checkpoint(world, tmp_path, monkeypatch, capsys):
    """A checkpoint where SpecForge's trainer puts it (outputs/{run_id}-step{N}/training_state.pt,
    a -latest link), inside the run folder the export wrote: the loaded drafter is the original."""
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    assert run_cli(export_args(world, run, "--layers", "1,2,3"), capsys)[0] == 0
    run_id = json.loads((run / sf.MANIFEST).read_text())["run"]["run_id"]
    save_specforge_state(world["drafter"], run / "outputs", run_id, 40)
    target = world["target"]
    for where in (run, run / "outputs", run / "outputs" / f"{run_id}-step40",
                  run / "outputs" / f"{run_id}-step40" / "training_state.pt"):
        assert specforge_layout(where) == "state"
        d = load_drafter(where, target)
        assert d.provenance["format"] == "specforge" and d.spec.layers == (1, 2, 3) and d.spec.target_num_layers == 4
        same_outputs(world["drafter"], d)


def test_speculate_loader_reads_a_specforge_export(world, tmp_path):
    """The folder `specforge export --to sglang` writes: config.json (the draft config through
    save_pretrained) and bf16 model.safetensors."""
    from safetensors.torch import save_file

    src = world["drafter"]
    cfg = sf.draft_config(json.loads((world["model"] / "config.json").read_text()), [1, 2, 3], draft_vocab=64)
    out = tmp_path / "export"
    out.mkdir()
    (out / "config.json").write_text(LlamaConfig.from_dict(cfg).to_json_string())
    weights = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in src.state_dict().items()
               if "embed" not in k}
    save_file(weights, str(out / "model.safetensors"))
    assert specforge_layout(out) == "export"
    d = load_drafter(out, world["target"])
    rounded = Eagle3Drafter(src.spec, src.draft_to_target)
    rounded.load_state_dict({k: v.float() for k, v in weights.items()}, strict=False)
    rounded.attach_target(world["target"].model)
    same_outputs(rounded, d)


def test_wave_speculate_decodes_alike_from_a_specforge_checkpoint(world, tmp_path, monkeypatch, capsys):
    """`wave speculate --draft <run folder>` gives the tokens and tau of the same drafter saved by the study."""
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    assert run_cli(export_args(world, run, "--layers", "1,2,3"), capsys)[0] == 0
    save_specforge_state(world["drafter"], run / "outputs", "wave-model-l1-2-3", 5)
    native = save_drafter(world["drafter"], tmp_path / "native")
    docs = []
    for draft in (native, run):
        code, out, err = run_cli(["speculate", "--model", world["model"], "--draft", draft, "--prompts", world["prompts"],
                                  "--set", "spec.max_new_tokens=6", "--set", "spec.max_prompts=3",
                                  "--set", "draft.draft_vocab=64", "--json"], capsys)
        assert code == 0, err
        docs.append(json.loads(out))
    assert docs[0]["results"] == docs[1]["results"] and docs[0]["tau"] == docs[1]["tau"]


class Hostile:
    """An object a training_state.pt should not hold (unpickling it could run code)."""


def test_specforge_loader_refusals(world, tmp_path):
    state_dir = tmp_path / "bare"
    save_specforge_state(world["drafter"], state_dir, "r", 1)
    with pytest.raises(DrafterError, match="specforge export --to sglang"):
        load_drafter(state_dir)  # no draft config beside it and no run folder around it
    cfg = sf.draft_config(json.loads((world["model"] / "config.json").read_text()), [1, 2, 3], draft_vocab=64)
    for change, needle in (({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "'yarn' is not implemented"),
                           ({"num_hidden_layers": 2}, "2 decoder layers"),
                           ({"eagle_aux_hidden_state_layer_ids": [1, 2, 4]}, "disagree")):
        (state_dir / "r-step1" / "config.json").write_text(json.dumps({**cfg, **change}))
        with pytest.raises(DrafterError, match=needle):
            load_drafter(state_dir)

    bad = tmp_path / "hostile" / "r-step1"
    bad.mkdir(parents=True)
    torch.save({"draft_state_dict": {}, "object": Hostile()}, bad / "training_state.pt")
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(DrafterError, match="tensors and plain values"):
        load_drafter(bad)


def test_the_studys_own_checkpoints_still_load_natively(world, tmp_path):
    path = save_drafter(world["drafter"], tmp_path / "d")
    assert specforge_layout(path) is None
    assert load_drafter(path, world["target"]).provenance.get("format") != "specforge"


# ----------------------------------------------------------------------------- SpecForge 0.2.0's own code


@pytest.fixture(scope="module")
def specforge():
    """SpecForge 0.2.0 imported from its cached wheel (pure-Python parts: no SGLang, no GPU)."""
    wheel = sf.wheel_path()
    if wheel is None:
        pytest.skip(f"SpecForge {sf.SPECFORGE_VERSION}'s wheel is not in {sf.wheel_dir()} with sha256 "
                    f"{sf.WHEEL_SHA256[:12]}...: bash scripts/setup_specforge.sh fetches it")
    sys.path.insert(0, str(wheel))
    torch._dynamo.config.disable = True  # its modules are decorated with torch.compile; eager is the same math
    import specforge.cli  # noqa: F401

    yield wheel
    sys.path.remove(str(wheel))


def test_specforge_accepts_the_paper_profiles_run(specforge, tmp_path, monkeypatch):
    """The must-show: the paper profile's run folder, checked by SpecForge 0.2.0's own argument parser,
    launcher, config schema, draft-config loader, model class and conversation reader."""
    monkeypatch.setenv("WAVE_CACHE", str(specforge.parent.parent))
    cfg = load_config("paper", {})
    man = sf.export_specforge(cfg, tmp_path / "paper", layers=[2, 16, 29], basis="given", sources=("team",),
                              command="test")
    check = man["check"]
    assert check["ok"] is True, check
    assert check["parser"]["exit"] == 0 and check["parser"]["same_as_launch"]
    assert check["parser"]["planned"][3:] == man["run"]["train"][1:]
    assert check["config"]["training"] == {"strategy": "eagle3", "num_epochs": 10, "batch_size": 1,
                                           "accumulation_steps": 1, "learning_rate": 1e-4,
                                           "lr_scheduler": "cosine", "warmup_ratio": 0.015,
                                           "max_grad_norm": 0.5, "ttt_length": 7, "seed": 0}
    assert check["config"]["data"]["max_length"] == 2048 and check["chat_template"] == {"name": "llama3",
                                                                                         "registered": True}
    assert check["draft_config"]["capture_layers"] == [1, 15, 28] and check["draft_config"]["draft_vocab_size"] == 32000
    assert check["draft_config"]["tensors_match_study_loader"]
    assert check["data"]["records"] == check["data"]["user_turns"] == 192
    assert json.loads((tmp_path / "paper" / sf.MANIFEST).read_text())["check"]["ok"] is True


def test_the_optimiser_settings_are_specforges_own_and_every_difference_is_named(specforge):
    """SpecForge's defaults as its own schema gives them (the wheel's TrainingConfig/DataConfig),
    not a copy; the paper profile's run differs from them only where the manifest says why."""
    from specforge.config.schema import DataConfig, TrainingConfig

    theirs = {f"training.{k}": v.default for k, v in TrainingConfig.model_fields.items()}
    theirs |= {f"data.{k}": v.default for k, v in DataConfig.model_fields.items()}
    assert {k: theirs[k] for k in sf.SPECFORGE_DEFAULTS} == sf.SPECFORGE_DEFAULTS
    cfg = load_config("paper", {})
    s = sf.settings(cfg, gpus=8, vocab=128256)
    assert {r["study"]: (r["profile"], r["used"]) for r in s["not_carried"]} == {
        "draft.lr": (3e-4, 1e-4), "draft.warmup_frac": (0.05, 0.015)}
    assert {r["setting"]: r["run"] for r in s["differences"]} == {
        "run.yaml training.num_epochs": 10, "run.yaml training.save_interval": 1000, "run.yaml training.seed": 0}
    assert all(r["why"] and r["specforge_recipe"] == r["run"] for r in s["differences"])  # each as SpecForge's recipe
    given = sf.settings(cfg, gpus=8, vocab=128256, given={"draft.lr"})
    assert [r["study"] for r in given["not_carried"]] == ["draft.warmup_frac"]
    assert {"setting": "run.yaml training.learning_rate", "run": 3e-4, "specforge_default": 1e-4,
            "why": "given with --set"} in given["differences"]


def test_the_paper_profiles_memory_refusal_names_layers(capsys, tmp_path, monkeypatch):
    """Without --layers the paper profile needs its capture (~193 GiB here): the refusal says that
    --layers skips it, with the layers to give."""
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("WAVE_MEMORY_GIB", raising=False)
    code, _, err = run_cli(["export", "--engine", "specforge", "--profile", "paper", "--run-dir", tmp_path / "run"],
                           capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "GiB of memory" in err and "--layers 2,16,29 (the EAGLE-3 default for N = 32)" in err
    assert not (tmp_path / "run").exists()


def test_specforge_refuses_what_its_schema_refuses(specforge, world, tmp_path, monkeypatch):
    """The check is SpecForge's, not a copy: a key its strict schema does not know fails it."""
    monkeypatch.setenv("WAVE_CACHE", str(specforge.parent.parent))
    cfg = load_config("smoke", {"draft.draft_vocab": 64}, model=str(world["model"]))
    man = sf.export_specforge(cfg, tmp_path / "run", layers=[1, 2, 3], basis="given", sources=(str(world["prompts"]),),
                              chat_template="qwen", gpus=2, command="test")
    assert man["check"]["ok"] is True
    run_yaml = tmp_path / "run" / "run.yaml"
    run_yaml.write_text(run_yaml.read_text().replace("ttt_length:", "ttt_lenght:"))
    bad = sf.check_run(tmp_path / "run")
    assert bad["ok"] is False and "ttt_lenght" in bad["error"]


def test_draft_config_is_specforges_own_for_the_target(specforge, tmp_path):
    """SpecForge derives a draft config from a target (model_loading._generate_draft_config); ours
    equals it but for what the study adds: the layer ids, its block, the draft vocabulary it was
    told, target_hidden_size and the dtype."""
    from specforge.algorithms.builtin import builtin_algorithm_registry
    from specforge.config import Config
    from specforge.training.model_loading import _generate_draft_config, load_draft_config_source

    tiny_config().save_pretrained(tmp_path / "target")
    cfg = Config.model_validate({"model": {"target_model_path": str(tmp_path / "target")},
                                 "data": {"hidden_states_path": "x"}})
    provider = builtin_algorithm_registry().resolve("eagle3").providers.model.draft_config
    theirs = _generate_draft_config(cfg, provider).to_dict()
    mine = sf.draft_config(json.loads((tmp_path / "target" / "config.json").read_text()), [1, 2, 3],
                           draft_vocab=theirs["draft_vocab_size"])
    (tmp_path / "draft.json").write_text(json.dumps(mine))
    ours = load_draft_config_source(str(tmp_path / "draft.json")).to_dict()
    added = {"activation_wave_export", "eagle_config", "eagle_aux_hidden_state_layer_ids", "target_hidden_size",
             "dtype", "draft_vocab_size"}
    assert {k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k)} <= added
    assert ours["rope_parameters"] == theirs["rope_parameters"] and ours["rope_parameters"]["rope_type"] == "llama3"


def test_specforges_model_and_the_study_drafter_compute_alike(specforge, world, tmp_path):
    """SpecForge's LlamaForCausalLMEagle3 with random weights, saved by SpecForge's own
    CheckpointManager and exported by its own `export_to_sglang`: both folders load into the
    study's drafter, whose draft logits over 3 training-time-test steps equal SpecForge's forward
    (its backbone fed back, as its trainer does), Llama 3 RoPE scaling included."""
    from specforge.export.to_sglang import export_to_sglang
    from specforge.modeling.auto import AutoDraftModel
    from specforge.modeling.draft.llama3_eagle import prepare_decoder_attention_mask
    from specforge.training.checkpoint import CheckpointManager
    from specforge.training.model_loading import load_draft_config_source

    torch.manual_seed(0)
    target = LlamaForCausalLM(tiny_config()).eval()
    (tmp_path / "draft_config.json").write_text(json.dumps(sf.draft_config(target.config.to_dict(), [1, 2, 3],
                                                                           draft_vocab=64)))
    model = AutoDraftModel.from_config(load_draft_config_source(str(tmp_path / "draft_config.json"))).float().eval()
    ids = torch.arange(0, 128, 2)
    with torch.no_grad():
        for name, p in model.named_parameters():  # bf16-exact values, so the bf16 export loses nothing
            p.copy_(((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p)).to(torch.bfloat16).float())
        model.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        model.d2t.copy_(ids - torch.arange(len(ids)))
        model.t2d.zero_()
        model.t2d[ids] = True
    out = tmp_path / "outputs"
    weights = {k: v for k, v in model.state_dict().items() if "embed" not in k}  # strategies/base.py's filter
    CheckpointManager(str(out), "r").save({"draft_state_dict": weights, "global_step": 7, "epoch": 0,
                                           "strategy": "eagle3", "run_id": "r", "world_size": 1}, 7,
                                          rank_state={"optimizer": None, "rng": None})
    shutil.copy(tmp_path / "draft_config.json", out / "r-step7" / "config.json")
    export_to_sglang(str(out), str(tmp_path / "draft_config.json"), str(tmp_path / "export"))
    ours = load_drafter(out, target)
    exported = load_drafter(tmp_path / "export", target)
    assert ours.spec.rope_scaling and exported.spec.layers == (1, 2, 3)
    same_outputs(ours, exported)

    B, T, steps = 1, 9, 3
    feats = torch.randn(B, T, 96)
    tokens = torch.randint(0, 128, (B, T))
    with torch.no_grad():
        mine = [ours.logits(o) for o in ours.unroll(ours.fuse(feats), tokens, torch.tensor([T]), steps)]
        hidden = model.project_hidden_states(feats)
        mask = prepare_decoder_attention_mask(torch.ones(B, T, dtype=torch.bool), (B, T), hidden, 0)
        cache: list[list[torch.Tensor]] = [[], []]
        step_tokens = torch.cat([tokens[:, 1:], tokens[:, -1:]], 1)  # the drafter at t reads token t + 1
        for j in range(steps):
            hidden = model.backbone(model.embed_input_ids(step_tokens), hidden, cache, mask, torch.arange(T)[None])
            valid = T - j - 1  # positions whose step-j token exists (the tail is padding in either)
            torch.testing.assert_close(mine[j][:, :valid], model.compute_logits(hidden)[:, :valid],
                                       atol=2e-5, rtol=0)
            step_tokens = torch.cat([step_tokens[:, 1:], step_tokens[:, -1:]], 1)
