"""Layer selection: methods against brute force, planted structure, baselines, exports, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from activation_wave.measure import entropy as E
from activation_wave.select import selection as S
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.measure.cka import MinibatchCKA


def _planted(groups=(1, 4, 4, 3), n=160, d=10, noise=0.3, seed=0):
    """Layers 0..L-1 in groups; layers of a group are noisy copies of one source.

    Layer 0 (the embedding slot, not a candidate) is its own group. Sources have
    different spectra so the groups differ in entropy too.
    """
    rng = np.random.default_rng(seed)
    layers = []
    for g, size in enumerate(groups):
        src = rng.normal(size=(n, d)) * np.linspace(1.0, 1.0 + g, d) ** -1.5
        layers += [src + noise * src.std() * rng.normal(size=(n, d)) for _ in range(size)]
    return np.stack(layers), np.repeat(np.arange(len(groups)), groups)


@pytest.fixture(scope="module")
def planted():
    H, lab = _planted()
    return LayerStats.from_hidden(H), lab


@pytest.fixture(scope="module")
def small():
    H = np.random.default_rng(1).normal(size=(7, 40, 5)).cumsum(0)
    return LayerStats.from_hidden(H), H


def test_k1_greedy_equals_exhaustive_equals_best_single_layer(small):
    stats, _ = small
    pool = list(range(1, 7))
    for alpha in (1.0, 2.0):
        best = max(pool, key=lambda i: stats.single_entropy(alpha)[i])
        for m in ("entropy-greedy", "exhaustive", "combined"):
            assert S.select_layers(stats, 1, m, alpha=alpha).ids == (best,)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
@pytest.mark.parametrize("k", [2, 3])
def test_exhaustive_matches_brute_force_eigen(small, alpha, k):
    stats, H = small
    brute = max(itertools.combinations(range(1, 7), k), key=lambda s: E.concat_entropy([H[i] for i in s], alpha))
    assert S.select_layers(stats, k, "exhaustive", alpha=alpha).ids == brute


def test_exhaustive_with_lambda_matches_brute_force(small):
    stats, H = small
    C = stats.cka
    lam = 2.0

    def obj(s):
        return E.concat_entropy([H[i] for i in s], 2.0) - lam * np.mean([C[a, b] for a, b in itertools.combinations(s, 2)])

    brute = max(itertools.combinations(range(1, 7), 3), key=obj)
    sel = S.select_layers(stats, 3, "exhaustive", lam=lam)
    assert sel.ids == brute and sel.scores["objective"] == pytest.approx(obj(brute))


def test_planted_groups_one_layer_per_group(planted):
    stats, lab = planted
    for m in ("entropy-greedy", "combined", "exhaustive", "cka-diverse"):
        ids = S.select_layers(stats, 3, m).ids
        assert sorted(lab[list(ids)]) == [1, 2, 3], (m, ids)
    assert stats.compartments == [(0, 0), (1, 4), (5, 8), (9, 11)]


def test_combined_with_zero_lambda_is_entropy_greedy(small):
    stats, _ = small
    for k in (2, 3, 4):
        assert S.select_layers(stats, k, "combined", lam=0.0).ids == S.select_layers(stats, k, "entropy-greedy").ids


def test_lambda_sweep_mean_cka_never_increases(small):
    stats, _ = small
    sw = S.sweep_lambda(stats, 3, lams=[0, 0.5, 1, 2, 4, 8, 16], search="exhaustive")
    assert (np.diff(sw["mean_cka"]) <= 1e-12).all()  # exact maximiser: monotone in lambda
    assert (np.diff(sw["renyi2"]) <= 1e-12).all()
    assert len(S.sweep_lambda(stats, 2, lams=[0, 1])) == 2


def test_baselines():
    H = np.random.default_rng(2).normal(size=(31, 12, 3))  # N = 30, like SmolLM2
    stats = LayerStats.from_hidden(H)
    assert S.select_layers(stats, 3, "eagle3-default").ids == (2, 15, 27)
    assert S.select_layers(stats, 3, "last-k").ids == (28, 29, 30)
    even = S.select_layers(stats, 3, "evenly-spaced").ids
    assert even == (6, 16, 26)  # centres of the bins 1-10, 11-20, 21-30
    assert len(S.select_layers(stats, 7, "evenly-spaced").ids) == 7
    r1, r2 = (S.select_layers(stats, 3, "random", seed=s).ids for s in (0, 1))
    assert r1 == S.select_layers(stats, 3, "random", seed=0).ids and r1 != r2
    assert all(0 not in S.select_layers(stats, 3, m, seed=s).ids for m in S.METHODS for s in range(3))
    assert S.select_layers(stats, 2, "last-k", candidates=[3, 4, 9]).ids == (4, 9)


@pytest.mark.parametrize(
    "k,method,match",
    [
        (0, "combined", "integer >= 1"),
        (11, "combined", "would take all 11 candidate layers .*: choose 1 <= k <= 10"),
        (13, "exhaustive", "only 11 candidate layers .*: choose 1 <= k <= 10"),
        (3, "entropy", "choose one of entropy-greedy, combined"),
        (2, "eagle3-default", "use k=3"),
    ],
)
def test_errors_name_the_fix(planted, k, method, match):
    stats, _ = planted
    with pytest.raises(ValueError, match=match):
        S.select_layers(stats, k, method)


def test_other_errors(small):
    stats, H = small
    with pytest.raises(ValueError, match="not in these statistics"):
        S.select_layers(stats, 2, "combined", candidates=[1, 99])
    with pytest.raises(ValueError, match="ids has 3"):
        LayerStats.from_hidden(H, ids=[1, 2, 3])
    with pytest.raises(ValueError, match="out of range"):
        LayerStats.from_hidden(H, n_blocks=4)
    big = LayerStats.from_hidden(np.random.default_rng(0).normal(size=(25, 10, 3)))
    with pytest.raises(ValueError, match="alpha=2"):
        S.select_layers(big, 4, "exhaustive", alpha=1.0)


def test_stats_from_streamed_products_give_the_same_alpha2_selection(planted):
    stats, lab = planted
    H = stats.data
    L, n, d = H.shape
    chunks = [H[:, s : s + 40] for s in range(0, n, 40)]
    acc = E.PairAccumulator(L, d, mean=E.layer_means(chunks))
    mb = MinibatchCKA(L)
    for c in chunks:
        acc.add(c)
        mb.update(c)
    M, t = acc.result()
    streamed = LayerStats.from_products(stats.ids, M, t, mb.result())
    assert np.allclose(streamed.entropy2, stats.entropy2)
    for m in ("entropy-greedy", "exhaustive"):  # entropy only: same M, same choice
        assert S.select_layers(streamed, 3, m).ids == S.select_layers(stats, 3, m).ids
    for m in ("combined", "cka-diverse"):  # minibatch (debiased) CKA: still one layer per group
        assert sorted(lab[list(S.select_layers(streamed, 3, m).ids)]) == [1, 2, 3]
    with pytest.raises(ValueError, match="built from products"):
        S.select_layers(streamed, 3, "entropy-greedy", alpha=1.0)


def test_median_centred_stats(planted):
    stats, lab = planted
    robust = LayerStats.from_hidden(stats.data, center="median")
    assert np.allclose(robust.cka, stats.cka)  # CKA keeps mean centring
    assert sorted(lab[list(S.select_layers(robust, 3, "exhaustive").ids)]) == [1, 2, 3]
    assert np.allclose(robust.entropy2, E.layer_entropies(stats.data, 2.0, center="median"))


def test_rank_sets_and_candidate_sets(planted):
    stats, _ = planted
    sets = S.candidate_sets(stats, 3, n_random=3, seed=4)
    assert {"entropy-greedy", "eagle3-default", "random-0", "random-2"} <= set(sets)
    table = S.rank_sets(stats, sets)
    assert table["rank"].tolist() == list(range(1, len(sets) + 1))
    assert table["renyi2"].is_monotonic_decreasing
    assert table.loc[0, "renyi2"] == pytest.approx(S.select_layers(stats, 3, "exhaustive").scores["renyi2"])
    assert sets["exhaustive"] == S.select_layers(stats, 3, "exhaustive").ids  # lam=0 there by default
    assert table.loc[0, "renyi2"] == pytest.approx(table.set_index("name").loc["exhaustive", "renyi2"])
    by_cka = S.rank_sets(stats, [(1, 2, 3), (1, 4, 8)], by="mean_cka")
    assert by_cka.loc[0, "ids"] == (1, 4, 8)
    with pytest.raises(ValueError, match="by="):
        S.rank_sets(stats, sets, by="tau")


def test_bootstrap_stability(planted):
    from activation_wave.select.stability import bootstrap_methods

    stats, _ = planted
    H = stats.data
    groups = np.repeat(np.arange(16), 10)
    res = bootstrap_methods(H, groups, ["exhaustive"], 3, n_boot=6, seed=0)["exhaustive"]
    assert res.sets["count"].sum() == 6 and res.sets["freq"].sum() == pytest.approx(1.0)
    assert res.layers.index.tolist() == list(range(1, 12))
    assert res.layers.sum() == pytest.approx(3.0)  # three layers per replicate
    again = bootstrap_methods(H, groups, ["exhaustive"], 3, n_boot=6, seed=0)["exhaustive"]
    assert res.sets.equals(again.sets)
    assert set(res.to_dict()) == {"sets", "layers", "full", "n_boot"}


def test_selection_is_serialisable(planted):
    import json

    stats, _ = planted
    sel = S.select_layers(stats, 3, "combined", lam=0.5)
    d = json.loads(json.dumps(sel.to_dict()))
    assert d["ids"] == list(sel.ids) and d["params"]["lam"] == 0.5
    json.dumps(stats.to_dict())


# ------------------------------------------------------- every k-subset, in bounded blocks
def _synthetic_stats(L: int, seed: int = 0) -> LayerStats:
    """Statistics of L layer ids from random products (no hidden states): cheap at any L."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(L, 3 * L))
    M = A @ A.T + L * np.eye(L)
    d = np.sqrt(np.diag(M))
    return LayerStats.from_products(range(L), M=M, t=np.abs(rng.normal(size=L)) * 10 + 5, cka=M / np.outer(d, d))


