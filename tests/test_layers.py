"""The layer-index convention and its conversions (DESIGN section 4)."""

import pytest

from activation_wave.core.layers import (
    LayerIds,
    check_layers,
    eagle3_default_layers,
    from_convention,
    layer_ids,
    parse_layer_ids,
    to_convention,
)


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
    assert list(check_layers([27, 2, 15], 30)) == [2, 15, 27]
    with pytest.raises(ValueError, match=r"out of range.*0\.\.30"):
        check_layers([2, 31], 30)
    with pytest.raises(ValueError, match="duplicates"):
        check_layers([2, 2], 30)
    with pytest.raises(ValueError, match="empty"):
        check_layers([], 30)


def test_layer_ids_are_one_sorted_frozen_validated_value():
    """Issue 28 item 12: made once where ids enter, trusted (returned as is) after that."""
    import pickle

    ids = check_layers([27, 2, 15], 30, what="--layers")
    assert isinstance(ids, LayerIds) and ids == (2, 15, 27) and ids.n_layers == 30
    assert layer_ids(ids, 30) is ids  # trusted: no second check
    assert layer_ids([15, 2], 30) == (2, 15)  # a plain list is checked where it enters
    with pytest.raises(ValueError, match="N=20"):
        layer_ids(ids, 20)  # another model: checked again, and refused
    with pytest.raises(TypeError):
        ids[0] = 3  # type: ignore[index]
    again = pickle.loads(pickle.dumps(ids))  # process pools
    assert again == ids and again.n_layers == 30
    with pytest.raises(ValueError, match="whole numbers"):
        check_layers([2, 15.5], 30)
    with pytest.raises(ValueError, match="whole numbers"):
        check_layers([True, 2], 30)


@pytest.mark.parametrize("text", ["2,,15", "2,1_5,27", "2,15,", "", "2.0,3", "-1,2", "a,b", "2, ٣"])
def test_typed_layer_ids_are_parsed_strictly(text):
    with pytest.raises(ValueError, match="expected comma-separated layer indices"):
        parse_layer_ids(text)


def test_typed_layer_ids():
    assert parse_layer_ids(" 27, 2,15 ") == (27, 2, 15)  # sorted and range-checked by check_layers
