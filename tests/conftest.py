"""Shared fixtures: tiny random models (no network, no weights on disk)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def tiny_llama():
    """A 4-block random Llama (hidden 32, vocab 128), eval mode, fp32, seeded."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg).eval()
    return model
