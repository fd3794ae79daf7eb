"""The closed-form probe: block assembly equals a direct fit; it reads the right rows and targets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from activation_wave.select.probe import (ProbeData, _project, _read_rows, _sample_anchors, _valid_anchors, probe_scores,
                                   rank_subsets)
from helpers import permutation_capture, permutation_target


@pytest.fixture(scope="module")
def perm_cache(tiny_tokenizer, tmp_path_factory):
    """Capture of greedy responses of the permutation target (next token ~ perm[current])."""
    root = tmp_path_factory.mktemp("probe")
    mp = pytest.MonkeyPatch()
    mp.setenv("WAVE_CACHE", str(root / "cache"))
    cache = permutation_capture(permutation_target(tiny_tokenizer), root / "cap", n_prompts=24, max_new_tokens=20,
                                seed=5, records_per_shard=7)
    yield cache
    mp.undo()


def test_valid_anchors_need_steps_response_targets_in_the_same_record():
    loss = np.array([0, 1, 1, 1, 1, 0, 1, 1, 1], bool)
    rec = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1])
    assert _valid_anchors(loss, rec, 2).tolist() == [1, 2, 6]
    assert _valid_anchors(loss, rec, 1).tolist() == [1, 2, 3, 6, 7]
    rec2 = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1])  # a record boundary inside the run of loss positions
    assert _valid_anchors(loss, rec2, 1).tolist() == [1, 3, 6, 7]


def test_project_centres_scales_and_keeps_the_top_components():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6)) * np.array([5.0, 3.0, 1.0, 0.5, 0.1, 0.1]) + 7.0
    full, full_e = _project(x, x[:10], rank=6)
    assert np.allclose(full.mean(0), 0) and (full ** 2).sum(1).mean() == pytest.approx(1.0)
    np.testing.assert_allclose(full_e, full[:10])
    top, _ = _project(x, x[:10], rank=2)
    cov = top.T @ top
    assert abs(cov[0, 1]) < 1e-9 * cov[0, 0]  # principal scores are uncorrelated
    assert np.trace(cov) / np.trace(full.T @ full) > 0.95  # the two large directions hold the variance


def test_anchors_targets_and_rows_match_the_records(perm_cache):
    where, labels = _sample_anchors(perm_cache, steps=2, n_train=40, n_eval=15, seed=0)
    assert len(where["train"]) == 40 and len(where["eval"]) == 15
    recs = {r.index: r for r in perm_cache.iter_records([0, 3])}
    shard_rows = [s["record"].numpy() for s in perm_cache.iter_shards([], fields=("record", "position"))]
    pos = [s["position"].numpy() for s in perm_cache.iter_shards([], fields=("record", "position"))]
    h3 = _read_rows(perm_cache, 3, where["eval"])
    tok = _read_rows(perm_cache, 0, where["eval"], offset=1)
    for i, (si, row) in enumerate(where["eval"]):
        r = recs[int(shard_rows[si][row])]
        t = int(pos[si][row])
        assert r.split == "eval" and bool(r.loss_mask[t])
        # step j's target is the greedy token at t + j + 1, which the target's argmax at t + j chose
        assert labels["eval"][i].tolist() == [int(r.input_ids[t + 2]), int(r.input_ids[t + 3])]
        assert labels["eval"][i].tolist() == r.top1[t + 1:t + 3].tolist()
        np.testing.assert_allclose(h3[i], r.hidden[3][t].double().numpy())
        np.testing.assert_allclose(tok[i], r.hidden[0][t + 1].double().numpy())  # the verified token's embedding


def test_block_assembly_equals_a_direct_ridge_fit(perm_cache):
    kw = dict(n_train=200, n_eval=60, rank=8, vocab=20, steps=2, ridge=0.05, seed=1)
    data = ProbeData.from_cache(perm_cache, **kw)
    where, labels = _sample_anchors(perm_cache, 2, 200, 60, 1)
    layers = [1, 3]
    parts = [_project(_read_rows(perm_cache, i, where["train"], o), _read_rows(perm_cache, i, where["eval"], o), 8)
             for i, o in ((1, 0), (3, 0), (0, 1))]  # the set's layers, then the verified token's block
    P = np.concatenate([p for p, _ in parts], 1)
    Pe = np.concatenate([e for _, e in parts], 1)
    vocab = data.vocab_ids
    Y = np.zeros((len(P), 2 * len(vocab)))
    for j in range(2):
        for n, t in enumerate(labels["train"][:, j]):
            hit = np.nonzero(vocab == t)[0]
            if len(hit):
                Y[n, j * len(vocab) + hit[0]] = 1.0
    A = P.T @ P
    lam = 0.05 * np.trace(A) / len(A)
    W = np.linalg.solve(A + lam * np.eye(len(A)), P.T @ (Y - Y.mean(0)))
    out = Pe @ W + Y.mean(0)
    ref = np.stack([out[:, j * len(vocab):(j + 1) * len(vocab)].argmax(1) for j in range(2)], 1)
    np.testing.assert_array_equal(data.predict(layers), ref)
    # the vocabulary is the most frequent train targets
    ids, counts = np.unique(labels["train"], return_counts=True)
    assert set(vocab) == set(ids[np.argsort(-counts, kind="stable")[:20]])


def test_probe_learns_the_permutation_and_scores_are_consistent(perm_cache):
    data = ProbeData.from_cache(perm_cache, n_train=400, n_eval=120, rank=16, vocab=64, steps=2, seed=0)
    s = data.score([2, 4])
    assert s.layers == (2, 4) and len(s.acc_by_step) == 2 and s.n_eval == len(data.labels_eval)
    # score = 1 + sum_j P(steps 1..j all correct): at least 1 + acc_1, at most 1 + sum_j min(acc_1..acc_j)
    acc = s.acc_by_step
    assert 1.0 + acc[0] - 1e-12 <= s.score <= 1.0 + acc[0] + min(acc) + 1e-12
    # x_{t+2} = perm[x_{t+1}] mostly, and x_{t+1}'s embedding is in every set: far above chance (1/64)
    assert s.acc_by_step[0] > 0.3
    again = probe_scores(data, {"a": [2, 4], "b": [1]})
    assert again["a"].score == s.score and set(again) == {"a", "b"}
    from_cache = probe_scores(perm_cache, [[2, 4]], n_train=400, n_eval=120, rank=16, vocab=64, steps=2, seed=0)
    assert from_cache["[2, 4]"].score == pytest.approx(s.score)


def test_rank_subsets_scores_every_subset_best_first(perm_cache):
    data = ProbeData.from_cache(perm_cache, layers=[1, 2, 3, 4], n_train=150, n_eval=50, rank=4, vocab=16, seed=0)
    ranked = rank_subsets(data, 2)
    assert len(ranked) == math.comb(4, 2)
    assert sorted(r.layers for r in ranked) == list(itertools.combinations([1, 2, 3, 4], 2))
    assert all(a.score >= b.score for a, b in zip(ranked, ranked[1:]))
    with pytest.raises(ValueError, match="not prepared"):
        data.score([0, 1])


def test_embedding_targets_and_errors(perm_cache):
    emb = ProbeData.from_cache(perm_cache, n_train=300, n_eval=80, rank=16, vocab=64, steps=2, target="embedding")
    assert emb.vocab_emb.shape == (len(emb.vocab_ids), 32)
    # the stored embedding of a vocabulary token is layer 0 at a position holding that token
    first = next(perm_cache.iter_records([0]))
    t = int(first.input_ids[-1])
    if t in emb.vocab_ids:
        k = int(np.nonzero(emb.vocab_ids == t)[0][0])
        np.testing.assert_allclose(emb.vocab_emb[k], first.hidden[0][-1].numpy(), rtol=1e-6)
    assert emb.score([2, 4]).acc_by_step[0] > 0.3
    with pytest.raises(ValueError, match="target="):
        ProbeData.from_cache(perm_cache, target="logits")
    with pytest.raises(ValueError, match="not in the capture"):
        ProbeData.from_cache(perm_cache, layers=[99])
    with pytest.raises(ValueError, match="anchors"):
        ProbeData.from_cache(perm_cache, steps=60)
