"""Streaming statistics equal the in-memory ones on the same tokens."""

import numpy as np
import pytest

from activation_wave.models.capture import capture
from activation_wave.measure.cka import MinibatchCKA
from activation_wave.core.config import CaptureConfig, DataConfig
from activation_wave.models.prompts import Prompt, generate_responses
from activation_wave.measure.entropy import layer_entropies
from activation_wave.measure.streaming import CovarianceEntropy, stream_chunks, streaming_stats


def test_covariance_entropy_equals_layer_entropy():
    H = np.random.default_rng(0).normal(size=(3, 200, 8)) * np.array([1, 5, 0.1])[:, None, None]
    acc = CovarianceEntropy(H.mean(1))
    for s in range(0, 200, 64):
        acc.add(H[:, s:s + 64])
    np.testing.assert_allclose(acc.result(1.0), layer_entropies(H, 1.0), rtol=1e-5)
    np.testing.assert_allclose(acc.result(2.0), layer_entropies(H, 2.0), rtol=1e-5)


@pytest.fixture()
def small_cache(tiny_target, tmp_path):
    prompts = [Prompt(id=f"q{i}", text=f"Tell me about {i}." * 2) for i in range(6)]
    rs, _ = generate_responses(tiny_target, prompts, DataConfig(max_new_tokens=20, batch_size=3), progress=False)
    return capture(tiny_target, rs, CaptureConfig(batch_size=3, records_per_shard=2, topk=2), out_dir=tmp_path / "c", progress=False)


def test_stream_chunks_cycle_and_count(small_cache):
    n_resp = small_cache.manifest["n_loss_tokens"]
    chunks = list(stream_chunks(small_cache, [0, 2], 3 * n_resp + 5, chunk=16))
    assert sum(c.shape[1] for c in chunks) == 3 * n_resp + 5
    assert all(c.shape[0] == 2 and c.shape[2] == 32 for c in chunks)
    first = np.concatenate(chunks, axis=1)
    np.testing.assert_array_equal(first[:, :n_resp], first[:, n_resp:2 * n_resp])  # second cycle repeats


def test_streaming_stats_match_in_memory(small_cache):
    n = small_cache.manifest["n_loss_tokens"]
    out = streaming_stats(small_cache, n, [1, 3], chunk=n, cka_batch=n)
    H = next(stream_chunks(small_cache, [1, 3], n, chunk=n))
    np.testing.assert_allclose(out["entropy"], layer_entropies(H, 1.0), rtol=1e-5)
    mb = MinibatchCKA(2)
    mb.update(H)
    np.testing.assert_allclose(out["cka"], mb.result(), rtol=1e-6)
