"""vLLM as an optional engine: the export's names and keys (always), and the exported drafter
loaded by vLLM itself, drafting on vLLM's own hidden states, against the study's drafter
(only where ``bash scripts/setup_vllm.sh`` made the environment; skipped with the reason
otherwise)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from activation_wave.engines import vllm as V
from activation_wave.models.drafter import Eagle3Drafter, load_drafter, save_drafter

#: What vLLM 0.32's ``llama_eagle3.py`` maps (read in the wheel): the names its
#: ``Eagle3LlamaForCausalLM.load_weights`` accepts from a checkpoint; ``midlayer.`` becomes
#: ``layers.0.`` and q/k/v, gate/up are stacked by ``LlamaModel.hf_to_vllm_mapper``.
VLLM_NAMES = {"fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d",
              "midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
              "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight",
              "midlayer.self_attn.v_proj.weight", "midlayer.self_attn.o_proj.weight",
              "midlayer.post_attention_layernorm.weight", "midlayer.mlp.gate_proj.weight",
              "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight"}


def tiny_target_model(vocab: int = 256):
    """A 4-block random Llama whose head size vLLM's CPU attention supports (32)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                      rope_theta=50000.0, tie_word_embeddings=True, eos_token_id=1, bos_token_id=0, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def saved_drafter(model, tmp_path: Path, layers, *, fused_norm=False, name="draft", draft_vocab=None) -> Path:
    vocab = model.config.vocab_size
    ids = list(range(0, vocab, 2)) if draft_vocab is None else list(range(draft_vocab))
    d = Eagle3Drafter.from_target(model, layers=layers, draft_ids=ids, seed=3, fused_norm=fused_norm)
    with torch.no_grad():  # a trained-looking drafter: no norm at exactly one, no zero tensor
        for n, p in d.named_parameters():
            if "norm" in n:
                p.mul_(1.0 + 0.2 * torch.rand_like(p))
    return save_drafter(d, tmp_path / name, {"layers": list(layers)})


def test_export_writes_the_names_and_keys_vllm_reads(tmp_path):
    from safetensors import safe_open

    model = tiny_target_model()
    src = saved_drafter(model, tmp_path, [0, 3], fused_norm=True)
    out = V.export_vllm(src, tmp_path / "out")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [0, 3]  # hidden_states indices, as given: no +1
    assert "eagle_aux_hidden_state_layer_ids" not in cfg["eagle_config"]  # layer 0 has no nested name ...
    assert cfg["num_aux_hidden_states"] == 2  # ... so fc's width is written, not guessed as 3
    assert cfg["fc_norm"] is True and cfg["norm_before_fc"] is False and cfg["norm_before_residual"] is False
    assert cfg["rope_parameters"]["rope_theta"] == 50000.0 == cfg["rope_theta"]
    assert cfg["draft_vocab_size"] == 128 and cfg["target_hidden_size"] == 64
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        names = set(f.keys())
        d2t = f.get_tensor("d2t")
    assert names == VLLM_NAMES | {"fc_norm.0.weight", "fc_norm.1.weight"}
    assert not any(n.startswith(("embed_tokens", "fuse_norm")) for n in names)
    assert torch.equal(torch.arange(128) + d2t, torch.arange(0, 256, 2))  # target id = draft id + d2t
    exp = cfg["activation_wave"]["export"]
    assert exp["engine"] == "vllm" and exp["renamed"] == {"fuse_norm.": "fc_norm."} and exp["dropped"] == []


def test_export_drops_d2t_when_the_draft_vocab_is_the_whole_vocab(tmp_path):
    from safetensors import safe_open

    model = tiny_target_model()
    out = V.export_vllm(saved_drafter(model, tmp_path, [1, 2, 4], draft_vocab=256), tmp_path / "out")
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == VLLM_NAMES - {"d2t", "t2d"}  # vLLM has no draft_id_to_target_id then
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["activation_wave"]["export"]["dropped"] == ["d2t", "t2d"] and cfg["fc_norm"] is False


