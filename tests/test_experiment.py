"""Chapter 6's experiment: drafters per layer set and seed, trained in parallel or not."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

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


def test_ledger_resumes_without_the_drafter_cache(saved_world, tmp_path):
    """The committed ledger stands in for a lost drafter cache: drafters in it count as trained,
    their scores are read back, and a step that needs the weights trains them again, to the
    same weights and the same scores."""
    import shutil

    from activation_wave.draft import ledger
    from activation_wave.draft.experiment import ensure_weights, is_trained, score_drafters

    target, cache, _ = saved_world
    root = str(tmp_path / "ledger")
    cfg = DraftConfig(draft_vocab=64, ttt_steps=2, epochs=1, lr=1e-2, batch_tokens=256, threads=1, seed=7,
                      ledger=root)
    assert drafter_dir(cache, [1, 3], cfg) == drafter_dir(cache, [1, 3], dataclasses.replace(cfg, ledger=""))
    rows = run_sets(target, cache, {"x": [1, 3], "y": [2, 4]}, cfg, [7], progress=False)
    paths = [r["path"] for r in rows]
    first = score_drafters(target, cache, paths, depth=2, threshold=0.1, ledger=root)
    entry = ledger.read(root, paths[0])
    assert entry["layers"] == [1, 3] and entry["config"]["seed"] == 7
    assert entry["train_log"] == json.loads((Path(paths[0]) / "train_log.json").read_text())
    assert entry["scores"][ledger.score_key(cache.path, 2, 0.1)] == json.loads(json.dumps(first[0]))

    for p in paths:  # the machine's drafter cache is lost; the ledger is not
        shutil.rmtree(p)
    assert is_trained(cache, [1, 3], cfg) and not is_trained(cache, [1, 3], dataclasses.replace(cfg, ledger=""))
    again = run_sets(target, cache, {"x": [1, 3], "y": [2, 4]}, cfg, [7], progress=False)
    assert not any(Path(p).exists() for p in paths)  # nothing trained
    assert [r["tau"] for r in again] == [r["tau"] for r in rows]
    read_back = score_drafters(target, cache, paths, depth=2, threshold=0.1, ledger=root)
    assert not any(Path(p).exists() for p in paths)  # scores read back, nothing trained
    assert json.dumps(read_back, sort_keys=True) == json.dumps(first, sort_keys=True)

    # a score the ledger lacks needs the weights: trained again from the entry, bit-identical
    other = score_drafters(target, cache, paths[:1], depth=1, threshold=0.0, ledger=root)
    assert (Path(paths[0]) / "model.safetensors").exists() and not Path(paths[1]).exists()
    assert ledger.read(root, paths[0])["weights_digest"] == entry["weights_digest"]
    assert other[0]["tau_offline"] >= 1
    ensure_weights(target, paths, root)
    assert json.dumps(score_drafters(target, cache, paths, depth=2, threshold=0.1), sort_keys=True) == \
        json.dumps(first, sort_keys=True)


@pytest.mark.parametrize("workers", [1, 2])
def test_drafters_scored_as_they_train_never_train_again_to_be_scored(saved_world, tmp_path, workers):
    """With ScoreOnTrain each drafter's score reaches the ledger where it trained: after the
    machine's drafter cache is lost, scoring reads it back, the same as scoring afterwards."""
    import shutil

    from activation_wave.draft import ledger
    from activation_wave.draft.experiment import ScoreOnTrain, run_jobs, score_drafters

    target, cache, _ = saved_world
    root = str(tmp_path / "ledger")
    cfg = DraftConfig(draft_vocab=64, ttt_steps=2, epochs=1, lr=1e-2, batch_tokens=256, threads=1, seed=11,
                      ledger=root)
    jobs = [("x", [1, 3], cfg), ("y", [2, 4], cfg)]
    rows = run_jobs(target, cache, jobs, workers, progress=False,
                    score=ScoreOnTrain(str(cache.path), depth=2, threshold=0.1))
    paths = [r["path"] for r in rows]
    key = ledger.score_key(cache.path, 2, 0.1)
    assert all(key in ledger.read(root, p)["scores"] for p in paths)
    fresh = score_drafters(target, cache, paths, depth=2, threshold=0.1)  # from the weights, no ledger
    for p in paths:
        shutil.rmtree(p)
    kept = score_drafters(target, cache, paths, depth=2, threshold=0.1, ledger=root)
    assert not any(Path(p).exists() for p in paths)  # read back: nothing trained again
    assert json.dumps(kept, sort_keys=True) == json.dumps(json.loads(json.dumps(fresh)), sort_keys=True)


def test_corrupt_ledger_entry_is_set_aside_and_rebuilt(saved_world, tmp_path):
    from activation_wave.draft import ledger

    target, cache, _ = saved_world
    root = str(tmp_path / "ledger")
    cfg = DraftConfig(draft_vocab=64, ttt_steps=2, epochs=1, lr=1e-2, batch_tokens=256, threads=1, seed=3,
                      ledger=root)
    (row,) = run_sets(target, cache, {"x": [2, 3]}, cfg, [3], progress=False)
    path = ledger.ledger_file(root, row["path"])
    path.write_text('{"version": 1, "train_lo')  # cut off mid-write
    with pytest.warns(UserWarning, match="unreadable"):
        assert ledger.read(root, row["path"]) is None
    assert path.with_suffix(".json.corrupt").exists()
    run_sets(target, cache, {"x": [2, 3]}, cfg, [3], progress=False)  # loads the cached drafter, re-enters it
    assert ledger.read(root, row["path"])["train_log"]["config"]["seed"] == 3
    with pytest.raises(FileNotFoundError, match="neither in the cache nor in the ledger"):
        from activation_wave.draft.experiment import ensure_weights
        ensure_weights(target, [Path(row["path"]).with_name("L9-000000000000")], root)


def test_pool_workers_die_with_their_parent(tmp_path):
    """A study killed mid-training leaves no worker behind (they would keep training)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = ("import os, time; from activation_wave.draft.experiment import _pool\n"
            "p = _pool(1); pid = p.submit(os.getpid).result()\n"
            "print(pid, flush=True); time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(worker, signal.SIGKILL)
        raise AssertionError("the pool worker outlived its killed parent")
