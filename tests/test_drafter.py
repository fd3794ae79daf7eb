"""The EAGLE-3 draft head: shapes, training-time test == online chain, checkpoints, vocab."""

import json

import pytest
import torch
from safetensors import safe_open

from activation_wave.models.drafter import (
    MIDLAYER_TENSORS,
    TOP_LEVEL_TENSORS,
    DrafterError,
    DrafterSpec,
    Eagle3Drafter,
    load_drafter,
    save_drafter,
    select_draft_vocab,
)

LAYERS = [1, 2, 4]
DRAFT_IDS = list(range(1, 128, 2))  # 64 of the tiny model's 128 tokens


@pytest.fixture(scope="module")
def drafter(tiny_llama):
    torch.manual_seed(0)
    return Eagle3Drafter.from_target(tiny_llama, LAYERS, DRAFT_IDS, seed=0).eval()


def _record(tiny_llama, T=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 128, (1, T), generator=g)
    with torch.no_grad():
        hs = tiny_llama(ids, output_hidden_states=True).hidden_states
    return ids, torch.cat([hs[i] for i in LAYERS], -1)  # [1, T], [1, T, k*H]


def test_shapes_and_parameters(drafter, tiny_llama):
    s = drafter.spec
    assert (s.hidden_size, s.k, s.draft_vocab_size, s.vocab_size) == (32, 3, 64, 128)
    assert drafter.fc.weight.shape == (32, 3 * 32)
    assert drafter.midlayer.self_attn.q_proj.weight.shape == (4 * 8, 2 * 32)  # q/k/v read 2H
    assert drafter.midlayer.self_attn.k_proj.weight.shape == (2 * 8, 2 * 32)  # grouped-query: 2 kv heads
    assert drafter.lm_head.weight.shape == (64, 32)
    # embeddings: a frozen copy of the target's, not trained
    torch.testing.assert_close(drafter.embed_tokens.weight, tiny_llama.get_input_embeddings().weight)
    assert not drafter.embed_tokens.weight.requires_grad
    assert all(not n.startswith("embed_tokens") for n, _ in drafter.named_parameters() if _.requires_grad)
    ids, h = _record(tiny_llama)
    outs = drafter.unroll(drafter.fuse(h), ids, torch.tensor([12]), n_steps=3)
    assert len(outs) == 3 and all(o.shape == (1, 12, 32) for o in outs)
    assert drafter.logits(outs[0]).shape == (1, 12, 64)


def test_token_maps_follow_eagle3(drafter):
    d2t, t2d = drafter.d2t, drafter.t2d
    assert d2t.dtype == torch.long and t2d.dtype == torch.bool
    assert (torch.arange(64) + d2t).tolist() == DRAFT_IDS  # target id = draft id + d2t[draft id]
    assert t2d.sum() == 64 and t2d[DRAFT_IDS].all()
    assert drafter.target_to_draft[3] == 1 and drafter.target_to_draft[2] == -1


def test_unroll_equals_online_chain(drafter, tiny_llama):
    """Training-time test step j at anchor t == the (j+1)-th step of a chain drafted online."""
    T = 12
    ids, h = _record(tiny_llama, T)
    with torch.no_grad():
        fused = drafter.fuse(h)
        outs = drafter.unroll(fused, ids, torch.tensor([T]), n_steps=4)
        for anchor in (0, 3, 6):
            cache = drafter.new_cache(4)  # small: forces the cache to grow
            # entries 0..anchor: (h_t, x_{t+1}) at position t
            o = drafter.step(fused[:, : anchor + 1], ids[:, 1: anchor + 2], torch.arange(anchor + 1), cache)
            torch.testing.assert_close(o[:, -1], outs[0][:, anchor], atol=1e-5, rtol=1e-4)
            prev = o[:, -1:]
            for j in range(1, 4):  # chain entry at position anchor + j reads token x_{anchor + j + 1}
                prev = drafter.step(prev, ids[:, anchor + j + 1: anchor + j + 2], torch.tensor([anchor + j]), cache)
                torch.testing.assert_close(prev[:, 0], outs[j][:, anchor], atol=1e-5, rtol=1e-4)


def test_unroll_sub_positions_and_padding(drafter, tiny_llama):
    """Restricting later steps to a window and right padding change nothing for real positions."""
    ids, h = _record(tiny_llama, 10, seed=1)
    ids2, h2 = _record(tiny_llama, 10, seed=2)
    with torch.no_grad():
        full = drafter.unroll(drafter.fuse(h), ids, torch.tensor([10]), n_steps=3)
        pad_ids = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], 1)
        pad_h = torch.cat([h, torch.randn(1, 4, h.shape[-1])], 1)
        batch_ids = torch.cat([pad_ids, torch.cat([ids2, ids2[:, :4]], 1)])
        batch_h = torch.cat([pad_h, torch.cat([h2, h2[:, :4]], 1)])
        sub = torch.tensor([[4, 5, 6, 7], [0, 1, 2, 3]])
        part = drafter.unroll(drafter.fuse(batch_h), batch_ids, torch.tensor([10, 14]), n_steps=3, sub=sub)
    for j in range(3):
        n = min(4, 10 - 1 - j - 4)  # anchors whose step-j token x_{t+j+1} exists (t + j + 1 <= 9)
        torch.testing.assert_close(part[j][0, :n], full[j][0, 4:4 + n], atol=1e-5, rtol=1e-4)


