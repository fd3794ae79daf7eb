"""Chapter 9: what the benchmarks measured, and what it means for speed and scale.

The chapter reads ``data/results/benchmarks.json`` (written by ``wave bench``) and
chapter 6's results. Each function here turns one benchmark entry into the figures the
chapter cites, by glue name; an entry not measured yet gives the same names with NaN
(numbers) or "(not measured)" (text), so the page builds and says so.

* :func:`speedup_verdict` / :func:`rounds_text`: the T = 0 speedup against the study's
  target, judged by the interval of its mean over the interleaved rounds;
* :func:`decoding_values`: the cost-model derivation (break-even tau, ceiling, the
  round's cost observed in the timed run, the tau that the target needs);
* :func:`data_scaling_values`: tau per doubling of the drafter's data and the
  extrapolation to the target speedup;
* :func:`llamacpp_values`, :func:`reach_text`, :func:`sweep_rows`: llama.cpp beside its
  plain decoding, and the draft-depth / ``p_min`` sweep (only where each setting was
  checked to have reached the server);
* :func:`timing_values`: the minutes each profile and chapter 6 take, from ``timings.json``;
* :func:`low_precision_values`, :func:`memory_values`, :func:`study_drafter_values`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activation_wave.core.paths import REPO_ROOT
from activation_wave.core.results import load_benchmarks  # noqa: F401 (the chapter's reader of the benchmarks file)

NAN = float("nan")
NOT_MEASURED = "(not measured)"

__all__ = ["load_benchmarks", "speedup_verdict", "rounds_text", "ratio_rows", "capture_values", "decoding_values",
           "study_drafter_values", "data_scaling_values", "low_precision_values", "memory_values", "profile_timings",
           "timing_values", "cold_cost_text", "paper_estimates", "llamacpp_values", "reach_text", "sweep_rows",
           "sweep_text", "adopted_text"]


def _missing(numbers: Sequence[str], texts: Sequence[str] = (), zeros: Sequence[str] = ()) -> dict[str, Any]:
    return {**{k: NAN for k in numbers}, **{k: NOT_MEASURED for k in texts}, **{k: 0 for k in zeros}}


def speedup_verdict(pooled: float, rounds: Sequence[float], target: float) -> str:
    """The T = 0 speedup against the study's target, judged by the 95% interval of its mean
    over the interleaved rounds (:func:`~activation_wave.core.stats.repeat_spread`; the prose
    gives that interval just before, with :func:`rounds_text`), and how many rounds fell
    short. With fewer than two rounds there is no interval, and the verdict says so.

    >>> speedup_verdict(1.25, [1.22, 1.31, 1.24, 1.27, 1.26], 1.2)
    "above the study's target of 1.2x, as that interval lies above it (every round reached it)"
    >>> speedup_verdict(1.2, [1.15, 1.25, 1.19, 1.22, 1.21], 1.2)
    "within noise of the study's target of 1.2x, as that interval covers it (2 of 5 rounds below it)"
    """
    from activation_wave.core.stats import repeat_spread

    if len(rounds) < 2:
        side = "at or above" if pooled >= target else f"{target - pooled:.3f} short of"
        return (f"{side} the study's target of {target}x, from {'one round' if rounds else 'one run'}: "
                "no interval (the default profile runs at least 5 rounds)")
    sp = repeat_spread(rounds)
    short = sum(r < target for r in rounds)
    detail = "every round reached it" if not short else f"{short} of {sp.n} rounds below it"
    if sp.lo >= target:
        return f"above the study's target of {target}x, as that interval lies above it ({detail})"
    if sp.hi < target:
        return f"below the study's target of {target}x, as that interval lies below it ({detail})"
    return f"within noise of the study's target of {target}x, as that interval covers it ({detail})"


def ratio_rows(bench: Mapping[str, Any], speedup_target: float) -> list[dict[str, Any]]:
    """One row per benchmark measured against a baseline in the same run: its ratio, the
    study's target where there is one, the two figures and the peak memory."""
    rows = []
    cap = bench.get("capture_throughput")
    if cap:
        rows.append({"benchmark": "capture (all hidden states) vs plain forward", "ratio": cap["ratio"],
                     "target": 0.85, "figure": cap["figure"], "baseline": cap["baseline"],
                     "peak MiB": cap["peak_rss_mib"]})
    met = bench.get("metrics", {}).get("entries", {})
    for key, label in (("layer_entropies", "entropy, all layers: d-side vs n x n Gram"),
                       ("products_and_cka", "pair products + CKA: one pass vs pairwise"),
                       ("renyi2_all_triples", "S2 of all triples: closed form vs eigen"),
                       ("concat_entropy_alpha1", "S1 of a triple: d-side vs n x n Gram")):
        if key in met:
            e = met[key]
            rows.append({"benchmark": label, "ratio": e["ratio"], "target": None, "figure": e["seconds"],
                         "baseline": e["baseline"]["seconds"], "peak MiB": e["peak_rss_mb"]})
    spec = bench.get("speculative_decoding")
    for key, target in (("speedup_vs_plain_t0", speedup_target), ("speedup_vs_plain_t1", None),
                        ("speedup_vs_prompt_lookup_t0", None)):
        if spec and spec.get(key) is not None:
            rows.append({"benchmark": f"speculative decoding: {key}", "ratio": spec[key], "target": target,
                         "figure": None, "baseline": None, "peak MiB": spec.get("peak_rss_mib")})
    tp = bench.get("training_precision")
    if tp:
        for label, run in (("this CPU", tp["native"]), ("AVX2 kernels only", tp.get("avx2_only"))):
            if run:
                rows.append({"benchmark": f"drafter training, fp32 vs bf16 autocast ({label})",
                             "ratio": run["ratio_fp32_over_bf16"], "target": None, "figure": run["median"]["fp32"],
                             "baseline": run["median"]["bf16"], "peak MiB": tp.get("peak_rss_mib")})
    return rows


