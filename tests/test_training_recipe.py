"""The recipe knobs of drafter training (issue 25): warm starts, the feature loss, the lr
schedule and the full vocabulary; each changes what it should, and the defaults train
exactly as before them (same weights, same cache keys)."""

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from activation_wave.core.config import ConfigError, DraftConfig
from activation_wave.draft.experiment import drafter_dir
from activation_wave.draft.training import _lr_at, train_drafter, ttt_loss
from activation_wave.models.capture import final_norm
from activation_wave.models.drafter import (BLOCK_INITS, HEAD_INITS, NORM_INITS, DrafterError, Eagle3Drafter,
                                            load_drafter)
from activation_wave.models.records import collate, load_records, make_batches
from test_training import LAYERS, world

SMALL = DraftConfig(draft_vocab=96, ttt_steps=2, epochs=2, lr=1e-2, batch_tokens=512, threads=1)


@pytest.fixture(scope="module")
def small_world(tiny_tokenizer, tmp_path_factory):
    return world(tiny_tokenizer, tmp_path_factory.mktemp("cap"), n=20, max_new=16)


def _draft_ids(n=96, vocab=128):
    return torch.linspace(0, vocab - 1, n).round().long().unique()


# ----------------------------------------------------------------------------- config and cache keys


def test_new_fields_default_to_todays_recipe_and_keep_cache_keys():
    """Folder names computed on main before the knobs existed (a drafter cache keeps its drafters)."""

    class Cache:
        path = Path("/c")

    assert drafter_dir(Cache, [2, 15, 27], DraftConfig()).name == "L2-15-27-a5a4fa7c65b7"
    bench = DraftConfig(draft_vocab=4096, ttt_steps=3, epochs=10, lr=0.003, batch_tokens=2048, threads=1,
                        samples_per_prompt=1, n_seeds=3, sweep_stride=1, sweep_fraction=0.25, sweep_seed_every=6,
                        norm_arm=True, workers=2)  # the default profile's benchmark drafter
    assert drafter_dir(Cache, [2, 15, 27], bench).name == "L2-15-27-7a135f745e50"
    changed = dataclasses.replace(bench, head_init="target")
    assert drafter_dir(Cache, [2, 15, 27], changed) != drafter_dir(Cache, [2, 15, 27], bench)


def test_config_choices_match_the_drafter():
    assert DraftConfig.CHOICES["head_init"] == HEAD_INITS
    assert DraftConfig.CHOICES["norm_init"] == NORM_INITS
    assert DraftConfig.CHOICES["block_init"] == BLOCK_INITS


@pytest.mark.parametrize("field,value,fix", [
    ("head_init", "frozen", "--set draft.head_init=random"),
    ("norm_init", "target_last", "--set draft.norm_init=ones"),
    ("block_init", "first", "--set draft.block_init=random"),
    ("lr_schedule", "linear", "--set draft.lr_schedule=cosine"),
    ("feature_loss", -0.1, "--set draft.feature_loss=0.0"),
    ("warmup_frac", 1.0, "--set draft.warmup_frac=0.05"),
    ("eval_threshold", 1.5, "--set draft.eval_threshold=0.0"),
])
def test_bad_values_name_the_field_and_a_fix(field, value, fix):
    with pytest.raises(ConfigError, match=f"draft.{field}") as err:
        DraftConfig(**{field: value})
    assert fix in str(err.value)


def test_draft_vocab_has_no_upper_end():
    assert DraftConfig(draft_vocab=10**6).draft_vocab == 10**6


# ----------------------------------------------------------------------------- warm starts