def test_checkpoint_round_trip_and_layout(drafter, tiny_llama, tmp_path):
    with torch.no_grad():
        for p in drafter.parameters():
            p.add_(0.01 * torch.randn_like(p)) if p.requires_grad else None
    out = save_drafter(drafter, tmp_path / "d", {"target_fingerprint": "abc", "data_hash": "123"})
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "provenance.json"]
    with safe_open(str(out / "model.safetensors"), framework="pt") as fh:
        names = set(fh.keys())
        assert fh.get_tensor("d2t").dtype == torch.int64 and fh.get_tensor("t2d").dtype == torch.bool
    assert names == set(TOP_LEVEL_TENSORS) | set(MIDLAYER_TENSORS)  # no embedding: engines share the target's
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size",
                "draft_vocab_size", "rms_norm_eps", "rope_theta", "max_position_embeddings"):
        assert key in cfg
    assert cfg["tie_word_embeddings"] is False and cfg["draft_vocab_size"] == 64 and cfg["vocab_size"] == 128
    # top level: hidden_states indices (vLLM, llama.cpp); nested: index - 1 (SGLang, SpecForge add 1)
    assert cfg["eagle_aux_hidden_state_layer_ids"] == LAYERS == [1, 2, 4]
    assert cfg["eagle_config"] == {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [0, 1, 3]}
    assert cfg["activation_wave"]["target_num_hidden_layers"] == 4
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["target_fingerprint"] == "abc" and prov["data_hash"] == "123" and "git_commit" in prov

    loaded = load_drafter(out, tiny_llama)
    ids, h = _record(tiny_llama)
    with torch.no_grad():
        a = drafter.logits(drafter.unroll(drafter.fuse(h), ids, torch.tensor([12]), 2)[1])
        b = loaded.logits(loaded.unroll(loaded.fuse(h), ids, torch.tensor([12]), 2)[1])
    torch.testing.assert_close(a, b)
    assert loaded.spec == drafter.spec


def test_load_errors_name_the_fix(drafter, tiny_llama, tmp_path):
    out = save_drafter(drafter, tmp_path / "d", {"target_fingerprint": "abc"})
    bare = load_drafter(out)  # no target: inspectable, not runnable
    ids, h = _record(tiny_llama)
    with pytest.raises(DrafterError, match="attach_target"):
        bare.unroll(bare.fuse(h), ids, torch.tensor([12]), 1)

    class Other:
        fingerprint = "zzz"
        model = tiny_llama

    with pytest.raises(DrafterError, match="trained on target abc"):
        load_drafter(out, Other())
    with pytest.raises(DrafterError, match="not a drafter checkpoint"):
        load_drafter(tmp_path)


def test_embedding_layer_has_no_nested_ids(tiny_llama):
    d = Eagle3Drafter.from_target(tiny_llama, [0, 2, 4], DRAFT_IDS)
    cfg = d.spec.to_hf_config()
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [0, 2, 4] and cfg["eagle_config"] == {"use_aux_hidden_state": True}
    assert DrafterSpec.from_hf_config(cfg).layers == (0, 2, 4)


def test_config_ids_must_agree(drafter, tmp_path):
    out = save_drafter(drafter, tmp_path / "d")
    cfg = json.loads((out / "config.json").read_text())
    assert DrafterSpec.from_hf_config(cfg) == drafter.spec
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = list(LAYERS)  # not index - 1
    (out / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(DrafterError, match=r"config\.json.*disagree.*differ by exactly one"):
        load_drafter(out)
    del cfg["eagle_aux_hidden_state_layer_ids"]  # the nested key alone is enough
    with pytest.raises(DrafterError, match=r"config\.json: layer ids \[5\] out of range.*N=4"):
        DrafterSpec.from_hf_config(cfg)  # [2, 3, 4] + 1 reaches past N = 4 (issue 24 item 3)
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in LAYERS]
    assert DrafterSpec.from_hf_config(cfg).layers == tuple(LAYERS)


def test_reads_schema_1_checkpoints(drafter):
    """Checkpoints written before the top-level key: nested ids were hidden_states indices."""
    cfg = drafter.spec.to_hf_config()
    del cfg["eagle_aux_hidden_state_layer_ids"], cfg["activation_wave"]
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(LAYERS), "target_num_hidden_layers": 4,
                           "layer_id_convention": "hidden_states index (vLLM)", "use_aux_hidden_state": True}
    assert DrafterSpec.from_hf_config(cfg) == drafter.spec
    with pytest.raises(DrafterError, match="only reads checkpoints written by activation_wave"):
        DrafterSpec.from_hf_config({**cfg, "eagle_config": {}})


