"""Do llama.cpp's greedy responses equal the PyTorch target's? The measurement behind
data/results/default/smollm2-135m/llamacpp_agreement.json (issues 25 and 27).

    LLAMACPP_DIR=... PYTHONPATH=lib nice -n 10 .venv/bin/python scripts/llamacpp_agreement.py

Steps (each output kept under scratch/llamacpp-agreement/, so a rerun resumes):

1. ``wave generate --engine llamacpp`` on the default profile's 96 eval prompts, 1 thread, with
   1 and with 2 slots, checked against the committed PyTorch greedy responses;
2. at every first difference, the PyTorch target's own logits (batch 1, fp32): near tie or not;
3. like with like: llama.cpp on an F32 copy of the GGUF (the weights the PyTorch target runs)
   with an f32 KV cache, on the first ``N_F32`` eval prompts (F32 decoding is slow on 1 thread);
4. the results file, with the PyTorch generation rates recorded elsewhere in the repository.
"""

from __future__ import annotations

import datetime
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from activation_wave.core.config import load_config
from activation_wave.core.paths import REPO_ROOT
from activation_wave.engines import llamacpp_generate as G
from activation_wave.models.prompts import load_prompts, read_responses, write_responses

REFERENCE = REPO_ROOT / "data" / "responses" / "smollm2-135m-23604a74df66ec19.jsonl"
OUT = REPO_ROOT / "data" / "results" / "default" / "smollm2-135m" / "llamacpp_agreement.json"
WORK = REPO_ROOT / "scratch" / "llamacpp-agreement"
N_F32 = 32