def test_head_and_norm_from_the_target_give_its_logits(small_world):
    target, _, cache = small_world
    model, ids = target.model, _draft_ids()
    d = Eagle3Drafter.from_target(model, LAYERS, ids, head_init="target", norm_init="target")
    assert torch.equal(d.lm_head.weight, model.lm_head.weight[ids])
    assert torch.allclose(d.norm.weight, final_norm(model).weight, atol=1e-6)
    # the head on the target's pre-norm h_N is the target's own head, restricted to the draft vocab
    h_n = load_records(cache, LAYERS, "train", last=True)[0].last
    want = model.lm_head(final_norm(model)(h_n[None]))[0][:, ids]
    assert torch.allclose(d.logits(h_n), want, atol=1e-4)
    # everything else is the default init for the same seed
    plain = Eagle3Drafter.from_target(model, LAYERS, ids)
    assert torch.equal(d.fc.weight, plain.fc.weight)
    assert torch.equal(d.midlayer.self_attn.q_proj.weight, plain.midlayer.self_attn.q_proj.weight)
    assert not torch.equal(d.lm_head.weight, plain.lm_head.weight)


def test_head_init_copies_tied_embeddings(tiny_llama):
    """SmolLM2 ties lm_head to embed_tokens: the drafter gets a copy of the rows, not a tie."""
    assert tiny_llama.lm_head.weight is tiny_llama.model.embed_tokens.weight
    ids = _draft_ids(32)
    d = Eagle3Drafter.from_target(tiny_llama, [1, 2, 3], ids, head_init="target_frozen")
    assert torch.equal(d.lm_head.weight, tiny_llama.model.embed_tokens.weight[ids])
    assert d.lm_head.weight.data_ptr() != d.embed_tokens.weight.data_ptr()
    assert not d.lm_head.weight.requires_grad
    assert all(p is not d.lm_head.weight for p in d.trainable_parameters())
    assert len(d.trainable_parameters()) == len(Eagle3Drafter.from_target(tiny_llama, [1, 2, 3], ids)
                                                .trainable_parameters()) - 1


def test_block_from_the_last_target_block(small_world):
    target, _, _ = small_world
    model, ids = target.model, _draft_ids()
    d = Eagle3Drafter.from_target(model, LAYERS, ids, block_init="target_last")
    plain = Eagle3Drafter.from_target(model, LAYERS, ids)
    last = model.model.layers[-1]
    H = d.spec.hidden_size
    for name in ("q_proj", "k_proj", "v_proj"):
        mine, theirs = getattr(d.midlayer.self_attn, name).weight, getattr(last.self_attn, name).weight
        assert torch.equal(mine[:, H:], theirs)  # the feature half
        assert torch.equal(mine[:, :H], getattr(plain.midlayer.self_attn, name).weight[:, :H])  # embedding half: init
    assert torch.equal(d.midlayer.self_attn.o_proj.weight, last.self_attn.o_proj.weight)
    for name in ("gate_proj", "up_proj", "down_proj"):
        assert torch.equal(getattr(d.midlayer.mlp, name).weight, getattr(last.mlp, name).weight)
    assert torch.allclose(d.midlayer.hidden_norm.weight, last.input_layernorm.weight, atol=1e-6)
    assert torch.allclose(d.midlayer.post_attention_layernorm.weight, last.post_attention_layernorm.weight, atol=1e-6)
    assert torch.equal(d.midlayer.input_layernorm.weight, torch.ones(H))  # on the embedding: no counterpart
    assert torch.equal(d.fc.weight, plain.fc.weight) and torch.equal(d.lm_head.weight, plain.lm_head.weight)


def test_block_init_rejects_a_block_of_another_layout():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                        num_attention_heads=4, num_key_value_heads=2)).eval()
    with pytest.raises(DrafterError, match="has a bias.*block_init=random"):
        Eagle3Drafter.from_target(qwen, [1, 2, 3], list(range(32)), block_init="target_last")
    Eagle3Drafter.from_target(qwen, [1, 2, 3], list(range(32)), head_init="target", norm_init="target")


def test_frozen_head_stays_the_targets_after_training(small_world, tmp_path):
    target, _, _ = small_world
    cfg = dataclasses.replace(SMALL, head_init="target_frozen", norm_init="target")
    out = train_drafter(target, small_world[2], LAYERS, cfg, tmp_path, progress=False)
    w = load_file(str(out / "model.safetensors"))
    d = load_drafter(out, target)
    assert torch.equal(w["lm_head.weight"], target.model.lm_head.weight[d.draft_to_target])
    assert not torch.allclose(w["norm.weight"], final_norm(target.model).weight)  # the norm trained


