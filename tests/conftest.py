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


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A character-level tokenizer over ASCII (ids 0..127; 0 = pad, 1 = eos)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {chr(i): i for i in range(32, 127)}
    vocab.update({"<pad>": 0, "</s>": 1, "<unk>": 2})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


@pytest.fixture()
def tiny_target(tiny_llama, tiny_tokenizer, tmp_path, monkeypatch):
    """A Target around the tiny model, with caches in a temporary folder."""
    from activation_wave.models.targets import Target

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    tiny_llama.generation_config.eos_token_id = 1
    return Target(name="tiny-llama", model=tiny_llama, tokenizer=tiny_tokenizer,
                  provenance={"source": "test", "name": "tiny-llama", "seed": 0})


@pytest.fixture(scope="module")
def tiny_llama8():
    """An 8-block random Llama (hidden 32): EAGLE-3 default [2, 4, 5]."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=8,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture()
def cap8(tiny_llama8, tiny_tokenizer, tmp_path, monkeypatch):
    """A capture of the 8-block tiny Llama (responses to eight prompts), caches in tmp_path."""
    from helpers import captured

    from activation_wave.models.targets import Target

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    tiny_llama8.generation_config.eos_token_id = 1
    target = Target(name="tiny-llama8", model=tiny_llama8, tokenizer=tiny_tokenizer,
                    provenance={"source": "test", "name": "tiny-llama8", "seed": 1})
    return captured(target, tmp_path, "tiny-llama8")