def measured_on(entry: Mapping[str, Any] | None) -> str:
    """When and on which CPU a benchmark entry was measured (entries written before they
    recorded their machine give the date only).

    >>> measured_on({"measured": "2026-12-02T12:27:16", "machine": {"cpu": "AMD EPYC", "bf16_units": True}})
    '2026-12-02, AMD EPYC with bf16 units'
    >>> measured_on({"measured": "2026-12-01T09:00:00"})
    '2026-12-01'
    """
    if not entry:
        return "not measured"
    when = str(entry.get("measured", "?"))[:10]
    m = entry.get("machine")
    if not m:
        return when
    return f"{when}, {m.get('cpu', '?')} {'with' if m.get('bf16_units') else 'without'} bf16 units"


def adopted_text(spec: Mapping[str, Any] | None, other: str = "this page's drafter") -> str:
    """The data-scale design's adopted drafter (issue 41), decoded beside the benchmark drafter
    in the same interleaved rounds: its outcome and online tau, its speedup over plain and over
    the recipe drafter with the 95% intervals over rounds, and the break-even tau its own
    measured round gives on this machine. ``other`` names the benchmark drafter on the page that
    quotes it.

    >>> e = {"drafter_outcome": {"tau": 1.5, "lo": 1.45, "hi": 1.55}, "rounds": 5, "adopted": {
    ...     "adopted_from": {"label": "eagle3-default@16x@B4", "seed": 0}, "tau_t0": 1.9,
    ...     "drafter_outcome": {"tau": 1.7, "lo": 1.65, "hi": 1.75, "n_prompts": 96},
    ...     "speedup_vs_plain_t0": 1.05, "speedup_vs_recipe_drafter_t0": 1.04, "lossless_t0_chain": "80/80 x",
    ...     "round_spread": {"speedup_vs_plain": {"lo": 1.0, "hi": 1.1}, "speedup_vs_recipe_drafter": {"lo": 1.0,
    ...                      "hi": 1.08}}, "cost_model": {"predicted_chain_t0": {"break_even_tau": 1.8}}}}
    >>> adopted_text(e)[:78]
    'The data-scale design adopted its strongest default-triple drafter (eagle3-def'
    >>> adopted_text({"rounds": 5}).startswith("Not measured yet")
    True
    """
    a = (spec or {}).get("adopted")
    if not a:
        return ("Not measured yet: the data-scale design's strongest drafter decodes beside this one with "
                "wave bench --profile default --only speculative_decoding --set bench.drafter=data_scale.")
    o, own, rs = a["drafter_outcome"], (spec or {}).get("drafter_outcome") or {}, a["round_spread"]
    base = (f" against {other}'s {own['tau']:.3f} [{own['lo']:.3f}, {own['hi']:.3f}]" if own else "")
    ch = a["adopted_from"]
    return (f"The data-scale design adopted its strongest default-triple drafter ({ch['label']}, seed {ch['seed']}; "
            f"outcome tau {o['tau']:.3f} [{o['lo']:.3f}, {o['hi']:.3f}] on {o['n_prompts']} eval prompts{base}). In "
            f"the same {spec['rounds']} interleaved rounds it reached online tau {a['tau_t0']:.2f} at T = 0 and "
            f"{a['speedup_vs_plain_t0']:.3f}x plain decoding (95% interval over rounds {rs['speedup_vs_plain']['lo']:.3f} "
            f"to {rs['speedup_vs_plain']['hi']:.3f}), {a['speedup_vs_recipe_drafter_t0']:.3f}x {other} "
            f"({rs['speedup_vs_recipe_drafter']['lo']:.3f} to {rs['speedup_vs_recipe_drafter']['hi']:.3f}); "
            f"{a['lossless_t0_chain']}. Its own measured round puts break-even at tau "
            f"{a['cost_model']['predicted_chain_t0']['break_even_tau']:.2f} on this machine.")


def capture_values(cap: Mapping[str, Any] | None) -> dict[str, Any]:
    """Capture throughput against a plain forward and against the decoder alone."""
    if not cap:
        return _missing(["capture_ratio", "capture_tps", "capture_resp_share", "capture_vs_decoder"])
    return {"capture_ratio": cap["ratio"], "capture_tps": cap["figure"],
            "capture_resp_share": 100 * cap.get("response_tokens", NAN) / cap["tokens"],
            "capture_vs_decoder": cap.get("ratio_vs_decoder_only", NAN)}


