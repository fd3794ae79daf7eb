"""Responses and capture on a tiny random model: resumable, verified, deterministic."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from activation_wave.models.capture import (NORMED, SCHEMA_VERSION, CacheError, CaptureCache, capture, final_norm,
                                     forward_batch)
from activation_wave.core.config import CaptureConfig, DataConfig
from activation_wave.models.prompts import Prompt, generate_responses, read_responses, responses_key, sampled_responses

PROMPTS = [Prompt(id=f"p{i}", text=f"Say something about number {i}." * (1 + i % 3), category="c", split="eval" if i % 4 == 3 else "train")
           for i in range(10)]
DCFG = DataConfig(max_new_tokens=12, batch_size=4)
CCFG = CaptureConfig(batch_size=3, records_per_shard=3, topk=4)


@pytest.fixture()
def responses(tiny_target):
    rs, _ = generate_responses(tiny_target, PROMPTS, DCFG, progress=False)
    return rs


def test_forward_batch_matches_unpadded_forward(tiny_llama):
    seqs = [[5, 6, 7, 8, 9], [10, 11, 12]]
    out = forward_batch(tiny_llama, seqs, [3, 1], topk=4)
    assert out["hidden"].shape == (6, 8, 32)  # 0..N (N = 4, pre-norm), then the normed entry; 8 real tokens
    with torch.no_grad():
        ref = tiny_llama(torch.tensor([seqs[1]]), output_hidden_states=True)
    hf = torch.stack(ref.hidden_states)[:, 0]  # transformers: N + 1 entries, the last one normed
    torch.testing.assert_close(out["hidden"][:4, 5:], hf[:4], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out["hidden"][5, 5:], hf[4], atol=1e-5, rtol=1e-4)  # the labelled normed entry
    pre = out["hidden"][4, 5:]  # index N: the last block's output before the final norm
    torch.testing.assert_close(final_norm(tiny_llama)(pre), hf[4], atol=1e-5, rtol=1e-4)
    assert float((pre - hf[4]).abs().max()) > 0.1
    # loss mask: positions prompt_len-1 .. len-2 predict response tokens
    assert out["loss_mask"].tolist() == [False, False, True, True, False, True, True, False]
    # next-token statistics at the loss positions only (the LM head runs on those rows)
    p = torch.softmax(ref.logits[0], -1)
    resp = out["loss_mask"][5:]
    torch.testing.assert_close(out["next_entropy"][5:][resp], -(p * p.log()).sum(-1)[resp], atol=1e-5, rtol=1e-4)
    assert out["top1"][5:][resp].tolist() == ref.logits[0].argmax(-1)[resp].tolist()
    torch.testing.assert_close(out["topk_logprobs"][5:][resp], torch.log(p).topk(4, -1).values[resp], atol=1e-5, rtol=1e-4)
    off = ~out["loss_mask"]
    assert out["next_entropy"][off].isnan().all() and (out["top1"][off] == -1).all()
    assert (out["topk_ids"][off] == -1).all() and (out["topk_logprobs"][off] == -math.inf).all()


def test_the_final_norm_hook_names_what_it_cannot_find():
    from activation_wave.models.capture import engine_hidden_states, last_block_output

    with pytest.raises(ValueError, match=r"no final norm found \(looked for norm, .*FINAL_NORM_NAMES"):
        final_norm(torch.nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="ran 2 times in one forward"):
        engine_hidden_states([torch.zeros(1)] * 3, [torch.zeros(1)] * 2)
    model = torch.nn.Module()
    model.norm = torch.nn.LayerNorm(3)
    with last_block_output(model) as box:
        model.norm(torch.ones(1, 3))
    assert len(box) == 1 and not model.norm._forward_pre_hooks  # recorded once, hook removed
    assert engine_hidden_states([torch.zeros(3), torch.full((3,), 2.0)], box)[-1].tolist() == [[1.0, 1.0, 1.0]]


def test_head_logits_match_the_full_forward_with_soft_capping():
    """The capture's LM head on the decoder's output equals ``model(...).logits``, also
    for a model with final logit soft-capping (Gemma 3 here, cap made active)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from activation_wave.models.capture import head_logits

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=16, final_logit_softcapping=0.05,
                           max_position_embeddings=64)
    model = Gemma3ForCausalLM(cfg).eval()
    ids = torch.tensor([[3, 9, 27, 4, 50]])
    with torch.no_grad():
        ref = model(input_ids=ids).logits
        got = head_logits(model, model.base_model(input_ids=ids).last_hidden_state)
        raw = model.get_output_embeddings()(model.base_model(input_ids=ids).last_hidden_state)
    assert float((raw - ref).abs().max()) > 1e-3  # the cap is in effect
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-5)