def _fused(tiny_llama, seed=0):
    return Eagle3Drafter.from_target(tiny_llama, LAYERS, DRAFT_IDS, seed=seed, fused_norm=True).eval()


def test_fused_norm_off_is_plain_fc_and_on_normalises_each_layer(tiny_llama):
    ids, h = _record(tiny_llama)
    off = Eagle3Drafter.from_target(tiny_llama, LAYERS, DRAFT_IDS, seed=0).eval()
    assert off.fuse_norm is None and not any(k.startswith("fuse_norm") for k in off.state_dict())
    with torch.no_grad():
        assert torch.equal(off.fuse(h), off.fc(h))  # off: exactly the EAGLE-3 fuse
        on = _fused(tiny_llama)
        assert torch.equal(on.fc.weight, off.fc.weight)  # the norms take no draw from the seeded init
        for norm in on.fuse_norm:
            norm.weight.copy_(torch.rand(32) + 0.5)
    x = torch.tensor([[[3.0] * 32 + [-1.0, 1.0] * 16 + [1.0] * 16 + [0.0] * 16]])  # [1, 1, k*H]: RMS 3, 1, 0.5**0.5
    by_hand = torch.cat([x[..., :32] / 3.0 * on.fuse_norm[0].weight, x[..., 32:64] / 1.0 * on.fuse_norm[1].weight,
                         x[..., 64:] / 0.5 ** 0.5 * on.fuse_norm[2].weight], -1)
    eps = on.spec.rms_norm_eps
    assert eps == tiny_llama.config.rms_norm_eps
    with torch.no_grad():
        torch.testing.assert_close(on.fuse(x), on.fc(by_hand), atol=1e-4 + eps, rtol=1e-4)
        # scaling one layer's states no longer changes the fused feature
        torch.testing.assert_close(on.fuse(h * torch.tensor([1.0] * 64 + [50.0] * 32)), on.fuse(h), atol=1e-4, rtol=1e-4)
    with pytest.raises(DrafterError, match="k\\*H"):
        on.fuse(h[..., :80])


def test_fused_norm_checkpoint_round_trip(tiny_llama, tmp_path):
    d = _fused(tiny_llama)
    with torch.no_grad():
        for p in d.trainable_parameters():
            p.add_(0.05 * torch.randn_like(p))
    out = save_drafter(d, tmp_path / "on")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["activation_wave"]["fused_norm"] is True and "fused_norm" not in cfg  # engines do not read it
    with safe_open(str(out / "model.safetensors"), framework="pt") as fh:
        names = set(fh.keys())
    norms = {f"fuse_norm.{i}.weight" for i in range(3)}
    assert names == set(TOP_LEVEL_TENSORS) | set(MIDLAYER_TENSORS) | norms
    loaded = load_drafter(out, tiny_llama)
    assert loaded.spec == d.spec and loaded.spec.fused_norm
    ids, h = _record(tiny_llama)
    with torch.no_grad():
        a = d.logits(d.unroll(d.fuse(h), ids, torch.tensor([12]), 2)[1])
        b = loaded.logits(loaded.unroll(loaded.fuse(h), ids, torch.tensor([12]), 2)[1])
    torch.testing.assert_close(a, b)


def test_schema_1_checkpoints_reading_n_are_refused(drafter, tmp_path):
    """Index N meant transformers' normed state before capture schema 2: such a drafter is refused."""
    assert max(drafter.spec.layers) == drafter.spec.target_num_layers  # reads N
    old = save_drafter(drafter, tmp_path / "old", {"draft_config": {}, "layers": list(LAYERS)})
    with pytest.raises(DrafterError, match="schema 1.*retrain it with `wave train-draft`"):
        load_drafter(old)
    new = save_drafter(drafter, tmp_path / "new", {"draft_config": {}, "layers": list(LAYERS), "capture_schema": 2})
    assert load_drafter(new).spec == drafter.spec


def test_checkpoints_without_fused_norm_load_as_off(drafter, tmp_path):
    out = save_drafter(drafter, tmp_path / "old")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["activation_wave"].pop("fused_norm") is False
    (out / "config.json").write_text(json.dumps(cfg))  # as written before the field existed
    old = load_drafter(out)
    assert not old.spec.fused_norm and old.fuse_norm is None and old.spec == drafter.spec


def test_select_draft_vocab():
    counts = torch.tensor([5, 0, 9, 5, 1, 0, 0, 2])
    second = torch.tensor([0, 0, 0, 9, 0, 0, 7, 0])
    # 2 (9), then 3 before 0 (tie at 5 broken by top-k appearances), then 7 (2)
    assert select_draft_vocab(counts, 4, secondary=second).tolist() == [0, 2, 3, 7]
    # the end token is always included
    assert select_draft_vocab(counts, 3, always=[5]).tolist() == [0, 2, 5]
    assert select_draft_vocab(counts, 100).tolist() == list(range(8))


def test_bad_draft_ids_rejected(tiny_llama):
    with pytest.raises(DrafterError, match="strictly increasing"):
        Eagle3Drafter.from_target(tiny_llama, LAYERS, [3, 1, 2])