# ----------------------------------------------------------------------------- feature loss


def test_feature_loss_regresses_onto_h_n_at_the_target_positions(small_world):
    target, _, cache = small_world
    recs = load_records(cache, LAYERS, "train", last=True)
    n_layers = cache.n_layers
    plain_h_n = load_records(cache, [n_layers], "train")
    assert all(torch.equal(r.last, p.hidden) for r, p in zip(recs, plain_h_n))  # index N, as the cache holds it
    d = Eagle3Drafter.from_target(target.model, LAYERS, _draft_ids())
    batch = collate([recs[i] for i in make_batches([len(r) for r in recs], 256)[0]], 2)
    torch.manual_seed(0)
    base, stats0 = ttt_loss(d, batch, 2, 0.8)
    zero, _ = ttt_loss(d, batch, 2, 0.8, feature=0.0)
    assert torch.equal(base, zero) and "feature_loss" not in stats0[0]
    with_f, stats = ttt_loss(d, batch, 2, 0.8, feature=0.5)
    assert with_f > base
    assert math.isclose(float((with_f - base).detach()), 0.5 * sum(0.8 ** j * s["feature_loss"] for j, s in enumerate(stats)),
                        rel_tol=1e-4)
    # step 0 by hand: the output at anchor t against h_N at t + 1, where the target token at t+1 is scored
    outs = d.unroll(d.fuse(batch.hidden), batch.input_ids, batch.lengths, 1, sub=batch.sub)
    diffs = []
    for b in range(batch.input_ids.shape[0]):
        for s in range(batch.sub.shape[1]):
            t = int(batch.sub[b, s])
            u = t + 1
            if (batch.sub_ok[b, s] and u < int(batch.lengths[b]) and batch.loss_mask[b, u]
                    and d.t2d[batch.top1[b, u]]):
                diffs.append(torch.nn.functional.smooth_l1_loss(outs[0][b, s], batch.last[b, u], reduction="none"))
    assert math.isclose(float(torch.stack(diffs).mean().detach()), stats[0]["feature_loss"], rel_tol=1e-4)
    assert stats[0]["n"] == len(diffs)


def test_feature_loss_is_logged_and_zero_trains_as_before(small_world, tmp_path):
    target, _, cache = small_world
    plain = train_drafter(target, cache, LAYERS, SMALL, tmp_path / "a", progress=False)
    zero = train_drafter(target, cache, LAYERS, dataclasses.replace(SMALL, feature_loss=0.0), tmp_path / "b",
                         progress=False)
    feat = train_drafter(target, cache, LAYERS, dataclasses.replace(SMALL, feature_loss=0.1), tmp_path / "c",
                         progress=False)
    a, b, c = (load_file(str(p / "model.safetensors")) for p in (plain, zero, feat))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["fc.weight"], c["fc.weight"])
    logs = [json.loads((p / "train_log.json").read_text()) for p in (plain, feat)]
    assert "feature_loss_by_step" not in logs[0]["epochs"][0]
    per_step = logs[1]["epochs"][-1]["feature_loss_by_step"]
    assert len(per_step) == SMALL.ttt_steps and all(v > 0 for v in per_step)
    assert logs[1]["history"] != logs[0]["history"]


# ----------------------------------------------------------------------------- schedule, vocabulary


def test_lr_schedules():
    # today's cosine numbers (warm-up 5% of 100 steps, then cosine to 10%), unchanged at the defaults
    assert [_lr_at(s, 100, 1.0) for s in (0, 4, 5)] == [0.2, 1.0, 1.0]
    assert math.isclose(_lr_at(99, 100, 1.0), 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 94 / 95)))
    assert [_lr_at(s, 100, 1.0, "cosine", 0.05) for s in range(100)] == [_lr_at(s, 100, 1.0) for s in range(100)]
    assert {_lr_at(s, 100, 0.3, "constant") for s in range(100)} == {0.3}
    assert _lr_at(0, 100, 1.0, "cosine", 0.2) == 1.0 / 20


