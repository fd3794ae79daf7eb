"""Token filters, and the attention-sink artefact they exist to expose."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from activation_wave.measure import entropy as E
from activation_wave.measure import filtering as F


def test_entropy_mask_threshold_and_quantile():
    e = np.array([0.0, 0.5, 1.0, 2.0, np.nan, 3.0])
    assert F.token_entropy_mask(e, threshold=1.0).tolist() == [False, False, True, True, False, True]
    assert F.token_entropy_mask(e, quantile=0.0).tolist() == [True, True, True, True, False, True]
    assert F.token_entropy_mask(e, quantile=1.0).tolist() == [False, False, False, False, False, True]
    half = F.token_entropy_mask(np.arange(100.0), quantile=0.5)
    assert half.sum() == 50 and half[-1] and not half[0]
    assert F.token_entropy_mask(torch.tensor([0.1, 0.9]), threshold=0.5).tolist() == [False, True]


@pytest.mark.parametrize("kw,match", [({}, "exactly one"), ({"threshold": 1, "quantile": 0.5}, "exactly one"),
                                      ({"quantile": 1.5}, r"\[0, 1\]")])
def test_entropy_mask_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        F.token_entropy_mask(np.ones(4), **kw)


def test_sink_mask_first_positions_and_massive_norms():
    pos = np.array([0, 1, 2, 3, 0, 1, 2])
    assert F.sink_mask(pos).all()
    assert F.sink_mask(pos, drop_first=2).tolist() == [False, False, True, True, False, False, True]
    norms = np.ones((3, 7))
    norms[1, 2] = 500.0  # one massive token in one middle layer
    keep = F.sink_mask(pos, norms, massive_factor=20)
    assert keep.tolist() == [True, True, False, True, True, True, True]
    assert F.sink_mask(pos, norms, drop_first=1, massive_factor=20).sum() == 4
    with pytest.raises(ValueError, match="token_norms"):
        F.sink_mask(pos, massive_factor=20)
    with pytest.raises(ValueError, match="must exceed 1"):
        F.sink_mask(pos, norms, massive_factor=0.5)
    with pytest.raises(ValueError, match="covers 3 tokens"):
        F.sink_mask(pos, np.ones((2, 3)), massive_factor=5)


def test_token_norms_and_apply_mask():
    H = np.random.default_rng(0).normal(size=(2, 5, 3))
    assert np.allclose(F.token_norms(H), np.linalg.norm(H, axis=-1))
    assert np.allclose(F.token_norms(torch.tensor(H)), F.token_norms(list(H)))
    m = np.array([True, False, True, True, False])
    Hk, g, none = F.apply_mask(H, m, np.arange(5), None)
    assert Hk.shape == (2, 3, 3) and g.tolist() == [0, 2, 3] and none is None
    Ht, gt = F.apply_mask(torch.tensor(H), m, torch.arange(5))
    assert Ht.shape == (2, 3, 3) and gt.tolist() == [0, 2, 3]
    with pytest.raises(ValueError, match="keeps no token"):
        F.apply_mask(H, np.zeros(5, bool))
    with pytest.raises(ValueError, match="mask has 4"):
        F.apply_mask(H, np.ones(4, bool))


def test_one_sink_token_collapses_mean_centred_entropy():
    """A single massive-norm token drags the mean; row normalisation then maps every
    token near one direction, and the entropy collapses. Dropping the first position,
    the massive-norm filter, or median centring each recover the clean value."""
    rng = np.random.default_rng(1)
    P, per, d = 16, 32, 24
    H = rng.normal(size=(1, P * per, d))
    pos = np.tile(np.arange(per), P)
    clean = E.matrix_entropy(H[0, pos > 0])
    Hs = H.copy()
    Hs[0, pos == 0, 0] += 2000.0  # the first token of every prompt: an attention sink
    assert E.matrix_entropy(Hs[0]) < 0.5 * clean  # the cliff
    assert E.matrix_entropy(Hs[0, F.sink_mask(pos, drop_first=1)]) == pytest.approx(clean)
    keep = F.sink_mask(pos, F.token_norms(Hs), massive_factor=20)
    assert keep.sum() == P * (per - 1) and E.matrix_entropy(Hs[0, keep]) == pytest.approx(clean)
    # median centring leaves the sinks in but is not dragged by them: close to clean
    assert E.matrix_entropy(Hs[0], center="median") > 0.9 * clean