@pytest.mark.parametrize("rows", [1 << 21, 7, 1])  # one table; a prefix per block; r = 1
def test_scan_matches_brute_force_at_every_k(monkeypatch, rows):
    monkeypatch.setattr(S, "SCAN_TABLE_ROWS", rows)
    monkeypatch.setattr(S, "SCAN_PREFIX_BATCH", 5)
    stats = _synthetic_stats(10)
    pool = list(range(1, 10))
    assert np.array_equal(S._combinations(9, 4), np.array(list(itertools.combinations(range(9), 4))))
    for k in range(1, 9):
        sets = np.array(list(itertools.combinations(range(1, 10), k)))
        s2 = E.renyi2_of_sets(stats.M, stats.t, sets)
        C = stats.cka
        pen = (C[sets[:, :, None], sets[:, None, :]].sum((1, 2)) - k) / (k * (k - 1)) if k > 1 else 0.0
        probes = [s2[0], s2[len(s2) // 2], 1e9]
        res = S._scan(stats, k, pool, lam=0.7, probes=probes)
        assert res.n_sets == len(sets)
        assert res.best == tuple(sets[int(np.argmax(s2 - 0.7 * pen))])
        assert S._scan(stats, k, pool).best == tuple(sets[int(np.argmax(s2))])
        for q, v in enumerate(probes):
            tol = 1e-12 * max(1.0, abs(v))
            assert (res.above[q], res.below[q]) == ((s2 > v + tol).sum(), (s2 < v - tol).sum())


def test_rank_many_equals_rank_among_all_one_by_one():
    stats = _synthetic_stats(12)
    sets = [(1, 5, 9), (2, 3, 4), (9, 10, 11)]
    assert S.rank_many(stats, sets) == [S.rank_among_all(stats, s) for s in sets]
    best = S.select_layers(stats, 3, "exhaustive").ids
    assert S.rank_among_all(stats, best)["rank"] == 1 and S.rank_many(stats, []) == []
    with pytest.raises(ValueError, match="one size"):
        S.rank_many(stats, [(1, 2), (1, 2, 3)])


def test_scan_plan_memory_is_flat_and_time_refused_up_front():
    plans = [S.scan_plan(30, k) for k in range(1, 30)]
    assert max(p.peak_bytes for p in plans) < 1 << 30  # under 1 GiB whatever k
    assert [p.n_sets for p in plans[:3]] == [30, 435, 4060]
    with pytest.raises(ValueError, match=r"k=15: scoring all 155,117,520 15-layer sets of 30 candidates .* choose k <= \d+ \(or k >= \d+\)"):
        S.check_scan(30, 15, passes=2)
    assert S.check_scan(30, 3, passes=3).n_sets == 4060
    assert S.check_scan(30, 29, passes=3).n_sets == 30  # near-complete sets are few


def test_k_bound_message_is_not_self_contradictory():
    pool = list(range(1, 31))
    assert S.k_bound_message(29, pool) is None
    assert "would take all 30 candidate layers (1..30)" in S.k_bound_message(30, pool)
    assert "only 30 candidate layers" in S.k_bound_message(31, pool) and "1 <= k <= 29" in S.k_bound_message(31, pool)