def decoding_values(spec: Mapping[str, Any] | None, speedup_target: float) -> dict[str, Any]:
    """The speculative-decoding benchmark explained by its cost model.

    ``obs_round_rel`` is a round's cost in plain tokens observed in the timed run
    (``tau / speedup``), so the tau that ``speedup_target`` needs at that cost is
    ``obs_tau_needed = speedup_target * obs_round_rel``."""
    if not spec:
        return _missing(["spec_tau", "spec_speedup", "spec_speedup_t1", "spec_vs_lookup", "spec_pred", "spec_ceiling",
                         "spec_break_even", "spec_step_ms", "spec_round_ms", "obs_step_ms", "obs_round_ms",
                         "obs_round_rel", "obs_tau_needed", "spec_speedup_code", "spec_speedup_chat",
                         "spec_verify_rel", "spec_marginal_ms", "spec_train_tps", "spec_train_min"],
                        ["spec_layers", "spec_lossless", "spec_rounds", "spec_verdict", "spec_train_dtype"],
                        ["spec_n_prompts", "spec_depth", "spec_depth_plus", "spec_samples", "spec_train_prompts",
                         "spec_positions", "spec_epochs", "spec_train_threads"])
    costs, pred = spec["cost_model"]["components_ms"], spec["cost_model"]["predicted_chain_t0"]
    depth = spec["spec"]["depth"]
    verify = float(costs["verify_ms"][str(depth + 1)])
    data = spec.get("drafter_data")
    rounds = spec.get("by_round") or []
    return {
        "spec_layers": str(spec["layers"]), "spec_tau": spec["tau_t0"], "spec_speedup": spec["speedup_vs_plain_t0"],
        "spec_speedup_t1": spec["speedup_vs_plain_t1"], "spec_vs_lookup": spec["speedup_vs_prompt_lookup_t0"],
        "spec_pred": pred["speedup"], "spec_ceiling": pred["ceiling"], "spec_break_even": pred["break_even_tau"],
        "spec_step_ms": costs["step_ms"], "spec_round_ms": pred["round_ms"], "spec_n_prompts": spec["n_prompts"],
        "spec_depth": depth, "spec_lossless": spec["lossless_t0_chain"], "spec_depth_plus": depth + 1,
        "spec_speedup_code": spec["by_source"].get("humaneval", {}).get("speedup_vs_plain_t0", NAN),
        "spec_speedup_chat": spec["by_source"].get("team", {}).get("speedup_vs_plain_t0", NAN),
        "spec_verify_rel": verify / float(costs["step_ms"]),
        "spec_marginal_ms": (verify - float(costs["step_ms"])) / depth,
        # the same quantities observed in the timed run itself (prefill included in both)
        "obs_step_ms": 1000 / spec["tokens_per_s"]["plain_t0"],
        "obs_round_ms": 1000 * spec["tau_t0"] / spec["tokens_per_s"]["spec_chain_t0"],
        "obs_round_rel": spec["tau_t0"] / spec["speedup_vs_plain_t0"],
        "obs_tau_needed": speedup_target * spec["tau_t0"] / spec["speedup_vs_plain_t0"],
        "spec_train_tps": spec["drafter_training"]["tokens_per_s"] or NAN,
        "spec_train_min": (spec["drafter_training"]["train_wall_s"] or NAN) / 60,
        "spec_train_threads": spec["drafter_training"].get("threads") or 0,
        "spec_samples": (data or {}).get("samples_per_prompt", 0),
        "spec_train_prompts": data["train_records"] - data["sampled_train_records"] if data else 0,
        "spec_positions": spec["drafter_training"].get("n_loss_tokens") or 0,
        "spec_rounds": rounds_text([r["speedup_vs_plain_t0"] for r in rounds]),
        "spec_epochs": (spec.get("drafter_config") or {}).get("epochs") or 0,
        "spec_train_dtype": (spec.get("drafter_config") or {}).get("dtype") or "unrecorded",
        "spec_verdict": speedup_verdict(spec["speedup_vs_plain_t0"], [r["speedup_vs_plain_t0"] for r in rounds],
                                        speedup_target),
    }


def rounds_text(speedups: Sequence[float]) -> str:
    """The interleaved rounds of the decoding benchmark in words: how many, their range and
    spread, and the 95% interval of their mean.

    >>> rounds_text([1.22, 1.31, 1.24, 1.27, 1.26])
    '5 interleaved rounds over the prompts (per round 1.220x to 1.310x, sd 0.034; mean 1.260x, 95% interval [1.218, 1.302])'
    >>> rounds_text([1.25])
    'one interleaved round over the prompts (1.250x; no interval)'
    """
    from activation_wave.core.stats import repeat_spread

    if not speedups:
        return "one interleaved run over the prompts"
    sp = repeat_spread(speedups)
    if sp.n < 2:
        return f"one interleaved round over the prompts ({sp.mean:.3f}x; no interval)"
    return (f"{sp.n} interleaved rounds over the prompts (per round {sp.min:.3f}x to {sp.max:.3f}x, sd {sp.sd:.3f}; "
            f"mean {sp.mean:.3f}x, 95% interval [{sp.lo:.3f}, {sp.hi:.3f}])")