def test_next_token_stats_blockwise_equal_the_direct_formulas():
    from activation_wave.models.capture import _next_token_stats

    g = torch.Generator().manual_seed(0)
    x = torch.randn(700, 300, generator=g, dtype=torch.float64) * 4
    x[3] = 0.0  # uniform row: entropy log V
    x[4, 7] = 80.0  # one dominant logit: entropy ~ 0
    logp = torch.log_softmax(x, -1)
    ref_h = -(logp.exp() * logp).sum(-1)
    ref_v, ref_i = logp.topk(5, dim=-1)
    for pieces in ([x], [x[:1], x[1:390], x[390:]]):  # one tensor, or per-sequence pieces in order
        h, v, i = _next_token_stats(pieces if len(pieces) > 1 else pieces[0], 5, rows=128)
        torch.testing.assert_close(h, ref_h)
        torch.testing.assert_close(v, ref_v)
        assert torch.equal(i, ref_i)
    assert abs(float(ref_h[3]) - math.log(300)) < 1e-9 and float(ref_h[4]) < 1e-20


def test_responses_resume_after_interruption(tiny_target):
    full, path = generate_responses(tiny_target, PROMPTS, DCFG, progress=False)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:4]) + "\n" + lines[4][:10])  # torn last line
    assert len(read_responses(path)) == 3
    again, _ = generate_responses(tiny_target, PROMPTS, DCFG, progress=False)
    assert [r.response_ids for r in again] == [r.response_ids for r in full]
    # a complete cache is only read: another process reading it at the same time never
    # sees it truncated (a rewrite on every read once made a concurrent run regenerate)
    before = (path.stat().st_mtime_ns, path.read_bytes())
    generate_responses(tiny_target, PROMPTS, DCFG, progress=False)
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before
    assert not list(path.parent.glob("*.tmp"))


SAMPLED = dataclasses.replace(DCFG, samples_per_prompt=2, sample_temperature=1.0)


def test_sampled_responses_cover_train_prompts_seeded_and_resumable(tiny_target):
    greedy, _ = generate_responses(tiny_target, PROMPTS, SAMPLED, progress=False)
    extra, paths = sampled_responses(tiny_target, PROMPTS, SAMPLED, progress=False)
    train = [p for p in PROMPTS if p.split == "train"]
    assert [r.id for r in extra] == [f"{p.id}~s{k}" for k in (1, 2) for p in train]
    assert {r.split for r in extra} == {"train"}
    by_id = {r.id: r for r in greedy}
    # sampled at T = 1 from a random model: they part from greedy, and from each other
    assert sum(r.response_ids != by_id[r.id.split("~")[0]].response_ids for r in extra) >= len(extra) - 1
    assert sum(a.response_ids != b.response_ids for a, b in zip(extra[:len(train)], extra[len(train):])) >= len(train) - 1
    # a torn cache resumes to the same tokens (the seed is per fixed batch), a fresh one too
    lines = paths[1].read_text().splitlines()
    paths[1].write_text("\n".join(lines[:3]) + "\n" + lines[3][:10])
    again, _ = sampled_responses(tiny_target, PROMPTS, SAMPLED, progress=False)
    assert [r.response_ids for r in again] == [r.response_ids for r in extra]
    paths[1].unlink()
    fresh, _ = sampled_responses(tiny_target, PROMPTS, SAMPLED, progress=False)
    assert [r.response_ids for r in fresh] == [r.response_ids for r in extra]
    # asking for one sample reuses the first file: only new samples are ever generated
    before = paths[0].stat().st_mtime_ns
    one, _ = sampled_responses(tiny_target, PROMPTS, dataclasses.replace(SAMPLED, samples_per_prompt=1), progress=False)
    assert [r.response_ids for r in one] == [r.response_ids for r in extra[:len(train)]]
    assert paths[0].stat().st_mtime_ns == before