def test_constant_schedule_keeps_a_flat_lr(small_world, tmp_path):
    target, _, cache = small_world
    cfg = dataclasses.replace(SMALL, lr_schedule="constant", epochs=3)
    log = json.loads((train_drafter(target, cache, LAYERS, cfg, tmp_path, progress=False) / "train_log.json")
                     .read_text())
    assert [e["lr_last"] for e in log["epochs"]] == [cfg.lr] * 3


def test_full_vocabulary_trains(small_world, tmp_path):
    target, _, cache = small_world
    cfg = dataclasses.replace(SMALL, draft_vocab=10_000, head_init="target")
    out = train_drafter(target, cache, LAYERS, cfg, tmp_path, progress=False)
    d = load_drafter(out, target)
    assert d.spec.draft_vocab_size == target.vocab_size == 128
    assert bool(d.t2d.all()) and int(d.d2t.abs().sum()) == 0
    log = json.loads((out / "train_log.json").read_text())
    assert log["draft_vocab_coverage"] == 1.0 and math.isfinite(log["eval"]["tau_offline"])


def test_eval_depth_and_threshold_set_the_logged_acceptance(small_world, tmp_path):
    target, _, cache = small_world
    cfg = dataclasses.replace(SMALL, eval_every=1, eval_depth=3, eval_threshold=0.2)
    log = json.loads((train_drafter(target, cache, LAYERS, cfg, tmp_path, progress=False) / "train_log.json")
                     .read_text())
    assert log["eval"]["depth"] == 3 and len(log["epochs"][0]["eval_acceptance"]) == 3


# ----------------------------------------------------------------------------- defaults: bit-identical


def test_defaults_train_exactly_as_before_the_knobs(tiny_tokenizer, tmp_path):
    """Loss history of a seeded fp32 training recorded on main before the knobs were added
    (test_training's 40-prompt world); bit-identical there, to 1e-4 across CPUs."""
    target, _, cache = world(tiny_tokenizer, tmp_path / "cap")
    cfg = DraftConfig(draft_vocab=96, ttt_steps=2, epochs=2, lr=1e-2, batch_tokens=512, threads=1, dtype="fp32")
    log = json.loads((train_drafter(target, cache, LAYERS, cfg, tmp_path / "d", progress=False) / "train_log.json")
                     .read_text())
    assert log["history"] == pytest.approx([8.38276, 8.66207, 8.42922, 7.77735, 7.93245, 7.85381], abs=1e-4)


# ----------------------------------------------------------------------------- continued training


def test_init_from_continues_a_finished_drafter(small_world, tmp_path):
    """A continued drafter starts from its parent's weights (its first loss is the parent's last
    level, not a fresh start's), gets its own cache key, and a missing or mismatched parent is
    refused naming draft.init_from."""
    target, _, cache = small_world
    first = dataclasses.replace(SMALL, epochs=6)
    parent = train_drafter(target, cache, LAYERS, first, drafter_dir(cache, LAYERS, first), progress=False)
    fresh = json.loads((train_drafter(target, cache, LAYERS, SMALL, tmp_path / "fresh", progress=False)
                        / "train_log.json").read_text())
    cont_cfg = dataclasses.replace(SMALL, init_from=parent.name, lr=1e-4)  # a low lr: the start dominates
    assert drafter_dir(cache, LAYERS, cont_cfg) != drafter_dir(cache, LAYERS, SMALL)
    cont = json.loads((train_drafter(target, cache, LAYERS, cont_cfg, tmp_path / "cont", progress=False)
                       / "train_log.json").read_text())
    done = json.loads((parent / "train_log.json").read_text())
    assert cont["init_from"] == parent.name and "init_from" not in fresh
    assert cont["history"][0] < 0.8 * fresh["history"][0]
    assert cont["history"][0] < 1.2 * done["history"][-1]
    with pytest.raises(ValueError, match="draft.init_from"):
        train_drafter(target, cache, LAYERS, dataclasses.replace(SMALL, init_from="L1-2-4-nothere"),
                      tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="draft.init_from"):
        train_drafter(target, cache, LAYERS, dataclasses.replace(SMALL, init_from=parent.name, draft_vocab=64),
                      tmp_path / "y", progress=False)