def study_drafter_values(train_s: Sequence[float | None], workers: int) -> dict[str, Any]:
    """Chapter 6's drafters under this profile: how many, seconds each, minutes in all
    with ``workers`` trained at once."""
    secs = [s for s in train_s if s]
    return {"study_drafters_n": len(train_s), "study_drafter_s": sum(secs) / len(secs) if secs else NAN,
            "study_drafters_min": sum(secs) / max(1, workers) / 60 if secs else NAN, "study_workers": workers}


def _need_text(scaling: Mapping[str, Any], spec: Mapping[str, Any] | None, obs_tau_needed: float,
               speedup_target: float) -> str:
    """The data the target speedup needs, from :mod:`activation_wave.study.training_costs` (the one
    source chapter 10's projection also reads): the online tau needed, put on the data curve's
    offline scale, and the multiple of today's data the fit needs for it, with its interval."""
    from activation_wave.study import training_costs as costs

    bench = {"drafter_data_scaling": scaling, "speculative_decoding": spec or {}}
    if spec and spec.get("tau_t0", 0) >= obs_tau_needed:
        return f"the benchmark's drafter reaches the {speedup_target}x target on its mixed prompts"
    curve, mark = costs.data_curve(bench), costs.offline_mark(obs_tau_needed, bench)
    if not spec or curve is None or mark is None or curve["b"] <= 0:
        return "no extrapolation is possible (no speedup measured, or tau does not grow with data)"
    m = costs.data_multiple(curve, mark)
    hi = "unbounded" if m["hi"] is None else f"{m['hi']:.2f}"
    return (f"reaching {speedup_target}x on the benchmark's mixed prompts at the measured round cost needs an online "
            f"tau of {obs_tau_needed:.2f} ({mark:.2f} on the data curve's offline scale); the fit over the "
            f"{curve['n']} drafters of today's recipe on all train prompts puts that at about {m['multiple']:.2f} times "
            f"today's data (95% interval from the slope, {m['lo']:.2f} to {hi}), the same figure chapter 10's "
            "projection gives")


def data_scaling_values(scaling: Mapping[str, Any] | None, spec: Mapping[str, Any] | None,
                        obs_tau_needed: float, speedup_target: float) -> dict[str, Any]:
    """Tau against the drafter's training positions, and the data the target speedup needs.

    The extrapolation uses the local trend (tau gained per doubling between the two
    largest drafters: the curve flattens, so this is more sober than the fit over the
    greedy shares) and assumes the speedup grows in proportion to tau (a round costs
    about the same whatever is accepted): ``need = obs_tau_needed - tau`` more tau takes
    ``2 ** (need / per_doubling)`` times the largest drafter's positions."""
    if not scaling:
        return _missing(["ds_per_doubling", "ds_full_tau", "ds_train_acc", "ds_last_gain", "ds_temperature"],
                        ["ds_need", "ds_sampled"], ["ds_full_tokens", "ds_n"])
    points = scaling["points"]
    greedy = sorted((p for p in points if not p.get("samples_per_prompt")), key=lambda p: p["loss_tokens"])
    sampled = sorted((p for p in points if p.get("samples_per_prompt")), key=lambda p: p["loss_tokens"])
    full = greedy[-1]
    sampled_text = "; ".join(
        f"with {p['samples_per_prompt']} sampled response{'s' if p['samples_per_prompt'] > 1 else ''} per "
        f"prompt ({p['loss_tokens'] / full['loss_tokens']:.1f}x the positions) it reaches "
        f"{p['tau_offline']:.3f}, where the fit predicted {p['tau_predicted']:.3f}" for p in sampled) \
        or "no drafter on sampled responses has been measured yet"
    need_text = _need_text(scaling, spec, obs_tau_needed, speedup_target)
    return {"ds_per_doubling": scaling["tau_per_doubling"], "ds_full_tokens": full["loss_tokens"],
            "ds_full_tau": full["tau_offline"], "ds_train_acc": full["train_acc_last_epoch"], "ds_n": len(greedy),
            "ds_last_gain": full["tau_offline"] - greedy[-2]["tau_offline"] if len(greedy) > 1 else NAN,
            "ds_temperature": scaling.get("sample_temperature", NAN),
            "ds_sampled": sampled_text[0].upper() + sampled_text[1:], "ds_need": need_text}


def low_precision_values(low: Mapping[str, Any] | None) -> dict[str, Any]:
    """The bf16 benchmark: speedups within each precision and how often outputs stay identical."""
    if not low:
        out = _missing(["low_speedup", "low_speedup_fp32", "low_plain_rel", "low_vs_fp32_plain", "low_v4",
                        "low_v4_fp32", "low_tau"], ["low_identical", "low_identical_fp32", "low_identical_plain"],
                       ["low_n"])
        return {**out, "low_dtype": "bfloat16"}
    dt = low["dtype"]
    first = lambda text: text.split()[0]  # "3/8 prompts identical" -> "3/8"  # noqa: E731
    return {"low_dtype": dt, "low_speedup": low[f"speedup_{dt}"], "low_speedup_fp32": low["speedup_fp32"],
            "low_plain_rel": low[f"plain_{dt}_vs_fp32"], "low_vs_fp32_plain": low[f"spec_{dt}_vs_plain_fp32"],
            "low_identical": first(low["identical"][f"spec_vs_plain_{dt}"]),
            "low_identical_fp32": first(low["identical"]["spec_vs_plain_fp32"]),
            "low_identical_plain": first(low["identical"][f"plain_{dt}_vs_plain_fp32"]),
            "low_v4": low["verify_4_over_step"][dt], "low_v4_fp32": low["verify_4_over_step"]["fp32"],
            "low_n": low["n_prompts"], "low_tau": low["tau"][f"spec_chain_{dt}"]}