def test_committed_sampled_responses_are_used(tiny_target, tmp_path, monkeypatch):
    import activation_wave.models.prompts as data

    one = dataclasses.replace(SAMPLED, samples_per_prompt=1)
    extra, (path,) = sampled_responses(tiny_target, PROMPTS, one, progress=False)
    monkeypatch.setattr(data, "COMMITTED_RESPONSES", tmp_path / "committed")
    (tmp_path / "committed").mkdir()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for obj in lines[1:]:
        obj["response_ids"] = [7, 1]  # marks the committed copy
    (tmp_path / "committed" / path.name).write_text("".join(json.dumps(o) + "\n" for o in lines))
    path.unlink()
    again, _ = sampled_responses(tiny_target, PROMPTS, one, progress=False)
    assert [r.id for r in again] == [r.id for r in extra] and {tuple(r.response_ids) for r in again} == {(7, 1)}


def test_sampling_temperature_scales_the_model_distribution(tiny_target):
    """Near zero temperature, sampling is greedy decoding: what is sampled is the
    model's own (temperature-scaled) next-token distribution."""
    greedy, _ = generate_responses(tiny_target, PROMPTS, DCFG, progress=False)
    cold = dataclasses.replace(DCFG, samples_per_prompt=1, sample_temperature=1e-5)
    extra, _ = sampled_responses(tiny_target, PROMPTS, cold, progress=False)
    by_id = {r.id: r for r in greedy}
    assert [r.response_ids for r in extra] == [by_id[r.id[:-3]].response_ids for r in extra]


def test_sample_settings_leave_the_greedy_set_alone(tiny_target):
    assert responses_key(tiny_target, PROMPTS, DCFG) == responses_key(tiny_target, PROMPTS, SAMPLED)
    assert sampled_responses(tiny_target, PROMPTS, DCFG, progress=False) == ([], [])
    for bad in ({"samples_per_prompt": -1}, {"samples_per_prompt": 1, "sample_temperature": 0.0}):
        with pytest.raises(ValueError, match="samples_per_prompt"):  # rejected by DataConfig itself
            dataclasses.replace(DCFG, **bad)


def test_interrupted_capture_resumes_to_identical_manifest(tiny_target, responses, tmp_path):
    ref = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "a", progress=False)
    with pytest.raises(KeyboardInterrupt):
        capture(tiny_target, responses, CCFG, out_dir=tmp_path / "b", progress=False, max_shards=2)
    assert not (tmp_path / "b" / "manifest.json").exists()
    resumed = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "b", progress=False)
    strip = lambda m: [(s["file"], s["sha256"]) for s in m["shards"]]  # noqa: E731
    assert strip(resumed.manifest) == strip(ref.manifest)
    assert len(ref.manifest["shards"]) == 4


def test_corrupted_shard_is_detected_and_rebuilt(tiny_target, responses, tmp_path):
    cache = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "c", progress=False)
    shard = tmp_path / "c" / cache.manifest["shards"][1]["file"]
    good = shard.read_bytes()
    shard.write_bytes(good[:-64] + b"\0" * 64)
    with pytest.raises(CacheError, match="sha256"):
        CaptureCache(tmp_path / "c").verify()
    rebuilt = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "c", progress=False)
    assert shard.read_bytes() == good
    assert rebuilt.manifest["shards"][1]["sha256"] == cache.manifest["shards"][1]["sha256"]


def test_stale_schema_1_cache_is_named_and_rebuilt(tiny_target, responses, tmp_path, capsys):
    """A cache written before h.N became the pre-norm state (schema 1) is refused with the
    reason and the fix, and ``capture`` into that folder rebuilds every shard."""
    cache = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "s", progress=False)
    assert SCHEMA_VERSION == 2 and cache.manifest["schema_version"] == 2
    fresh = {s["file"]: s["sha256"] for s in cache.manifest["shards"]}
    mpath = tmp_path / "s" / "manifest.json"
    old = json.loads(mpath.read_text())
    old["schema_version"] = 1
    mpath.write_text(json.dumps(old))
    for side in (tmp_path / "s").glob("shard_*.json"):  # schema-1 sidecars carry no schema_version
        info = json.loads(side.read_text())
        del info["schema_version"]
        side.write_text(json.dumps(info))
    with pytest.raises(CacheError, match=r"schema 1 != 2 \(schema 1 stored transformers' normed.*rerun `wave capture`"):
        CaptureCache(tmp_path / "s")
    stamp = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "s").glob("shard_*.safetensors")}
    rebuilt = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "s", progress=False)
    assert "capture schema 1 != 2" in capsys.readouterr().err
    assert rebuilt.manifest["schema_version"] == 2
    assert {s["file"]: s["sha256"] for s in rebuilt.manifest["shards"]} == fresh
    assert all(p.stat().st_mtime_ns != stamp[p.name] for p in (tmp_path / "s").glob("shard_*.safetensors"))


