"""One vLLM engine in a child process, driven by JSON lines (run by vLLM's own Python).

    build/vllm/.venv/bin/python vllm_worker.py '{"model": DIR, "threads": 1, "speculative_config": ...}'

It imports vLLM and the standard library only (the study's package needs another
transformers), so :mod:`activation_wave.engines.vllm` starts it with vLLM's interpreter. The
engine runs in this one process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set by the parent), so
its model runner can be timed and, for tests, recorded in place.

Protocol: the first line on stdout answers the start (``ok``, ``engine``: vLLM's version, torch
threads, the speculative settings vLLM resolved and the aux layers the target captures); then
one answer per request line on stdin:

* ``{"op": "generate", "prompt_ids": [...], "max_tokens": n, "stop_token_ids": [...]}``: greedy
  (T = 0) tokens, vLLM's own timestamps, this request's speculative histogram, and the time
  spent in target forwards (by number of tokens) and in the drafter;
* ``{"op": "metrics"}``: vLLM's speculative-decoding counters since start;
* ``{"op": "recorded"}``: with ``record`` at start, the drafter's inputs and logits of its
  first proposals (hidden states it was fed, token ids, positions, logits, drafted tokens).

vLLM's log (and anything else printed) goes to stderr; stdout carries the protocol only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

# run by path, this folder would come first on sys.path and its vllm.py would shadow vLLM
# (the parent also passes -P); the standard library and vLLM's site-packages stay
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

_PROTO = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)  # vLLM and its libraries print to fd 1: send that to the log


def send(doc: dict) -> None:
    _PROTO.write(json.dumps(doc) + "\n")
    _PROTO.flush()


class Timers:
    """Milliseconds in the target's forwards (keyed by tokens per call) and the drafter's proposals."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.target: dict[int, list[float]] = {}
        self.draft: list[float] = []

    def summary(self) -> dict:
        return {"target": {str(n): {"calls": len(v), "ms": round(sum(v), 3)} for n, v in sorted(self.target.items())},
                "draft": {"calls": len(self.draft), "ms": round(sum(self.draft), 3)}}


TIMERS = Timers()
RECORD: dict = {"proposals": [], "limit": 4}


def _runner(llm):
    """The model runner of the in-process engine (uniproc executor)."""
    ex = llm.llm_engine.model_executor
    worker = getattr(ex, "driver_worker", None)
    worker = getattr(worker, "worker", worker)
    return worker.model_runner


def _aux_layers(runner):
    for m in (getattr(runner, "model", None), getattr(getattr(runner, "model", None), "model", None)):
        layers = getattr(m, "aux_hidden_state_layers", None)
        if layers:
            return [int(i) for i in layers]
    return None


def _instrument(runner, record: bool) -> None:
    """Time the target's forwards and the drafter's proposals; with ``record``, keep the
    drafter's inputs and logits of its first proposals (tests compare them with the study's)."""
    import torch

    model = runner.model
    target_forward = model.forward

    def timed_forward(*args, **kw):
        ids = kw.get("input_ids", args[0] if args else None)
        pos = kw.get("positions", args[1] if len(args) > 1 else None)
        n = int(ids.shape[0]) if ids is not None else int(pos.shape[-1])
        t0 = time.perf_counter()
        out = target_forward(*args, **kw)
        TIMERS.target.setdefault(n, []).append(1000.0 * (time.perf_counter() - t0))
        return out

    model.forward = timed_forward
    drafter = getattr(runner, "drafter", None)
    if drafter is None:
        return
    propose = drafter.propose

    def timed_propose(*args, **kw):
        rec = record and len(RECORD["proposals"]) < RECORD["limit"]
        if rec:
            RECORD["current"] = {"combine_in": None, "forwards": [], "logits": []}
        t0 = time.perf_counter()
        out = propose(*args, **kw)
        TIMERS.draft.append(1000.0 * (time.perf_counter() - t0))
        if rec:
            cur = RECORD.pop("current")
            cur["drafted"] = out.tolist() if hasattr(out, "tolist") else None
            RECORD["proposals"].append(cur)
        return out

    drafter.propose = timed_propose
    dm = getattr(drafter, "model", None)
    if not record or dm is None or not hasattr(dm, "combine_hidden_states"):
        return
    combine, forward, logits = dm.combine_hidden_states, dm.forward, dm.compute_logits

    def rec_combine(h):
        cur = RECORD.get("current")
        if cur is not None and cur["combine_in"] is None:
            cur["combine_in"] = h.detach().float().tolist()
        return combine(h)

    def rec_forward(*args, **kw):
        cur = RECORD.get("current")
        out = forward(*args, **kw)
        if cur is not None:
            ids = kw.get("input_ids", args[0] if args else None)
            pos = kw.get("positions", args[1] if len(args) > 1 else None)
            hs = kw.get("hidden_states", args[2] if len(args) > 2 else None)
            cur["forwards"].append({"input_ids": ids.tolist() if ids is not None else None,
                                    "positions": pos.tolist() if pos is not None else None,
                                    "hidden_in": hs.detach().float().tolist() if hs is not None else None})
        return out

    def rec_logits(h):
        out = logits(h)
        cur = RECORD.get("current")
        if cur is not None and out is not None:
            cur["logits"].append(torch.nan_to_num(out.detach().float(), neginf=-1e30).tolist())
        return out

    dm.combine_hidden_states, dm.forward, dm.compute_logits = rec_combine, rec_forward, rec_logits


