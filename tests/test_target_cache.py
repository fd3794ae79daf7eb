"""The dequantized-model cache is read back one tensor at a time (models.targets)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file, save_model
from transformers import AutoModelForCausalLM

from activation_wave.models.targets import _fill_from_safetensors


def _fresh(tiny_llama):
    torch.manual_seed(1)  # other weights than the saved model's
    return AutoModelForCausalLM.from_config(tiny_llama.config).eval()


def test_fill_restores_every_tensor_and_keeps_the_tie(tiny_llama, tmp_path):
    save_model(tiny_llama, str(tmp_path / "model.safetensors"))  # tied weights stored once
    model = _fresh(tiny_llama)
    _fill_from_safetensors(model, tmp_path / "model.safetensors")
    for (k, a), (_, b) in zip(tiny_llama.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), k
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_fill_rejects_a_missing_tensor_or_a_wrong_shape(tiny_llama, tmp_path):
    state = {k: v.clone() for k, v in tiny_llama.state_dict().items() if k != "lm_head.weight"}
    save_file({k: v for k, v in state.items() if "layers.0.mlp" not in k}, str(tmp_path / "a.safetensors"))
    with pytest.raises(ValueError, match="missing.*layers.0.mlp"):
        _fill_from_safetensors(_fresh(tiny_llama), tmp_path / "a.safetensors")
    state["model.norm.weight"] = torch.ones(7)
    save_file(state, str(tmp_path / "b.safetensors"))
    with pytest.raises(ValueError, match="model.norm.weight has shape"):
        _fill_from_safetensors(_fresh(tiny_llama), tmp_path / "b.safetensors")