def test_missing_or_broken_manifest_is_a_clear_error(tmp_path):
    with pytest.raises(CacheError, match="did not finish"):
        CaptureCache(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(CacheError, match="corrupted"):
        CaptureCache(tmp_path)


def test_records_and_samples(tiny_target, responses, tmp_path):
    cache = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "d", progress=False)
    recs = list(cache.iter_records([1, 3]))
    assert [r.id for r in recs] == [p.id for p in PROMPTS]
    r = recs[2]
    assert r.hidden[3].shape == (len(r.input_ids), 32)
    assert int(r.loss_mask.sum()) == len(responses[2].response_ids)
    n_resp = sum(len(x.response_ids) for x in responses)
    s1 = cache.sample_tokens(40, seed=1, layers=[0, 2])
    s2 = cache.sample_tokens(40, seed=1, layers=[0, 2])
    s3 = cache.sample_tokens(40, seed=2, layers=[0, 2])
    assert s1.hidden.shape == (2, 40, 32) and np.array_equal(s1.hidden, s2.hidden)
    assert not np.array_equal(s1.record * 1000 + s1.position, s3.record * 1000 + s3.position)
    assert len(cache.sample_tokens(10**6, seed=0, layers=[1]).record) == n_resp
    late = cache.sample_tokens(10**6, seed=0, layers=[1], min_position=1)
    assert len(late.record) == n_resp - len(responses)
    ev = cache.sample_tokens(10**6, seed=0, layers=[1], split="eval")
    assert set(ev.split) == {"eval"}
    # the sample's hidden rows equal the records' rows
    by_index = {r.index: r for r in cache.iter_records([2])}
    for j in (0, 17, 39):
        rid, pos = int(s1.record[j]), int(s1.position[j])
        np.testing.assert_array_equal(s1.hidden[1, j], by_index[rid].hidden[2][pos].numpy())
        assert by_index[rid].loss_mask[pos]
    # index N is the pre-norm last block; the normed entry is read under its label only
    n = cache.n_layers
    assert cache.layer_ids == list(range(n + 1))
    rec = next(cache.iter_records([n, NORMED]))
    normed = final_norm(tiny_target.model)(rec.hidden[n])
    torch.testing.assert_close(normed, rec.hidden[NORMED], atol=2e-2, rtol=2e-2)  # fp16 storage
    assert not torch.allclose(rec.hidden[n], rec.hidden[NORMED], atol=0.1)
    assert cache.sample_tokens(5, seed=0, layers=[n, NORMED]).hidden.shape == (2, 5, 32)


def test_cache_hit_is_fast_and_keyed(tiny_target, responses):
    a = capture(tiny_target, responses, CCFG, progress=False)
    b = capture(tiny_target, responses, CCFG, progress=False)
    assert a.path == b.path
    c = capture(tiny_target, responses[:5], CCFG, progress=False)
    assert c.path != a.path and len(c.records) == 5
    assert json.loads((a.path / "manifest.json").read_text())["model"]["fingerprint"] == tiny_target.fingerprint


def test_summary_names_the_capture_relative_to_the_cache_root(tiny_target, responses, tmp_path):
    """An executed page prints the summary line: it shows ``<cache>/capture/<id>``, never the
    machine's absolute path (a capture outside the root shows its folder's name)."""
    in_root = capture(tiny_target, responses, CCFG, progress=False)
    assert f"MiB at <cache>/capture/{in_root.path.name}" in in_root.summary()
    assert str(tmp_path) not in in_root.summary()
    outside = capture(tiny_target, responses, CCFG, out_dir=tmp_path / "elsewhere", progress=False)
    assert outside.summary().endswith("MiB at <elsewhere>/elsewhere") and str(tmp_path) not in outside.summary()