def _counters(llm) -> dict:
    """vLLM's speculative-decoding counters (Prometheus metrics ``vllm:spec_decode_*``)."""
    out: dict = {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "accepted_per_pos": []}
    names = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens": "accepted_tokens"}
    for m in llm.get_metrics():
        if m.name in names:
            out[names[m.name]] += int(getattr(m, "value", 0) or 0)
        elif m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            vals = [int(v) for v in (getattr(m, "values", None) or [])]
            acc = out["accepted_per_pos"]
            out["accepted_per_pos"] = [(acc[i] if i < len(acc) else 0) + (vals[i] if i < len(vals) else 0)
                                       for i in range(max(len(acc), len(vals)))]
    return out


def _engine_report(llm, runner) -> dict:
    import torch
    import vllm

    cfg = llm.llm_engine.vllm_config
    spec = cfg.speculative_config
    rep = {"vllm": vllm.__version__, "threads": torch.get_num_threads(), "dtype": str(cfg.model_config.dtype),
           "speculative": None}
    if spec is not None:
        rep["speculative"] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens,
                              "model": spec.model, "prompt_lookup_min": spec.prompt_lookup_min,
                              "prompt_lookup_max": spec.prompt_lookup_max,
                              "synthetic": spec.rejection_sample_method == "synthetic",
                              "aux_layers": _aux_layers(runner)}
    return rep


def main() -> None:
    args = json.loads(sys.argv[1])
    try:
        from vllm import LLM, SamplingParams

        llm = LLM(model=args["model"], dtype=args.get("dtype", "float32"), max_model_len=args.get("max_model_len", 1024),
                  enforce_eager=True, disable_log_stats=False, seed=args.get("seed", 0), skip_tokenizer_init=True,
                  kv_cache_memory_bytes=args.get("kv_cache_bytes", 256 * 2**20), enable_prefix_caching=False,
                  speculative_config=args.get("speculative_config"), per_request_spec_decode_metrics="summary" if args.get("speculative_config") else "none")
        runner = _runner(llm)
        _instrument(runner, bool(args.get("record")))
        send({"ok": True, "engine": _engine_report(llm, runner)})
    except Exception as exc:  # noqa: BLE001 - the parent shows it with the log
        traceback.print_exc()
        send({"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
        return
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            if req["op"] == "generate":
                sp = SamplingParams(temperature=0.0, max_tokens=int(req["max_tokens"]), detokenize=False,
                                    stop_token_ids=list(req.get("stop_token_ids") or []),
                                    logprobs=req.get("logprobs"))
                TIMERS.reset()
                t0 = time.perf_counter()
                o = llm.generate({"prompt_token_ids": req["prompt_ids"]}, sp, use_tqdm=False)[0]
                wall = time.perf_counter() - t0
                m, c = o.metrics, o.outputs[0]
                sdm = getattr(c, "spec_decode_metrics", None)
                spec = None
                if sdm is not None:
                    spec = {"histogram": [int(x) for x in sdm.histogram], "num_draft_tokens": int(sdm.num_draft_tokens)}
                send({"ok": True, "tokens": list(map(int, c.token_ids)), "finish_reason": c.finish_reason,
                      "decode_s": (m.last_token_ts - m.first_token_ts) if m else None,
                      "prefill_s": (m.first_token_ts - m.scheduled_ts) if m else None, "wall_s": wall,
                      "spec": spec, "timers": TIMERS.summary(),
                      "top_logprobs": [sorted(([int(t), float(lp.logprob)] for t, lp in pos.items()),
                                              key=lambda x: -x[1])[:int(req["logprobs"])]
                                       for pos in (c.logprobs or [])] if req.get("logprobs") else None})
            elif req["op"] == "metrics":
                send({"ok": True, "counters": _counters(llm)})
            elif req["op"] == "recorded":
                send({"ok": True, "proposals": RECORD["proposals"]})
            else:
                send({"ok": False, "error": f"unknown op {req['op']!r}"})
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            send({"ok": False, "error": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    main()