def memory_values(mem: Mapping[str, Any] | None) -> dict[str, Any]:
    """Streaming memory: tokens streamed, the last resident size and its growth."""
    if not mem:
        return {"mem_tokens": 0, "mem_growth": NAN, "mem_last": NAN, "mem_change": "not measured"}
    g = mem["growth_mib_from_first_to_last"]
    return {"mem_tokens": mem["tokens"], "mem_growth": g, "mem_change": f"{abs(g):.0f} MiB {'above' if g >= 0 else 'below'}",
            "mem_last": float(list(mem["figure"].values())[-1]) if mem["figure"] else NAN}


def profile_timings(results: Path = REPO_ROOT / "data" / "results",
                    profiles: Sequence[str] = ("smoke", "default")) -> list[dict[str, Any]]:
    """Each notebook's last execution time per profile and its longest recorded one (the
    run that filled its caches; the last one where none is recorded), from
    ``<results>/<profile>/timings.json``."""
    rows = []
    for prof in profiles:
        path = results / prof / "timings.json"
        if path.exists():
            doc = json.loads(path.read_text())
            longest = doc.get("longest", {})
            rows += [{"profile": prof, "notebook": nb, "seconds": s,
                      "longest seconds": max(s, longest.get(nb, {}).get("seconds", s))}
                     for nb, s in sorted(doc.get("notebooks", {}).items())]
    return rows


def timing_values(rows: Sequence[Mapping[str, Any]], profiles: Sequence[str] = ("smoke", "default"),
                  chapter: str = "06_eagle3_speedup") -> dict[str, Any]:
    """Minutes the chapter cites from :func:`profile_timings` rows: per profile the sum of the
    last executions (``total_<profile>_min``) and of the longest ones (``longest_<profile>_min``,
    a fresh clone's cost), and the default profile's ``chapter`` at its longest and last."""
    out: dict[str, Any] = {}
    for prof in profiles:
        mine = [r for r in rows if r["profile"] == prof]
        out[f"total_{prof}_min"] = sum(r["seconds"] for r in mine) / 60 if mine else NAN
        out[f"longest_{prof}_min"] = sum(r["longest seconds"] for r in mine) / 60 if mine else NAN
    ch = next((r for r in rows if r["profile"] == "default" and r["notebook"] == chapter), None)
    out["ch6_longest_min"] = ch["longest seconds"] / 60 if ch else NAN
    out["ch6_last_min"] = ch["seconds"] / 60 if ch else NAN
    return out


def cold_cost_text(training_min: float, longest_min: float) -> str:
    """How chapter 6's drafter training relates to the chapter's longest recorded execution.

    >>> cold_cost_text(40.0, 79.0)[:60]
    "That is part of chapter 6's longest (cold-cache) execution, "
    >>> "a cold run with these drafters takes longer" in cold_cost_text(114.0, 79.0)
    True
    """
    if math.isnan(training_min) or math.isnan(longest_min):
        return "Chapter 6's cold-cache execution has no recorded time yet"
    if training_min <= longest_min:
        return (f"That is part of chapter 6's longest (cold-cache) execution, {longest_min:.0f} minutes in the "
                "timings below, which also captures the drafters' training data and scores every drafter")
    return (f"That is more than chapter 6's longest recorded execution, {longest_min:.0f} minutes in the timings "
            "below: that record is from an earlier run whose drafters trained faster (chapter 6 says in which "
            "precision they train now, and why), so a cold run with these drafters takes longer than it")


def paper_estimates(models: Sequence[str]) -> list[dict[str, Any]]:
    """``wave dry-run`` of the paper profile for each model: weights, GPUs, hours, disk."""
    from activation_wave.core.config import load_config
    from activation_wave.study.estimate import dry_run

    rows = []
    for m in models:
        d = dry_run(load_config("paper", model=m), plan=True)  # a plan, whatever WAVE_MEMORY_GIB says here
        s = d["steps"]
        rows.append({"model": m, "params (B)": d["params_billion"], "weights (GiB)": s["load"]["weights_gib"],
                     "GPUs (80 GB)": s["load"]["devices"], "responses (h)": s["responses"]["hours"],
                     "capture disk (GiB)": s["capture"]["disk_gib"],
                     "capture, all records (GiB)": s["capture"]["all_records_disk_gib"],
                     "drafter (M params)": s["drafter"]["params_million"],
                     "EAGLE-3 default": str(d["eagle3_default_layers"])})
    return rows


