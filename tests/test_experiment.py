"""Chapter 6's experiment: drafters per layer set and seed, trained in parallel or not."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file

from activation_wave.models.capture import capture
from activation_wave.core.config import CaptureConfig, DraftConfig, SpecConfig
from activation_wave.models.prompts import Response
from activation_wave.core.stats import bootstrap_mean_ci
from activation_wave.draft.experiment import drafter_dir, run_sets, tau_with_ci
from activation_wave.core.stats import spearman
from activation_wave.models.targets import load_target
from activation_wave.decode.baselines import plain_generate
from activation_wave.draft.training import train_drafter
from helpers import permutation_target


@pytest.fixture(scope="module")
def saved_world(tiny_tokenizer, tmp_path_factory):
    """A tiny target saved to a folder (so worker processes can load it by name) and its capture."""
    root = tmp_path_factory.mktemp("exp")
    mp = pytest.MonkeyPatch()
    mp.setenv("WAVE_CACHE", str(root / "cache"))
    folder = root / "perm-llama"
    perm = permutation_target(tiny_tokenizer)
    perm.model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    target = load_target(str(folder))
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(2, 120, (int(torch.randint(4, 10, (1,), generator=g)),), generator=g).tolist()
               for _ in range(20)]
    res = plain_generate(target, prompts, SpecConfig(max_new_tokens=16, threads=1), impl="loop")
    responses = [Response(id=f"p{i}", prompt_ids=p, response_ids=r, finish="length", text="",
                          split="eval" if i % 5 == 4 else "train") for i, (p, r) in enumerate(zip(prompts, res.token_ids))]
    cache = capture(target, responses, CaptureConfig(batch_size=8, max_length=64, records_per_shard=8, topk=8),
                    out_dir=root / "cap", progress=False)
    yield target, cache, root
    mp.undo()


def test_parallel_training_equals_serial_and_reruns_are_cached(saved_world):
    target, cache, root = saved_world
    cfg = DraftConfig(draft_vocab=64, ttt_steps=2, epochs=2, lr=1e-2, batch_tokens=256, threads=1, workers=2)
    sets = {"a": [1, 2, 4], "b": [2, 3, 4]}
    rows = run_sets(target, cache, sets, cfg, [0, 1], progress=False)
    assert [(r["set"], r["seed"]) for r in rows] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert all(r["tau_lo"] <= r["tau"] <= r["tau_hi"] and r["tau"] >= 1 for r in rows)
    # the workers' drafter equals one trained here, alone, with the same seed and threads
    alone = train_drafter(target, cache, [2, 3, 4], dataclasses.replace(cfg, seed=1), root / "alone", progress=False)
    got, ref = load_file(f"{rows[3]['path']}/model.safetensors"), load_file(f"{alone}/model.safetensors")
    assert got.keys() == ref.keys() and all(torch.equal(got[k], ref[k]) for k in ref)
    # `workers` does not enter the drafter's key, and a rerun trains nothing
    assert drafter_dir(cache, [1, 2, 4], cfg) == drafter_dir(cache, [1, 2, 4], dataclasses.replace(cfg, workers=1))
    stamp = {r["path"]: (root / r["path"] / "train_log.json").stat().st_mtime_ns for r in rows}
    again = run_sets(target, cache, sets, dataclasses.replace(cfg, workers=1), [0, 1], progress=False)
    assert [r["tau"] for r in again] == [r["tau"] for r in rows]
    assert stamp == {r["path"]: (root / r["path"] / "train_log.json").stat().st_mtime_ns for r in again}


def test_parallel_scoring_equals_serial_scoring(saved_world):
    """Chapter 6 scores its drafters ``draft.workers`` at a time; every number equals scoring
    them one after the other in this process."""
    from activation_wave.draft.experiment import score_drafters

    target, cache, _ = saved_world
    cfg = DraftConfig(draft_vocab=64, ttt_steps=2, epochs=1, lr=1e-2, batch_tokens=256, threads=1)
    rows = run_sets(target, cache, {"a": [1, 2, 4], "b": [2, 3, 4], "c": [1, 3, 4]}, cfg, [0], progress=False)
    paths = [r["path"] for r in rows]
    serial = score_drafters(target, cache, paths, depth=3, threshold=0.1, workers=1, threads=1)
    parallel = score_drafters(target, cache, paths, depth=3, threshold=0.1, workers=2, threads=1)
    assert len(serial) == 3 and all(s["per_record"] for s in serial)
    # bit for bit (NaN acceptance of a position never reached compares equal as text)
    assert json.dumps(parallel, sort_keys=True) == json.dumps(serial, sort_keys=True)


def test_tau_interval_and_helpers():
    log = {"tau_offline": 1.5, "per_record": [{"tokens": 11, "rounds": 5}, {"tokens": 21, "rounds": 20},
                                              {"tokens": 9, "rounds": 4}, {"tokens": 1, "rounds": 0}]}
    ci = tau_with_ci(log)
    assert ci["eval_records"] == 3 and ci["tau_lo"] <= 38 / 29 <= ci["tau_hi"]
    lo, hi = bootstrap_mean_ci([1.0, 2.0, 3.0, float("nan")])
    assert 1.0 <= lo <= 2.0 <= hi <= 3.0
    assert all(map(lambda v: v != v, bootstrap_mean_ci([1.0])))  # nan with one value
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2], [1, 2]) != spearman([1, 2], [1, 2])  # nan with fewer than 3 points


def test_drafter_dir_keys_sorted_ids_as_before(tmp_path):
    """Issue 28 item 12: [15, 2, 27] and [2, 15, 27] are one drafter, and sorted ids keep the
    folder they had before the ids were sorted (pinned from commit c0f41ed), so cached
    drafters are found again."""
    from types import SimpleNamespace

    cache = SimpleNamespace(path=tmp_path)
    assert drafter_dir(cache, [2, 15, 27], DraftConfig()).name == "L2-15-27-a5a4fa7c65b7"
    assert drafter_dir(cache, [27, 2, 15], DraftConfig()) == drafter_dir(cache, [2, 15, 27], DraftConfig())
    cfg = DraftConfig(seed=1, fused_norm=True, records_fraction=0.25)
    assert drafter_dir(cache, (15, 27, 2), cfg).name == "L2-15-27-b9ad1abbe7b5"
