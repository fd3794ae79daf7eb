"""Matrix entropy: invariances, bounds, known values, and the alpha = 2 closed form."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from activation_wave.measure import entropy as E

PROPS = settings(max_examples=15, deadline=None)


def _data(seed: int, n: int, d: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)) * np.linspace(0.2, 3.0, d)


def _orthogonal(seed: int, d: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q * np.sign(np.diag(r))


ALPHAS = [0.5, 1.0, 2.0, math.inf]


# ------------------------------------------------------------------ invariances
@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(3, 14), d=st.integers(2, 9), alpha=st.sampled_from(ALPHAS))
def test_invariant_to_orthogonal_rotation_of_features(seed, n, d, alpha):
    Z = _data(seed, n, d)
    Q = _orthogonal(seed + 1, d)
    assert E.matrix_entropy(Z @ Q, alpha) == pytest.approx(E.matrix_entropy(Z, alpha), abs=1e-9)


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(3, 14), d=st.integers(2, 9), c=st.floats(1e-3, 1e3))
def test_invariant_to_isotropic_scaling(seed, n, d, c):
    Z = _data(seed, n, d)
    for normalize in (True, False):
        assert E.matrix_entropy(c * Z, normalize=normalize) == pytest.approx(
            E.matrix_entropy(Z, normalize=normalize), abs=1e-9
        )


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(3, 14), d=st.integers(2, 9))
def test_invariant_to_token_permutation(seed, n, d):
    Z = _data(seed, n, d)
    perm = np.random.default_rng(seed + 2).permutation(n)
    for center in (True, "median"):
        assert E.matrix_entropy(Z[perm], center=center) == pytest.approx(E.matrix_entropy(Z, center=center), abs=1e-9)
    Zb = _data(seed + 3, n, d)
    assert E.concat_entropy([Z[perm], Zb[perm]]) == pytest.approx(E.concat_entropy([Z, Zb]), abs=1e-9)


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(3, 14), d=st.integers(2, 9), alpha=st.sampled_from(ALPHAS))
def test_bounds_zero_to_log_rank(seed, n, d, alpha):
    Z = _data(seed, n, d)
    Z[:, -1] = Z[:, 0]  # make the rank smaller than min(n, d) in some draws
    rank = np.linalg.matrix_rank(E.prepare(Z).numpy(), tol=1e-10)
    S = E.matrix_entropy(Z, alpha)
    assert -1e-12 <= S <= math.log(rank) + 1e-9


@PROPS
@given(seed=st.integers(0, 10_000), n=st.integers(3, 12), d=st.integers(2, 8))
def test_renyi_order_is_monotone(seed, n, d):
    Z = _data(seed, n, d)
    vals = [E.matrix_entropy(Z, a) for a in (0.0, 0.5, 1.0, 2.0, 5.0, math.inf)]
    assert all(a >= b - 1e-9 for a, b in zip(vals, vals[1:]))


# ----------------------------------------------------------------- known values
@pytest.mark.parametrize("n,d", [(4, 4), (5, 9)])
def test_orthonormal_rows_give_log_n(n, d):
    Z = _orthogonal(0, d)[:n] * 3.0  # orthogonal rows, equal norms
    assert E.matrix_entropy(Z, center=False) == pytest.approx(math.log(n), abs=1e-12)
    # centring removes the mean direction: the n centred rows span n - 1 dimensions equally
    assert E.matrix_entropy(Z, center=True) == pytest.approx(math.log(n - 1), abs=1e-12)
    for alpha in ALPHAS:
        assert E.matrix_entropy(Z, alpha, center=False) == pytest.approx(math.log(n), abs=1e-12)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_rank_one_gives_zero(alpha):
    rng = np.random.default_rng(0)
    Z = np.outer(rng.normal(size=20), rng.normal(size=6))
    assert E.matrix_entropy(Z, alpha) == pytest.approx(0.0, abs=1e-10)
    assert E.matrix_entropy(Z, alpha, center=False) == pytest.approx(0.0, abs=1e-10)


def test_zero_layer_and_zero_rows():
    assert E.matrix_entropy(np.ones((5, 3))) == 0.0  # all tokens equal: nothing after centring
    P = E.prepare(np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 0.0], [-1.0, 4.0]]), center=False)
    assert torch.isfinite(P).all()
    Z = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    assert E.prepare(Z, center=False)[0].abs().sum() == 0  # a zero row stays zero, no NaN
    assert E.matrix_entropy(Z, center=False) == pytest.approx(math.log(2), abs=1e-12)


@pytest.mark.parametrize("n,d", [(8, 30), (30, 8), (12, 12)])
def test_gram_and_covariance_forms_agree(n, d):
    Z = _data(1, n, d)
    for alpha in ALPHAS:
        g = E.matrix_entropy(Z, alpha, via="gram")
        c = E.matrix_entropy(Z, alpha, via="cov")
        assert g == pytest.approx(c, abs=1e-10)
    assert np.allclose(np.sort(E.spectrum(Z, via="gram"))[-min(n, d):], np.sort(E.spectrum(Z, via="cov"))[-min(n, d):])


def test_alpha_continuity_at_one():
    Z = _data(2, 40, 10)
    s1 = E.matrix_entropy(Z, 1.0)
    for eps in (1e-3, 1e-5, 1e-7, 1e-9, 1e-12):
        for a in (1 - eps, 1 + eps):
            assert abs(E.matrix_entropy(Z, a) - s1) <= 2 * eps * 10 + 1e-12
    # the two branches (ratio and expansion) meet smoothly around the switch at 1e-4
    for sw in (1e-4, -1e-4):
        just_in, just_out = E.matrix_entropy(Z, 1 + 0.999 * sw), E.matrix_entropy(Z, 1 + 1.001 * sw)
        slope = (E.matrix_entropy(Z, 1 + 2 * sw) - E.matrix_entropy(Z, 1 + sw)) / sw
        assert abs(just_in - just_out - slope * (-0.002 * sw)) < 1e-10


def test_renyi_entropy_of_vectors():
    assert E.renyi_entropy([0.25] * 4, 0.7) == pytest.approx(math.log(4))
    assert E.renyi_entropy([1.0, 0.0], 2.0) == pytest.approx(0.0)
    assert E.renyi_entropy([0.5, 0.25, 0.25], math.inf) == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="alpha"):
        E.renyi_entropy([0.5, 0.5], -1.0)


def test_normalized():
    assert E.normalized(2.0, n=math.e**2, d=100, how="log_n") == pytest.approx(1.0)
    assert E.normalized(math.log(4), n=100, d=4, how="min") == pytest.approx(1.0)
    assert np.allclose(E.normalized(np.array([1.0, 2.0]), 10, 10, "raw"), [1.0, 2.0])
    with pytest.raises(ValueError, match="choose one of"):
        E.normalized(1.0, 4, 4, "log")
    with pytest.raises(ValueError, match="n, d >= 2"):
        E.normalized(1.0, 1, 4, "log_n")


def test_accepts_torch_and_low_precision():
    Z = _data(3, 20, 6)
    ref = E.matrix_entropy(Z)
    assert E.matrix_entropy(torch.tensor(Z, dtype=torch.float32)) == pytest.approx(ref, abs=1e-5)
    assert E.layer_entropies(np.stack([Z, Z]).astype(np.float16)) == pytest.approx([ref, ref], abs=1e-2)


def test_concat_entropy_is_entropy_of_summed_grams():
    rng = np.random.default_rng(4)
    A, B = rng.normal(size=(15, 4)), rng.normal(size=(15, 7))
    Pa, Pb = E.prepare(A), E.prepare(B)
    lam = torch.linalg.eigvalsh(Pa @ Pa.T + Pb @ Pb.T).clamp_min(0)
    assert E.concat_entropy([A, B]) == pytest.approx(E.renyi_entropy(lam), abs=1e-10)
    assert E.concat_entropy([A, A]) == pytest.approx(E.matrix_entropy(A), abs=1e-10)


# ---------------------------------------------------------------- closed form
def test_closed_form_renyi2_equals_eigen_on_random_subsets():
    rng = np.random.default_rng(5)
    H = rng.normal(size=(7, 25, 6)).cumsum(0)  # correlated layers
    H[3, 0] += 40.0  # an outlier token, to exercise row normalisation
    M, t = E.pair_products(H)
    for _ in range(15):
        k = int(rng.integers(1, 6))
        s = sorted(rng.choice(7, size=k, replace=False))
        assert E.renyi2_subset(M, t, s) == pytest.approx(E.concat_entropy([H[i] for i in s], 2.0), abs=1e-10)
    assert np.allclose(E.renyi2_from_products(M, t), E.layer_entropies(H, 2.0), atol=1e-10)
    assert np.allclose(E.pairwise_renyi2(M, t), E.pairwise_concat_entropy(H, 2.000000001), atol=1e-6)


def test_zero_trace_layer_has_entropy_zero_in_both_forms_without_a_nan():
    """Issue 28 item 15: a layer whose tokens all share one hidden state (the embedding
    layer of a tiny random model that repeats one token) has trace 0 after centring. The
    closed form returns 0 nats for it, as the eigen route does, and never computes 0 / 0."""
    import warnings

    rng = np.random.default_rng(7)
    H = rng.normal(size=(3, 20, 6))
    H[0] = [0.5, 1.25, -2.0, 3.0, 0.0, 1.0]  # layer 0: one vector for every token (exact in binary)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (invalid value in divide) fails the test
        M, t = E.pair_products(H)
        assert t[0] == 0.0 and M[0].sum() == 0.0
        assert E.renyi2_subset(M, t, [0]) == 0.0 == E.matrix_entropy(H[0], 2.0)
        pairs = E.renyi2_of_sets(M, t, [[0, 1], [1, 2]])
        assert pairs[0] == pytest.approx(E.concat_entropy([H[0], H[1]], 2.0), abs=1e-10)  # the zero block adds nothing
        assert pairs[1] == pytest.approx(E.concat_entropy([H[1], H[2]], 2.0), abs=1e-10)
        assert np.isfinite(E.pairwise_renyi2(M, t)).all()


@pytest.mark.parametrize("center,normalize", [(True, True), (True, False), (False, True), ("median", True)])
def test_pair_products_definition_and_tiling(center, normalize):
    H = np.random.default_rng(6).normal(size=(3, 37, 5))
    M, t = E.pair_products(H, center, normalize, block=8)  # several tiles, a ragged last one
    P = [E.prepare(h, center, normalize).numpy() for h in H]
    ref = np.array([[np.linalg.norm(a.T @ b) ** 2 for b in P] for a in P])
    assert np.allclose(M, ref, rtol=1e-12)
    assert np.allclose(t, [np.sum(p**2) for p in P]) and np.allclose(t, E.trace_vector(H, center, normalize))


def test_pair_accumulator_matches_in_memory():
    H = np.random.default_rng(7).normal(size=(4, 50, 6)) + 3.0
    chunks = [H[:, s : s + 13] for s in range(0, 50, 13)]
    # two passes for the entropy's preparation (centre first, then normalise rows)
    acc = E.PairAccumulator(4, 6, mean=E.layer_means(chunks))
    for c in chunks:
        acc.add(c)
    for got, want in zip(acc.result(), E.pair_products(H)):
        assert np.allclose(got, want, rtol=1e-10)
    # one pass with the uncentred-sum correction when rows are not normalised
    acc = E.PairAccumulator(4, 6, normalize=False)
    for c in chunks:
        acc.add(c)
    for got, want in zip(acc.result(), E.pair_products(H, normalize=False)):
        assert np.allclose(got, want, rtol=1e-9)
    with pytest.raises(ValueError, match="layer_means"):
        E.PairAccumulator(4, 6)


def test_all_subsets_scores_and_speed():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(30, 40))
    M = (X @ X.T) ** 2  # any symmetric nonnegative "products"
    t = np.sqrt(np.diag(M)) * 1.5
    t0 = time.perf_counter()
    sets, scores = E.renyi2_all_subsets(M, t, 3)
    elapsed = time.perf_counter() - t0
    assert sets.shape == (4060, 3) and len({tuple(s) for s in sets}) == 4060
    assert elapsed < 1.0, f"scoring all triples took {elapsed:.2f} s"
    for i in rng.choice(4060, 20, replace=False):
        assert scores[i] == pytest.approx(E.renyi2_subset(M, t, sets[i]), abs=1e-12)
    sets, _ = E.renyi2_all_subsets(M, t, 2, pool=[3, 5, 9])
    assert sets.tolist() == [[3, 5], [3, 9], [5, 9]]
    with pytest.raises(ValueError, match="1 <= k"):
        E.subsets(5, 6)


# ----------------------------------------------------------- bands over prompts
def _prompts(seed=9, P=8, per=12, L=3, d=5):
    H = np.random.default_rng(seed).normal(size=(L, P * per, d))
    groups = np.repeat(np.arange(P), per)
    return H, groups


def test_prompt_entropy_is_mean_of_per_prompt_entropies():
    H, g = _prompts()
    g[-1] = 99  # a one-token prompt is skipped
    band = E.prompt_entropy(H, g, n_boot=40, seed=1)
    want = [np.mean([E.matrix_entropy(H[l, g == p]) for p in range(8)]) for l in range(3)]
    assert np.allclose(band.mean, want)
    assert band.n_prompts == 8 and band.per_prompt.shape == (8, 3)
    assert np.all(band.lo <= band.mean) and np.all(band.mean <= band.hi)
    again = E.prompt_entropy(H, g, n_boot=40, seed=1)
    assert np.array_equal(band.lo, again.lo)  # seeded
    with pytest.raises(ValueError, match="one prompt id per token"):
        E.prompt_entropy(H, g[:-1])


def test_dataset_entropy_pools_tokens():
    H, g = _prompts()
    band = E.dataset_entropy(H, g, n_boot=15, seed=0)
    assert np.allclose(band.mean, E.layer_entropies(H))
    assert np.all(band.lo <= band.mean + 1e-12) and np.all(band.mean <= band.hi + 1e-12)
    means = E.dataset_entropy(H, g, over="means", n_boot=0)
    pm = np.stack([H[:, g == p].mean(1) for p in range(8)], axis=1)
    assert np.allclose(means.mean, E.layer_entropies(pm))
    assert set(band.to_dict()) >= {"mean", "lo", "hi", "kind"}
