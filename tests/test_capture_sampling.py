"""``CaptureCache.sample_tokens(mask=...)``: response positions (default) or every position."""

import numpy as np
import pytest

from activation_wave.models.capture import capture
from activation_wave.core.config import CaptureConfig, DataConfig
from activation_wave.models.prompts import Prompt, generate_responses

PROMPTS = [Prompt(id=f"s{i}", text=f"Count to {i}." * (1 + i % 2), category="c", split="train") for i in range(5)]


@pytest.fixture()
def cache(tiny_target, tmp_path):
    rs, _ = generate_responses(tiny_target, PROMPTS, DataConfig(max_new_tokens=8, batch_size=5), progress=False)
    return capture(tiny_target, rs, CaptureConfig(batch_size=5, records_per_shard=2, topk=4),
                   out_dir=tmp_path / "cap", progress=False), rs


def test_mask_all_samples_every_position(cache):
    c, rs = cache
    n_all = sum(r["length"] for r in c.records)
    n_resp = sum(len(r.response_ids) for r in rs)
    every = c.sample_tokens(10**6, layers=[0], mask="all")
    assert len(every.record) == n_all
    assert int((every.position == 0).sum()) == len(rs)  # every sequence's first token is in
    # the default is unchanged: response positions only, none of them at position 0
    resp = c.sample_tokens(10**6, layers=[0])
    assert len(resp.record) == n_resp and (resp.position > 0).all()
    assert np.array_equal(resp.hidden, c.sample_tokens(10**6, layers=[0], mask="loss").hidden)
    # min_position counts from the sequence start with mask="all"
    late = c.sample_tokens(10**6, layers=[0], mask="all", min_position=1)
    assert len(late.record) == n_all - len(rs) and (late.position >= 1).all()
    # seeded and of the requested size
    a = c.sample_tokens(20, seed=3, layers=[1, 2], mask="all")
    b = c.sample_tokens(20, seed=3, layers=[1, 2], mask="all")
    assert a.hidden.shape == (2, 20, 32) and np.array_equal(a.hidden, b.hidden)


def test_unknown_mask_is_a_clear_error(cache):
    c, _ = cache
    with pytest.raises(ValueError, match="mask='prompt'"):
        c.sample_tokens(4, mask="prompt")
