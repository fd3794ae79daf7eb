"""Linear CKA: two formulations, debiased and minibatch estimators, compartments."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activation_wave.measure import cka as K
from activation_wave.measure.entropy import pair_products, prepare

PROPS = settings(max_examples=15, deadline=None)


def _pair(seed: int, n: int, d1: int, d2: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d1))
    Y = X @ rng.normal(size=(d1, d2)) + rng.normal(size=(n, d2))
    return X, Y


def _orthogonal(seed: int, d: int) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))[0]


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(5, 20), d1=st.integers(1, 8), d2=st.integers(1, 8))
def test_feature_space_equals_gram_form(seed, n, d1, d2):
    X, Y = _pair(seed, n, d1, d2)
    assert K.linear_cka(X, Y) == pytest.approx(K.linear_cka_gram(X, Y), abs=1e-10)


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(5, 20), d=st.integers(2, 8), c=st.floats(1e-2, 1e2))
def test_invariant_to_rotation_and_isotropic_scaling(seed, n, d, c):
    X, Y = _pair(seed, n, d, d)
    Q = _orthogonal(seed + 1, d)
    ref = K.linear_cka(X, Y)
    assert K.linear_cka(c * X @ Q, Y) == pytest.approx(ref, abs=1e-10)
    assert K.debiased_cka(c * X @ Q, Y) == pytest.approx(K.debiased_cka(X, Y), abs=1e-9)


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(5, 20), d=st.integers(1, 8))
def test_self_similarity_one_and_symmetry(seed, n, d):
    X, Y = _pair(seed, n, d, d + 1)
    assert K.linear_cka(X, X) == pytest.approx(1.0, abs=1e-12)
    assert K.debiased_cka(X, X) == pytest.approx(1.0, abs=1e-12)
    assert K.linear_cka(X, Y) == pytest.approx(K.linear_cka(Y, X), abs=1e-12)
    assert 0.0 <= K.linear_cka(X, Y) <= 1.0 + 1e-12
    perm = np.random.default_rng(seed).permutation(n)
    assert K.linear_cka(X[perm], Y[perm]) == pytest.approx(K.linear_cka(X, Y), abs=1e-10)


def test_cka_matrix_matches_pairwise_and_products():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(4, 30, 5)).cumsum(0) + 2.0
    C = K.cka_matrix(H, block=7)
    want = np.array([[K.linear_cka(a, b) for b in H] for a in H])
    assert np.allclose(C, want, atol=1e-12) and np.allclose(np.diag(C), 1.0)
    M, _ = pair_products(H, normalize=False)
    assert np.allclose(K.cka_from_products(M), C)
    D = K.cka_matrix(H, debiased=True, block=7)
    assert np.allclose(D, [[K.debiased_cka(a, b) for b in H] for a in H], atol=1e-10)
    # normalize=True: cosine between the entropy's Gram matrices (centred, row-normalised rows)
    Cn = K.cka_matrix(H, normalize=True)
    G = [prepare(h).numpy() @ prepare(h).numpy().T for h in H]
    assert np.allclose(Cn, [[np.sum(a * b) / np.linalg.norm(a) / np.linalg.norm(b) for b in G] for a in G])
    assert np.allclose(Cn, K.cka_from_products(pair_products(H)[0]))


def test_unbiased_hsic_is_translation_invariant_and_needs_four_tokens():
    X, Y = _pair(1, 12, 3, 4)
    a = K.hsic_unbiased(X @ X.T, Y @ Y.T)
    b = K.hsic_unbiased((X + 7) @ (X + 7).T, Y @ Y.T)
    assert a == pytest.approx(b, rel=1e-9)
    with pytest.raises(ValueError, match="n >= 4"):
        K.hsic_unbiased(np.eye(3), np.eye(3))


def test_minibatch_single_batch_equals_debiased_full():
    H = np.random.default_rng(2).normal(size=(3, 40, 6)).cumsum(0)
    mb = K.MinibatchCKA(3)
    mb.update(H)
    assert np.allclose(mb.result(), K.cka_matrix(H, debiased=True), atol=1e-12)


def test_minibatch_is_unbiased_where_averaged_plain_cka_is_not():
    rng = np.random.default_rng(3)
    n, d = 4096, 48
    X = rng.normal(size=(n, d))
    Y = rng.normal(size=(n, d))  # independent: population CKA is 0
    Z = X @ rng.normal(size=(d, d)) * 0.5 + rng.normal(size=(n, d))  # dependent on X
    H = np.stack([X, Y, Z])
    mb = K.MinibatchCKA(3)
    plain = []
    for s in range(0, n, 64):
        mb.update(H[:, s : s + 64])
        plain.append(K.linear_cka(X[s : s + 64], Y[s : s + 64]))
    got = mb.result()
    full = K.cka_matrix(H, debiased=True)
    assert abs(got[0, 1]) < 0.03  # unbiased: near the true 0
    assert np.mean(plain) > 0.3  # averaging biased per-batch CKA is badly inflated
    assert got[0, 2] == pytest.approx(full[0, 2], abs=0.03)  # and converges to the full-data estimate


# ----------------------------------------------------------------- compartments
def _planted(sizes, within=0.85, between=0.25, noise=0.03, seed=0):
    rng = np.random.default_rng(seed)
    lab = np.repeat(np.arange(len(sizes)), sizes)
    C = np.where(lab[:, None] == lab[None, :], within, between) + noise * rng.normal(size=(len(lab),) * 2)
    C = (C + C.T) / 2
    np.fill_diagonal(C, 1.0)
    bounds, s = [], 0
    for z in sizes:
        bounds.append((s, s + z - 1))
        s += z
    return C, bounds


@pytest.mark.parametrize("sizes", [(2, 10, 11, 7, 1), (5, 5), (3, 8, 4)])
def test_compartments_recover_planted_blocks(sizes):
    C, bounds = _planted(sizes)
    assert K.segment_compartments(C, len(sizes)) == bounds
    assert K.segment_compartments(C) == bounds  # the automatic k is the planted count
    if sizes[-1] > 1:  # the chord elbow finds big blocks but tends to merge a final singleton
        assert K.segment_compartments(C, rule="elbow") == bounds


def test_no_structure_gives_one_compartment():
    C = np.full((10, 10), 0.6)
    np.fill_diagonal(C, 1.0)
    assert K.segment_compartments(C) == [(0, 9)]


def test_compartments_on_a_real_cka_matrix():
    rng = np.random.default_rng(4)
    base = [rng.normal(size=(200, 12)) for _ in range(3)]
    H = np.stack([base[l // 3] + 0.4 * rng.normal(size=(200, 12)) for l in range(9)])
    ids = [3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert K.segment_compartments(K.cka_matrix(H), ids=ids) == [(3, 5), (6, 8), (9, 11)]


def test_dynamic_programme_is_optimal_against_brute_force():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(7, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    C = (X @ X.T) ** 2  # a PSD similarity with unit diagonal
    cost = K._block_costs(C)
    for k in range(1, 8):
        best = min(
            sum(cost[s, e] for s, e in zip((0, *cuts), (*(c - 1 for c in cuts), 6)))
            for cuts in itertools.combinations(range(1, 7), k - 1)
        )
        assert K.compartment_costs(C)[k - 1] == pytest.approx(best)


def test_compartment_edge_cases_and_errors():
    C, _ = _planted((3, 3))
    assert K.segment_compartments(C, 1) == [(0, 5)]
    assert K.segment_compartments(C, 6) == [(i, i) for i in range(6)]
    assert K.segment_compartments(C, penalty=0.0) == [(i, i) for i in range(6)]  # no cost per block
    assert len(K.segment_compartments(C, penalty=1e3)) == 1
    with pytest.raises(ValueError, match="1 <= k <= 6"):
        K.segment_compartments(C, 7)
    with pytest.raises(ValueError, match="square"):
        K.segment_compartments(np.ones((2, 3)))
    with pytest.raises(ValueError, match="rule="):
        K.segment_compartments(C, rule="bic")
    with pytest.raises(ValueError, match="ids has"):
        K.segment_compartments(C, 2, ids=[1, 2])
