"""The layer-index convention and its conversions (DESIGN section 4)."""

import pytest

from activation_wave.core.layers import check_layers, eagle3_default_layers, from_convention, to_convention


@pytest.mark.parametrize("n, expected", [(30, [2, 15, 27]), (32, [2, 16, 29]), (18, [2, 9, 15]), (7, [2, 3, 4])])
def test_eagle3_default_is_hidden_states_indices(n, expected):
    assert eagle3_default_layers(n) == expected


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 6])
def test_eagle3_default_undefined_for_small_models(n):
    with pytest.raises(ValueError, match="undefined for N="):
        eagle3_default_layers(n)


def test_specforge_and_sglang_use_output_of_block_ids():
    # Llama-3.1-8B: vLLM (2, 16, 29) is SpecForge's [1, 15, 28] ("output of layer i").
    assert to_convention([2, 16, 29], "specforge") == [1, 15, 28]
    assert to_convention([2, 16, 29], "sglang") == [1, 15, 28]
    assert to_convention([2, 16, 29], "vllm") == [2, 16, 29]


@pytest.mark.parametrize("conv", ["hidden_states", "vllm", "specforge", "sglang"])
def test_round_trip(conv):
    ids = [1, 7, 13, 30]
    assert from_convention(to_convention(ids, conv), conv) == ids


def test_embedding_output_has_no_block_name():
    with pytest.raises(ValueError, match="embedding output"):
        to_convention([0, 5], "specforge")


def test_unknown_convention():
    with pytest.raises(ValueError, match="unknown convention"):
        to_convention([1], "tgi")


def test_check_layers_messages():
    assert check_layers([27, 2, 15], 30) == [2, 15, 27]
    with pytest.raises(ValueError, match=r"out of range.*0\.\.30"):
        check_layers([2, 31], 30)
    with pytest.raises(ValueError, match="duplicates"):
        check_layers([2, 2], 30)
    with pytest.raises(ValueError, match="empty"):
        check_layers([], 30)