#: What llama.cpp 11434 drafts with when not told otherwise (common/common.h); the depth
#: of an entry written before the benchmark recorded what the server reported.
LLAMACPP_DEFAULT_N_MAX = 3


def llamacpp_values(lc: Mapping[str, Any] | None, threads: str = "1",
                    adopted: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Chapter 9's prose values of the ``llamacpp`` benchmark entry (nan where it was not
    measured): tokens/s of plain and EAGLE-3 llama.cpp, the speedup, tau, identical prompts,
    the round's cost in plain steps, the tau break-even and 1.5x need at that cost, and
    whether the draft depth allows that tau at all (``lc_reach``: a round yields at most
    depth + 1 tokens); ``lc_sweep`` / ``lc_best_setting`` summarise the depth / ``p_min`` sweep.
    ``adopted``: the decoding entry's adopted drafter (issue 41); the drafter note names it when
    llama.cpp ran that drafter."""
    run = ((lc or {}).get("by_threads") or {}).get(threads)
    if not run:  # not measured: every value the prose names, as nan / a sentence saying so
        return {**_missing(("lc_plain_tps", "lc_eagle_tps", "lc_speedup", "lc_tau", "lc_round_steps", "lc_draft_ms",
                            "lc_verify_ms", "lc_step_ms", "lc_tau_1x", "lc_tau_15x", "lc_tau_max"),
                           ("lc_identical", "lc_drafter", "lc_best_setting", "lc_reach", "lc_sweep"), ("lc_depth",)),
                "lc_identical_other": "",
                "lc_threads": threads, "lc_note": "",
                "lc_drafter_note": "not measured: run `wave bench --only llamacpp` after scripts/setup_llamacpp.sh"}
    e, rc = run["eagle3"], run["eagle3"]["round_costs"]
    depth = int((e.get("server_settings") or {}).get("n_max", LLAMACPP_DEFAULT_N_MAX))
    return {"lc_threads": threads, "lc_plain_tps": run["plain"]["tokens_per_s"], "lc_eagle_tps": e["tokens_per_s"],
            "lc_speedup": e["speedup"], "lc_tau": e["tau"], "lc_identical": f"{e['identical_to_plain']}/{e['prompts']}",
            "lc_identical_other": other_threads_identity(lc, threads),
            "lc_round_steps": rc["round_in_plain_steps"], "lc_draft_ms": rc["draft_ms_per_round"],
            "lc_verify_ms": rc["verify_and_rest_ms_per_round"], "lc_step_ms": rc["plain_step_ms"],
            "lc_tau_1x": rc["tau_needed"]["1x"], "lc_tau_15x": rc["tau_needed"]["1.5x"],
            "lc_depth": depth, "lc_tau_max": depth + 1, "lc_reach": reach_text(rc["tau_needed"], depth),
            "lc_drafter": str(lc.get("drafter")), "lc_note": f"{lc['note']}." if lc.get("note") else "",
            "lc_drafter_note": _llamacpp_drafter_note(lc, adopted),
            "lc_best_setting": _best_llamacpp_setting(lc), "lc_sweep": sweep_text(lc)}


def _llamacpp_drafter_note(lc: Mapping[str, Any], adopted: Mapping[str, Any] | None) -> str:
    """Which drafter the ``llamacpp`` entry ran: a smoke drafter, the decoding entry's adopted one, or another."""
    drafter = str(lc.get("drafter"))
    if "smoke" in drafter:
        return (f"{drafter}: a smoke-profile drafter, so this row measures llama.cpp's overhead per round rather "
                "than a useful drafter")
    which = (f"the data-scale design's adopted drafter ({adopted['adopted_from']['label']}, seed "
             f"{adopted['adopted_from']['seed']}, the one the PyTorch path's adopted row decodes) reading layers"
             if adopted and str(adopted.get("drafter")) == drafter else "a default-profile drafter reading layers")
    return (f"{which} {lc.get('drafter_layers', '?')}{_training_text(lc.get('drafter_training'))}, "
            f"folder {Path(drafter).name}")


def other_threads_identity(lc: Mapping[str, Any], threads: str) -> str:
    """How many EAGLE-3 outputs equalled plain llama.cpp at the other thread counts, and why
    they can differ (an empty string when every count matched every prompt).

    >>> other_threads_identity({"by_threads": {"1": {"eagle3": {"identical_to_plain": 16, "prompts": 16}},
    ...                                        "2": {"eagle3": {"identical_to_plain": 15, "prompts": 16}}}}, "1")
    "; with 2 threads 15/16: llama.cpp's speculative output is not always plain's (likely cause, not traced token by token: its multi-token verify rounds differently from its one-token steps, so a near tie can flip)"
    """
    others = {t: r["eagle3"] for t, r in (lc.get("by_threads") or {}).items() if t != threads}
    if all(e["identical_to_plain"] == e["prompts"] for e in others.values()):
        return ""
    counts = ", ".join(f"with {t} thread{'s' if t != '1' else ''} {e['identical_to_plain']}/{e['prompts']}"
                       for t, e in sorted(others.items()))
    return (f"; {counts}: llama.cpp's speculative output is not always plain's (likely cause, not traced token by "
            "token: its multi-token verify rounds differently from its one-token steps, so a near tie can flip)")


