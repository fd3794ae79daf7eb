"""Capture and training that scale with the data: a layer-subset capture holds exactly the
full capture's tensors for its layers, records read from disk equal records held in memory,
and a drafter trained from a subset capture, or to a token budget, is the drafter one expects."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from activation_wave.core.config import CaptureConfig, DraftConfig
from activation_wave.draft.experiment import drafter_dir
from activation_wave.draft.training import _plan, train_drafter
from activation_wave.models.capture import CacheError, capture
from activation_wave.models.records import DiskRecords, load_records, make_batches
from helpers import greedy_world, permutation_target

LAYERS = [1, 2, 4]
CFG = DraftConfig(draft_vocab=96, ttt_steps=2, epochs=2, lr=1e-2, batch_tokens=256, threads=1)


@pytest.fixture(scope="module")
def worlds(tiny_tokenizer, tmp_path_factory):
    """A tiny target, its full capture and a capture of LAYERS only, of the same responses."""
    target = permutation_target(tiny_tokenizer)
    responses, full = greedy_world(target, tmp_path_factory.mktemp("full"), n=24, max_new=16, eval_every=4,
                                   records_per_shard=5)
    sub_cfg = CaptureConfig(batch_size=8, max_length=64, records_per_shard=5, topk=8, layers=tuple(LAYERS))
    sub = capture(target, responses, sub_cfg, out_dir=tmp_path_factory.mktemp("sub"), progress=False)
    return target, full, sub


def test_subset_capture_holds_the_full_captures_tensors_for_its_layers(worlds):
    _, full, sub = worlds
    assert sub.layer_ids == LAYERS and full.layer_ids == list(range(full.n_layers + 1))
    assert sub.disk_bytes() < 0.6 * full.disk_bytes()
    for a, b in zip(full.manifest["shards"], sub.manifest["shards"]):
        fa, fb = load_file(str(full.path / a["file"])), load_file(str(sub.path / b["file"]))
        assert sorted(fb) == sorted(k for k in fa if not k.startswith("h.") or k in {f"h.{i}" for i in LAYERS})
        for k in fb:
            torch.testing.assert_close(fa[k], fb[k], rtol=0, atol=0, equal_nan=True, msg=k)


def test_a_subset_capture_refuses_layers_it_lacks(worlds):
    _, _, sub = worlds
    with pytest.raises(CacheError, match=r"holds layers \[1, 2, 4\], not \[3\]"):
        DiskRecords(sub, [1, 3], "train")


def test_subset_capture_keys_apart_and_full_key_unchanged(worlds, tiny_tokenizer):
    from activation_wave.models.capture import cache_dir_for

    target, full, _ = worlds
    from activation_wave.models.prompts import Response

    r = [Response(id="a", prompt_ids=[1, 2], response_ids=[3], finish="eos", text="")]
    base = CaptureConfig()
    assert cache_dir_for(target, r, base) != cache_dir_for(target, r, CaptureConfig(layers=(1, 2)))
    # a full capture's key is the one it had before capture.layers existed (committed ledgers depend on it)
    import dataclasses
    import hashlib
    import json

    from activation_wave.models.capture import SCHEMA_VERSION, data_hash

    params = {k: v for k, v in dataclasses.asdict(base).items() if k != "layers"}
    old = hashlib.sha256(json.dumps({"model": target.fingerprint, "data": data_hash(r), "cfg": params,
                                     "schema": SCHEMA_VERSION}, sort_keys=True).encode()).hexdigest()[:16]
    assert cache_dir_for(target, r, base).name.endswith(old)


def test_disk_records_equal_records_in_memory(worlds):
    _, full, _ = worlds
    for split in ("train", "eval", None):
        mem = [r for r in full.iter_records(LAYERS, split=split)]
        disk = DiskRecords(full, LAYERS, split)
        assert len(disk) == len(mem) > 0
        for m, d in zip(mem, disk):
            assert d.index == m.index and d.id == m.id and d.prompt_len == m.prompt_len
            assert torch.equal(d.hidden, torch.cat([m.hidden[i] for i in LAYERS], -1))
            for f in ("input_ids", "loss_mask", "top1", "topk_ids", "topk_logprobs"):
                torch.testing.assert_close(getattr(d, f), getattr(m, f), rtol=0, atol=0, equal_nan=True, msg=f)
    assert [len(r) for r in load_records(full, LAYERS)] == DiskRecords(full, LAYERS).lengths()


def _weights(path):
    return load_file(str(path / "model.safetensors"))


def test_training_from_a_subset_capture_gives_the_same_drafter(worlds, tmp_path):
    target, full, sub = worlds
    a = _weights(train_drafter(target, full, LAYERS, CFG, tmp_path / "a", progress=False))
    b = _weights(train_drafter(target, sub, LAYERS, CFG, tmp_path / "b", progress=False))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_token_budget_of_whole_epochs_is_those_epochs(worlds, tmp_path):
    import json

    target, full, _ = worlds
    one = train_drafter(target, full, LAYERS, CFG, tmp_path / "epochs", progress=False)
    tokens = json.loads((one / "train_log.json").read_text())["n_tokens"]
    budget = train_drafter(target, full, LAYERS, DraftConfig(**{**CFG.__dict__, "max_tokens": 2 * tokens}),
                           tmp_path / "budget", progress=False)
    a, b = _weights(one), _weights(budget)
    assert all(torch.equal(a[k], b[k]) for k in a)
    log = json.loads((budget / "train_log.json").read_text())
    assert log["tokens_trained"] == 2 * tokens and len(log["epochs"]) == 2
    split = log["time_split"]  # where the optimisation time went: its parts add up to at most the epochs' wall
    assert set(split) == {"data_s", "forward_s", "backward_s", "optimizer_s"} and min(split.values()) > 0
    assert sum(split.values()) <= log["train_wall_s"] + 0.05


def test_plan_cuts_the_last_epoch_at_the_budget():
    lengths = [10] * 12
    batches = make_batches(lengths, 30)  # 4 batches of 3 records, 30 tokens each
    epochs = _plan(batches, lengths, 3, 0, torch.Generator().manual_seed(0))
    assert [len(e) for e in epochs] == [4, 4, 4]
    cut = _plan(batches, lengths, 3, 150, torch.Generator().manual_seed(0))
    assert [len(e) for e in cut] == [4, 1] and cut[0] == epochs[0] and cut[1] == epochs[1][:1]
    over = _plan(batches, lengths, 1, 125, torch.Generator().manual_seed(0))
    assert sum(len(e) for e in over) == 5  # the step that crosses the budget is taken


def test_a_budgeted_drafter_has_its_own_key_and_an_unbudgeted_one_keeps_its_key(worlds):
    _, full, _ = worlds
    assert drafter_dir(full, LAYERS, CFG) != drafter_dir(full, LAYERS, DraftConfig(**{**CFG.__dict__, "max_tokens": 5}))
    assert drafter_dir(full, LAYERS, CFG) == drafter_dir(full, LAYERS, DraftConfig(**{**CFG.__dict__, "max_tokens": 0}))


def test_train_records_trains_on_the_first_records(worlds, tmp_path):
    import json

    target, full, _ = worlds
    n = 6
    out = train_drafter(target, full, LAYERS, DraftConfig(**{**CFG.__dict__, "train_records": n}), tmp_path / "first",
                        progress=False)
    log = json.loads((out / "train_log.json").read_text())
    first = DiskRecords(full, LAYERS, "train").lengths()[:n]
    assert log["n_records"] == n and log["n_tokens"] == sum(first)
