"""Drafter training on a tiny, learnable target: it learns, it is deterministic, it logs."""

import json

import pytest
import torch
from safetensors.torch import load_file

from activation_wave.core.config import DraftConfig
from activation_wave.models.records import collate, load_records, make_batches
from activation_wave.draft.training import train_drafter
from helpers import greedy_world, permutation_target

LAYERS = [1, 2, 4]
FAST = DraftConfig(draft_vocab=96, ttt_steps=3, epochs=30, lr=1e-2, batch_tokens=512, threads=1)


def world(tokenizer, out_dir, n=40, max_new=24):
    """Target, its greedy responses to n random prompts (every 5th held out) and their capture."""
    target = permutation_target(tokenizer)
    return (target, *greedy_world(target, out_dir, n=n, max_new=max_new, eval_every=5, records_per_shard=16))


@pytest.fixture(scope="module")
def tiny_world(tiny_tokenizer, tmp_path_factory):
    return world(tiny_tokenizer, tmp_path_factory.mktemp("cap"))


@pytest.fixture(scope="module")
def trained(tiny_world, tmp_path_factory):
    target, _, cache = tiny_world
    return train_drafter(target, cache, LAYERS, FAST, tmp_path_factory.mktemp("drafter"), progress=False)


def test_world_is_varied(tiny_world):
    _, responses, cache = tiny_world
    assert len({t for r in responses for t in r.response_ids}) > 60  # not one repeated token
    assert cache.manifest["n_loss_tokens"] > 600


def test_loss_decreases_and_head_learns(trained):
    log = json.loads((trained / "train_log.json").read_text())
    first, last = log["epochs"][0], log["epochs"][-1]
    assert len(first["loss_by_step"]) == FAST.ttt_steps  # every unrolled step is trained and logged
    for j in range(FAST.ttt_steps):
        assert last["loss_by_step"][j] < 0.3 * first["loss_by_step"][j]
    assert last["acc_by_step"][0] > 0.9
    assert log["history"][-1] < log["history"][0]
    assert log["tokens_per_s"] > 0 and log["train_wall_s"] > 0 and log["n_loss_tokens"] > 0
    assert 0.8 < log["draft_vocab_coverage"] <= 1.0
    assert log["eval"]["tau_offline"] > 1.5  # held-out records, chain depth = ttt_steps (untrained: ~1.0)
    prov = json.loads((trained / "provenance.json").read_text())
    assert prov["target_fingerprint"] and prov["data_hash"] and prov["layers"] == LAYERS
    assert prov["capture_schema"] == 2  # index N meant the pre-norm last block when this drafter trained


def test_trained_checkpoint_names_its_layers_for_every_engine(trained):
    cfg = json.loads((trained / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == LAYERS  # hidden_states ids: vLLM, llama.cpp
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [i - 1 for i in LAYERS]  # SGLang, SpecForge


def test_training_is_deterministic_for_a_seed(tiny_world, tmp_path):
    target, _, cache = tiny_world
    cfg = DraftConfig(draft_vocab=96, ttt_steps=2, epochs=2, lr=1e-2, batch_tokens=512, threads=1)
    paths = [train_drafter(target, cache, LAYERS, cfg, tmp_path / name, progress=False) for name in ("a", "b")]
    other = train_drafter(target, cache, LAYERS, DraftConfig(**{**cfg.__dict__, "seed": 1}), tmp_path / "c",
                          progress=False)
    a, b, c = (load_file(str(p / "model.safetensors")) for p in (*paths, other))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert not torch.equal(a["fc.weight"], c["fc.weight"])


def test_hard_labels_and_fp32_train(tiny_world, tmp_path):
    target, _, cache = tiny_world
    cfg = DraftConfig(draft_vocab=96, ttt_steps=2, epochs=15, lr=1e-2, batch_tokens=512, threads=1,
                      soft_targets=False, dtype="fp32")
    log = json.loads((train_drafter(target, cache, LAYERS, cfg, tmp_path, progress=False) / "train_log.json").read_text())
    assert log["epochs"][-1]["loss_by_step"][0] < 0.3 * log["epochs"][0]["loss_by_step"][0]


def test_fused_norm_trains_its_per_layer_norms(tiny_world, tmp_path):
    target, _, cache = tiny_world
    cfg = DraftConfig(draft_vocab=96, ttt_steps=2, epochs=15, lr=1e-2, batch_tokens=512, threads=1, fused_norm=True)
    out = train_drafter(target, cache, LAYERS, cfg, tmp_path, progress=False)
    log = json.loads((out / "train_log.json").read_text())
    assert log["config"]["fused_norm"] is True
    assert log["epochs"][-1]["loss_by_step"][0] < 0.3 * log["epochs"][0]["loss_by_step"][0]
    assert json.loads((out / "config.json").read_text())["activation_wave"]["fused_norm"] is True
    weights = load_file(str(out / "model.safetensors"))
    for i in range(len(LAYERS)):
        assert weights[f"fuse_norm.{i}.weight"].shape == (32,)
        assert not torch.equal(weights[f"fuse_norm.{i}.weight"], torch.ones(32))  # trained, not left at init


def test_batches_and_anchor_windows(tiny_world):
    _, _, cache = tiny_world
    recs = load_records(cache, LAYERS, "train")
    batches = make_batches([len(r) for r in recs], 128)
    assert sorted(i for b in batches for i in b) == list(range(len(recs)))
    assert all(len(b) * max(len(recs[i]) for i in b) <= 128 or len(b) == 1 for b in batches)
    b = collate([recs[i] for i in batches[0]], n_steps=3)
    for row, i in enumerate(batches[0]):
        r = recs[i]
        anchors = b.sub[row][b.sub_ok[row]].tolist()
        # every anchor whose chain reaches a response target, up to the last position with a target
        assert anchors == list(range(max(0, r.prompt_len - 4), len(r) - 2))
    assert b.hidden.shape[-1] == 3 * 32


def test_wrong_target_is_rejected(tiny_world, tiny_tokenizer, tmp_path):
    _, _, cache = tiny_world
    other = permutation_target(tiny_tokenizer, seed=5)
    with pytest.raises(ValueError, match="captured from target"):
        train_drafter(other, cache, LAYERS, FAST, tmp_path, progress=False)


def test_records_fraction_trains_on_a_seeded_subset(tiny_world, tmp_path):
    target, responses, cache = tiny_world
    n_train = sum(r.split == "train" for r in responses)
    cfg = DraftConfig(draft_vocab=64, ttt_steps=2, epochs=1, lr=1e-2, batch_tokens=512, threads=1)
    logs = [json.loads((train_drafter(target, cache, LAYERS, cfg, tmp_path / n, progress=False, records_fraction=0.5)
                        / "train_log.json").read_text()) for n in ("a", "b")]
    assert logs[0]["n_records"] == round(n_train / 2) and logs[0]["records_fraction"] == 0.5
    assert logs[0]["n_loss_tokens"] == logs[1]["n_loss_tokens"] < cache.manifest["n_loss_tokens"]
    with pytest.raises(ValueError, match="records_fraction"):
        train_drafter(target, cache, LAYERS, cfg, tmp_path / "c", progress=False, records_fraction=0.0)