def _training_text(tr: Mapping[str, Any] | None) -> str:
    """", trained 1 epoch on 39,361 positions (offline tau 1.31)" from a ``drafter_training`` entry;
    a drafter trained to a token budget names the tokens it trained on instead of its epochs.

    >>> _training_text({"epochs": 10, "train_positions": 744029, "tau_offline": None, "max_tokens": 2908200,
    ...                 "tokens_trained": 2909530})
    ', trained to a budget of 2,909,530 tokens over 744,029 response positions'
    """
    if not tr or tr.get("epochs") is None:
        return ""
    ep = tr["epochs"]
    done = (f"to a budget of {tr['tokens_trained']:,d} tokens over" if tr.get("max_tokens") and tr.get("tokens_trained")
            else f"{ep} epoch{'s' if ep != 1 else ''} on")
    tau = f" (offline tau {tr['tau_offline']:.2f} on the eval split)" if tr.get("tau_offline") is not None else ""
    return f", trained {done} {tr['train_positions']:,d} response positions{tau}"


def reach_text(tau_needed: Mapping[str, float], depth: int) -> str:
    """Which of the speedups in ``tau_needed`` (target -> tau at the measured round cost) a
    draft depth can reach at all: a round yields at most ``depth + 1`` tokens.

    >>> reach_text({"1x": 3.62, "1.5x": 5.43}, 3)
    "at depth 3 a round yields at most tau = 4 (every draft accepted, plus the target's own token): break-even needs tau 3.62, within that limit; 1.5x needs tau 5.43, out of reach at this depth"
    """
    top = depth + 1
    parts = [f"{'break-even' if key == '1x' else key} needs tau {tau:.2f}, "
             f"{'within that limit' if tau <= top else 'out of reach at this depth'}" for key, tau in tau_needed.items()]
    return (f"at depth {depth} a round yields at most tau = {top} (every draft accepted, plus the target's own "
            f"token): " + "; ".join(parts))


def _sweep_rows(lc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in ((lc.get("investigation") or {}).get("rows") or []) if r.get("speedup") is not None]


def _sweep_checked(lc: Mapping[str, Any]) -> bool:
    """Whether the sweep's settings were read back from the servers (entries written before
    that check sent the depth and p_min per request, which llama-server ignored)."""
    rows = _sweep_rows(lc)
    return bool(rows) and all(r.get("settings_checked") for r in rows)


#: What the chapter says of a sweep whose settings never reached the server.
UNCHECKED_SWEEP = ("the sweep in this results file predates the check that each setting reaches the server: "
                   "it sent depth and p_min per request, which this llama-server build ignores, so every row "
                   "ran llama.cpp's defaults; rerun `wave bench --only llamacpp`")