def cli_run(slots: int) -> dict:
    out = WORK / f"agree-np{slots}.json"
    if not out.exists():
        cmd = [sys.executable, "-m", "activation_wave.cli", "generate", "--engine", "llamacpp", "--model",
               "smollm2-135m", "--profile", "default", "--split", "eval", "--slots", str(slots), "--threads", "1",
               "--out", str(WORK / f"llamacpp-eval-np{slots}.jsonl"), "--check-against", str(REFERENCE), "--json"]
        out.write_text(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return json.loads(out.read_text())


def divergence(ref: dict, new: dict) -> list[dict]:
    out = WORK / "divergence.json"
    if not out.exists():
        from activation_wave.models.targets import load_target

        torch.set_num_threads(1)
        rows = G.divergence_logits(load_target("smollm2-135m"), ref, new, G.greedy_agreement(ref, new))
        out.write_text(json.dumps(rows, indent=1))
    return json.loads(out.read_text())


def f32_run(ref: dict, q4: dict) -> dict:
    out = WORK / "agree-f32.json"
    if not out.exists():
        src = G.gguf_of_model("smollm2-135m")
        f32 = WORK / "SmolLM2-135M-Instruct.F32.gguf"
        if not f32.exists():
            G.dequantize_gguf(src, f32)
        cfg = load_config("default")
        prompts = [p for p in load_prompts(cfg.data) if p.split == "eval"][:N_F32]
        recs, run, header = G.generate_with_llamacpp(
            f32, prompts, G.gguf_tokenizer(src), cfg.data.max_new_tokens, slots=1, threads=1, workdir=WORK,
            progress=False, extra=["--cache-type-k", "f32", "--cache-type-v", "f32"])
        write_responses(WORK / "llamacpp-eval-f32.jsonl", recs, header)
        out.write_text(json.dumps({
            "engine": run.engine, "speed": run.speed(), "ids": [p.id for p in prompts],
            "vs_pytorch": G.greedy_agreement(ref, recs).to_json(),
            "q4_1_same_prompts_vs_pytorch": G.greedy_agreement(ref, {r.id: q4[r.id] for r in recs}).summary(),
            "vs_q4_1": G.greedy_agreement(q4, recs).summary()}, indent=1))
    return json.loads(out.read_text())


def pytorch_rates() -> dict:
    """PyTorch generation rates recorded in the repository (other days, other load)."""
    bench = json.loads((REPO_ROOT / "data" / "results" / "benchmarks.json").read_text())
    greedy = read_responses(REFERENCE)
    s1 = read_responses(REPO_ROOT / "data" / "responses" / "smollm2-135m-1c0fca2e4c034f3f-s1.jsonl")
    n_g, n_s = (sum(len(r.response_ids) for r in x.values()) for x in (greedy, s1))
    return {
        "plain_loop_batch1_tokens_per_s": round(bench["speculative_decoding"]["tokens_per_s"]["plain_t0"], 2),
        "plain_loop_source": "data/results/benchmarks.json speculative_decoding.tokens_per_s.plain_t0 "
                             f"({bench['speculative_decoding'].get('measured', '?')}; our PyTorch greedy loop, batch 1)",
        "greedy_set_batch16_tokens_per_s_approx": round(n_g / 3900, 1),
        "greedy_set_source": f"{n_g} response tokens of {REFERENCE.name} in '~65-70 min' on 2 cores "
                             "(data/responses/README.md, benchmarks.json default_profile.excludes); includes loading",
        "sampled_set_batch16_tokens_per_s_approx": round(n_s / 540, 1),
        "sampled_set_source": f"{n_s} response tokens of the -s1 file in 'about 9 minutes per sample on 2 cores' "
                              "(data/responses/README.md)",
        "llamacpp_plain_chapter9_tokens_per_s": bench["llamacpp"]["by_threads"]["1"]["plain"]["tokens_per_s"],
        "llamacpp_plain_chapter9_source": "data/results/benchmarks.json llamacpp.by_threads.1.plain (1 thread, "
                                          "1 slot, a quieter machine)",
    }


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    np1, np2 = cli_run(1), cli_run(2)
    ref = read_responses(REFERENCE)
    q4 = read_responses(WORK / "llamacpp-eval-np1.jsonl")
    q4_2 = read_responses(WORK / "llamacpp-eval-np2.jsonl")
    rows = divergence(ref, q4)
    f32 = f32_run(ref, q4)
    gaps = sorted(r["gap"] for r in rows)
    doc = {
        "what": "greedy agreement of llama.cpp (llama-server) with the PyTorch target on the default profile's 96 "
                "eval prompts; SmolLM2-135M-Instruct",
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commands": [np1["command"], np2["command"], "PYTHONPATH=lib python scripts/llamacpp_agreement.py"],
        "conditions": "2-core machine shared with a running study (load average ~4), every process at nice 10, "
                      "llama-server with 1 thread: speeds are lower bounds, not benchmarks",
        "reference": {**np1["reference"], "how": "transformers generate on the GGUF dequantized to fp32 "
                      "(models/targets.py), batches of 16 left-padded, max 160 new tokens, cut after EOS"},
        "llamacpp": {"engine": np1["engine"], "weights": "the same GGUF as shipped (Q4_1 blocks, token_embd Q8_0) "
                     "computed by llama.cpp's quantized CPU kernels (activations rounded to 8 bits), f16 KV cache",
                     "request": "prompt as the PyTorch path's chat-templated token ids; temperature sampler only at "
                                "T=0 (arg max); n_predict 160; stops on EOG, end token kept"},
        "agreement": np1["agreement"],
        "slots": {"1": np1["speed"], "2": np2["speed"],
                  "identical_1_vs_2_slots": G.greedy_agreement(q4, q4_2).summary()["identical"]},
        "divergence": {
            "how": "PyTorch fp32 target, batch 1, one forward of prompt + common prefix; logits at the first "
                   "differing position (engines/llamacpp_generate.divergence_logits)",
            "n": len(rows),
            "pytorch_batch1_argmax_is_reference": sum(r["argmax_is_reference"] for r in rows),
            "llamacpp_token_is_pytorch_second": sum(r["candidate_is_second"] for r in rows),
            "gap_median": statistics.median(gaps) if gaps else None, "gap_max": max(gaps) if gaps else None,
            "gap_below": {str(t): sum(g < t for g in gaps) for t in (0.1, 0.25, 0.5, 1.0)},
            "unit": "logit of the reference token minus logit of llama.cpp's token, in the PyTorch target",
            "rows": rows},
        "like_with_like_f32": {
            "how": f"llama.cpp on an all-F32 copy of the GGUF (engines/llamacpp_generate.dequantize_gguf: the "
                   f"weights the PyTorch target runs), f32 KV cache, first {N_F32} eval prompts",
            "engine": f32["engine"], "speed": f32["speed"],
            "vs_pytorch": {k: v for k, v in f32["vs_pytorch"].items() if k != "per_prompt"},
            "q4_1_on_the_same_prompts_vs_pytorch": f32["q4_1_same_prompts_vs_pytorch"],
            "vs_q4_1": f32["vs_q4_1"], "per_prompt": f32["vs_pytorch"]["per_prompt"]},
        "pytorch_rates": pytorch_rates(),
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
