"""The embedded model end to end (marked ``integration``: a minute or two on 2 cores)."""

import json

import pytest
import torch

from activation_wave.cli import main
from activation_wave.models.targets import load_target

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smol():
    return load_target("smollm2-135m")


def test_embedded_model_shape_and_convention(smol):
    assert (smol.n_layers, smol.hidden_size, smol.vocab_size) == (30, 576, 49152)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        out = smol.model(ids, output_hidden_states=True)
    assert len(out.hidden_states) == smol.n_layers + 1
    # index 0 is the embedding output; index N has the final norm applied
    torch.testing.assert_close(out.hidden_states[0], smol.model.model.embed_tokens(ids))
    # the LM head reads hidden_states[N] directly, so the final norm is already in it
    assert torch.allclose(out.logits, smol.model.lm_head(out.hidden_states[-1]), atol=1e-4)


def test_dequantized_cache_reload_is_identical(smol):
    again = load_target("smollm2-135m")  # from the safetensors cache
    assert again.fingerprint == smol.fingerprint
    for (k, a), (_, b) in zip(smol.model.state_dict().items(), again.model.state_dict().items()):
        assert torch.equal(a, b), k


def test_capture_cli_then_cache_hit(capsys, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": p}) for p in ["Name three rivers.", "What is 7 times 8?"]))
    args = ["capture", "--model", "smollm2-135m", "--profile", "smoke", "--set", f"data.sources={prompts}",
            "--set", "data.max_new_tokens=8"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "2 records" in first and "layers 0..30" in first
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[1] == first.splitlines()[1]  # same cache folder