def sweep_rows(lc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The sweep's rows for a table (empty when there is none or it was not checked)."""
    if not lc or not _sweep_checked(lc):
        return []
    keys = ("outtype", "depth", "p_min", "tau", "acceptance", "drafted_per_round", "speedup", "round_in_plain_steps",
            "draft_ms_per_round", "identical")
    return [{k: r.get(k) for k in keys} for r in _sweep_rows(lc)]


def sweep_text(lc: Mapping[str, Any]) -> str:
    """The sweep in words: tau and a round's cost from the shallowest to the deepest draft
    (the first GGUF type, ``p_min`` 0) and what ``p_min`` changed at the deepest."""
    rows = _sweep_rows(lc)
    if not rows:
        return "no sweep was run"
    if not _sweep_checked(lc):
        return UNCHECKED_SWEEP
    kind = rows[0].get("outtype")
    by_depth = sorted((r for r in rows if r.get("outtype") == kind and not r.get("p_min")), key=lambda r: r["depth"])
    lo, hi = by_depth[0], by_depth[-1]
    text = (f"from depth {lo['depth']} to {hi['depth']} ({kind} drafter, p_min 0), tau went from {lo['tau']:.2f} "
            f"to {hi['tau']:.2f} ({hi['tau'] / lo['tau'] - 1:+.0%}) while a round's cost went from "
            f"{lo['round_in_plain_steps']:.2f} to {hi['round_in_plain_steps']:.2f} plain steps "
            f"({hi['round_in_plain_steps'] / lo['round_in_plain_steps'] - 1:+.0%}), so the speedup went from "
            f"{lo['speedup']:.2f}x to {hi['speedup']:.2f}x")
    pm = [r for r in rows if r.get("p_min") and r["depth"] == hi["depth"] and r.get("outtype") == kind]
    if pm:
        text += f"; at depth {hi['depth']}, " + " and ".join(
            f"p_min {r['p_min']:g} gave tau {r['tau']:.2f} with {r['drafted_per_round']:.2f} drafted per round "
            f"({r['speedup']:.2f}x)" for r in pm)
    return text


def _best_llamacpp_setting(lc: Mapping[str, Any]) -> str:
    """The fastest row of the llama.cpp investigation sweep, in words ("-" without a sweep)."""
    rows = _sweep_rows(lc)
    if not rows:
        return "-"
    if not _sweep_checked(lc):
        return "no valid setting (" + UNCHECKED_SWEEP + ")"
    best = max(rows, key=lambda r: r["speedup"])
    where = ", ".join(f"{k} {best[k]}" for k in ("outtype", "depth", "p_min") if k in best)
    fast = sum(r["speedup"] >= 1.0 for r in rows)
    return (f"{best['speedup']:.2f}x ({where}; tau {best['tau']:.2f}, a round costs "
            f"{best['round_in_plain_steps']:.2f} plain steps); "
            + (f"none of the {len(rows)} settings reached plain llama.cpp's speed" if not fast
               else f"{fast} of the {len(rows)} settings reached plain llama.cpp's speed"))


def prompt_speedup(per_prompt: Sequence[Mapping[str, Any]], method: str, reference: str = "plain_t0", *,
                   n_boot: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """The pooled speedup of ``method`` over ``reference`` (total tokens over total wall time,
    each prompt's runs summed over the interleaved rounds) with its 95% bootstrap interval over
    the **prompts**: the prompts are the sample, the rounds repeat the same prompts, so an
    interval over rounds is too narrow. ``per_prompt``: the decoding entry's rows (one per
    prompt and round). Returns ``speedup``, ``lo``, ``hi`` and ``n`` (prompts).

    >>> rows = [{"id": i, "plain_t0": {"tokens": 10, "wall_s": 1.0}, "spec": {"tokens": 10, "wall_s": w}}
    ...         for i, w in (("a", 0.5), ("b", 1.0), ("a", 0.5), ("b", 1.0))]
    >>> d = prompt_speedup(rows, "spec", n_boot=200)
    >>> round(d["speedup"], 3), d["n"], d["lo"] <= d["speedup"] <= d["hi"]
    (1.333, 2, True)
    """
    import numpy as np

    ids = list(dict.fromkeys(r["id"] for r in per_prompt if method in r and reference in r))
    if len(ids) < 2:
        return {"speedup": NAN, "lo": NAN, "hi": NAN, "n": len(ids)}
    arr = np.array([[sum(r[k][f] for r in per_prompt if r["id"] == i and method in r) for k in (reference, method)
                     for f in ("tokens", "wall_s")] for i in ids], dtype=float)
    tot = arr.sum(axis=0)
    idx = np.random.default_rng(seed).integers(0, len(arr), size=(n_boot, len(arr)))
    boot = arr[idx].sum(axis=1)
    ratio = (boot[:, 2] / boot[:, 3]) / (boot[:, 0] / boot[:, 1])
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    return {"speedup": float((tot[2] / tot[3]) / (tot[0] / tot[1])), "lo": float(lo), "hi": float(hi), "n": len(ids)}


def pytorch_values(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """The study's own PyTorch decoder on the 135M target (``speculative_decoding``), numbers only:
    the recipe drafter's (``pt_``) and the data-scale drafter's (``pta_``) speedups over plain at
    T = 0 with their intervals over prompts (:func:`prompt_speedup`), the speed word of each
    (:func:`~activation_wave.study.chapters.cpu_payoff.speed_word`), tau online, and the
    round's measured cost model (step, round, break-even tau, ceiling at its depth, verify of
    depth + 1 tokens against a step)."""
    from activation_wave.study.chapters.cpu_payoff import speed_word

    if not spec:
        out = {k: NAN for k in ("pt_speedup", "pt_lo", "pt_hi", "pt_tau", "pta_speedup", "pta_lo", "pta_hi", "pta_tau",
                                "pt_step_ms", "pt_round_ms", "pt_break_even", "pt_ceiling", "pt_verify_rel")}
        return {**out, "pt_n": 0, "pt_rounds": 0, "pt_depth": 0, "pt_word": speed_word(None, None),
                "pta_word": speed_word(None, None), "pt_lossless": "-"}
    rows = spec.get("per_prompt") or []
    own, ad = prompt_speedup(rows, "spec_chain_t0"), prompt_speedup(rows, "adopted_chain_t0")
    costs, pred = spec["cost_model"]["components_ms"], spec["cost_model"]["predicted_chain_t0"]
    depth = int(spec["spec"]["depth"])
    return {"pt_speedup": own["speedup"], "pt_lo": own["lo"], "pt_hi": own["hi"], "pt_n": own["n"],
            "pt_word": speed_word(own["lo"], own["hi"]), "pt_tau": spec["tau_t0"], "pt_rounds": spec.get("rounds", 0),
            "pta_speedup": ad["speedup"], "pta_lo": ad["lo"], "pta_hi": ad["hi"],
            "pta_word": speed_word(ad["lo"], ad["hi"]), "pta_tau": (spec.get("adopted") or {}).get("tau_t0", NAN),
            "pt_step_ms": float(costs["step_ms"]), "pt_round_ms": float(pred["round_ms"]),
            "pt_break_even": float(pred["break_even_tau"]), "pt_ceiling": float(pred["ceiling"]), "pt_depth": depth,
            "pt_verify_rel": float(costs["verify_ms"][str(depth + 1)]) / float(costs["step_ms"]),
            "pt_lossless": spec.get("lossless_t0_chain", "-").split(" ")[0]}