def test_export_guards_its_folder(tmp_path):
    from activation_wave.core.files import WriteRefused

    model = tiny_target_model()
    src = saved_drafter(model, tmp_path, [1, 2, 4])
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteRefused, match="is a file"):
        V.export_vllm(src, tmp_path / "file")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(WriteRefused, match="not a vLLM export"):
        V.export_vllm(src, other)
    assert (other / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="does not exist"):
        V.export_vllm(src, tmp_path / "no" / "such")
    out = V.export_vllm(src, tmp_path / "out")
    assert V.export_vllm(src, out) == out  # an earlier export is replaced
    assert V.export_vllm(src, other, force=True) == other


def test_settings_reach_the_worker_and_are_checked():
    s = V.Settings("t", threads=2, method="eagle3", draft="d", depth=2)
    assert s.speculative_config() == {"method": "eagle3", "num_speculative_tokens": 2, "model": "d"}
    assert V.Settings("t", method="ngram", depth=3, ngram=(2, 4)).speculative_config() == {
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    syn = V.Settings("t", method="eagle3", draft="d", depth=3, synthetic=True).speculative_config()
    assert syn["rejection_sample_method"] == "synthetic" and syn["synthetic_acceptance_rates"] == [1.0, 1.0, 1.0]
    env = s.env(V.Vllm(Path("/nowhere")))
    assert env["OMP_NUM_THREADS"] == "2" and env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "PYTHONPATH" not in env
    with pytest.raises(ValueError, match="needs draft"):
        V.Settings("t", method="eagle3")

    class Fake:
        settings, log = s, "log"

        def __init__(self, rep):
            self.rep = rep

        def reported(self):
            return self.rep

    good = {"threads": 2, "speculative": {"method": "eagle3", "num_speculative_tokens": 2, "aux_layers": [1, 2, 4],
                                          "synthetic": False}}
    import unittest.mock as mock

    with mock.patch.object(Path, "read_text", return_value=json.dumps({"eagle_aux_hidden_state_layer_ids": [1, 2, 4]})):
        assert V.check_reported(Fake(good)) == good
        for bad, why in (({**good, "threads": 1}, "1 threads"),
                         ({**good, "speculative": {**good["speculative"], "num_speculative_tokens": 3}},
                          "num_speculative_tokens 3"),
                         ({**good, "speculative": {**good["speculative"], "aux_layers": [2, 3, 4]}}, "captures")):
            with pytest.raises(V.VllmError, match=why):
                V.check_reported(Fake(bad))


def test_find_vllm_names_the_setup(tmp_path):
    with pytest.raises(V.VllmError, match="setup_vllm.sh"):
        V.find_vllm(tmp_path)
    assert "setup_vllm.sh" in V.available(tmp_path)


def test_the_worker_dies_with_its_parent(tmp_path):
    """The engine's process group and PDEATHSIG: a parent killed with SIGKILL takes the worker along."""
    code = ("import subprocess, sys, time\n"
            "from activation_wave.engines.vllm import die_with_parent\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], preexec_fn=die_with_parent)\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert os.getpgid(child) == child  # its own process group: Engine.stop ends it and what it started
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the child outlived its parent")


# ------------------------------------------------------------------ in vLLM itself

needs_vllm = pytest.mark.skipif(V.available() is not None, reason=f"optional vLLM environment absent: {V.available()}")


def _study_states(model, prompt, layers):
    """The study's capture of ``layers`` for ``prompt``: hidden_states[j], j = N pre-norm."""
    from activation_wave.models.capture import final_norm

    got = {}
    h = final_norm(model).register_forward_hook(lambda m, a, o: got.__setitem__("pre", a[0]))
    with torch.no_grad():
        out = model(torch.tensor([prompt]), output_hidden_states=True)
    h.remove()
    n = model.config.num_hidden_layers
    return torch.cat([got["pre"][0] if j == n else out.hidden_states[j][0] for j in layers], -1)


@needs_vllm
@pytest.mark.slow
@pytest.mark.parametrize("layers,fused", [([1, 2, 4], False), ([0, 3], True)])
def test_vllm_loads_the_export_and_drafts_what_the_study_drafts(tmp_path, layers, fused):
    """The exported drafter in vLLM 0.32: the hidden states vLLM feeds it are the study's
    capture of the same layers (index N pre-norm), and on them vLLM's draft logits, step by
    step along its chain, equal the study's drafter's (same d2t mapping, norms, rope)."""
    from types import SimpleNamespace

    model = tiny_target_model()
    tok = SimpleNamespace(save_pretrained=lambda d: None)
    target = SimpleNamespace(model=model, tokenizer=tok)
    tdir = V.write_target_dir(target, tmp_path / "target")
    src = saved_drafter(model, tmp_path, layers, fused_norm=fused)
    out = V.export_vllm(src, tmp_path / "vllm-draft")
    prompt = [5, 17, 42, 99, 7, 63, 21, 88, 140, 3, 77, 200]
    st = V.Settings(str(tdir), threads=1, method="eagle3", draft=str(out), depth=3, kv_cache_mib=16, max_model_len=256)
    with V.Engine(st, tmp_path / "vllm.log", record=True) as eng:
        rep = V.check_reported(eng)  # method, depth, threads and the captured layers, as vLLM resolved them
        assert rep["speculative"]["aux_layers"] == layers
        gen = eng.generate(prompt, 12)
        props = eng.request("recorded")["proposals"]
    assert len(gen["tokens"]) == 12 and gen["spec"] is not None
    with torch.no_grad():  # vLLM's target decodes greedily as transformers does
        ref = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, len(prompt):].tolist()
    assert gen["tokens"] == ref

    first = props[0]  # after the prefill: the whole prompt, then the chain
    assert len(first["logits"]) == 3 and len(first["drafted"][0]) == 3  # depth 3: three draft steps compared
    fed = torch.tensor(first["combine_in"])
    torch.testing.assert_close(fed, _study_states(model, prompt, layers), rtol=1e-4, atol=1e-4)

    d = load_drafter(src, model)
    ids = torch.tensor(first["forwards"][0]["input_ids"])
    assert ids[:-1].tolist() == prompt[1:] and ids[-1].item() == gen["tokens"][0]  # token t+1 at position t
    pos = torch.tensor(first["forwards"][0]["positions"])
    cache = d.new_cache()
    with torch.no_grad():
        o = d.step(d.fuse(fed)[None], ids[None], pos, cache)[:, -1:]
        for step, logits in enumerate(first["logits"]):
            vl = torch.tensor(logits)[0]
            ours = d.logits(o)[0, 0]
            torch.testing.assert_close(vl[d.draft_to_target], ours, rtol=1e-4, atol=1e-4)
            assert bool((vl[~d.t2d] < -1e29).all())  # outside the draft vocabulary: -inf
            drafted = int(d.draft_to_target[ours.argmax()])
            assert drafted == first["drafted"][0][step]
            if step + 1 < len(first["logits"]):
                o = d.step(o, torch.tensor([[drafted]]), pos[-1:] + step + 1, cache)


def test_cli_export_vllm(tmp_path, capsys):
    from activation_wave.cli import main

    model = tiny_target_model()
    src = saved_drafter(model, tmp_path, [1, 2, 4])
    assert main(["export", "--engine", "vllm", "--draft", str(src), "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "layers [1, 2, 4]" in out and f"wave serve --engine vllm --draft {src.resolve()}" in out  # runnable as printed
    assert json.loads((tmp_path / "v" / "config.json").read_text())["num_aux_hidden_states"] == 3
    (tmp_path / "f").write_text("x")
    assert main(["export", "--engine", "vllm", "--draft", str(src), "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file" in err
    assert main(["export", "--engine", "vllm", "--draft", str(src)]) == 2
    assert "needs --out" in capsys.readouterr().err
    assert main(["export", "--engine", "vllm", "--draft", str(tmp_path / "nothing"), "--out", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
