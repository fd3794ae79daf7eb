"""The benchmark-details appendix (``notebooks/09_performance.py``) and the numbers of the
study's own decoder that the cost page quotes.

The page reads ``data/results/benchmarks.json`` (written by ``wave bench``). Each function
turns one benchmark entry into the values the page glues into its sentences, by glue name
(NaN / 0 where an entry is not measured): :func:`capture_values`, :func:`data_scaling_values`,
:func:`low_precision_values`, :func:`memory_values`, :func:`timing_values`; tables:
:func:`ratio_rows`, :func:`sweep_rows`, :func:`paper_estimates`. For the cost page
(``notebooks/11_cpu_payoff.py``): :func:`prompt_speedup`, a speedup with its interval over
prompts, and :func:`pytorch_values`. No function here returns a sentence.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activation_wave.core.paths import REPO_ROOT
from activation_wave.core.stats import prompt_speedup
from activation_wave.core.results import load_benchmarks  # noqa: F401 (the chapter's reader of the benchmarks file)

NAN = float("nan")
NOT_MEASURED = "(not measured)"

__all__ = ["load_benchmarks", "ratio_rows", "FIGURE_RANGE", "figure_rows", "measured_on", "capture_values",
           "study_drafter_values", "data_scaling_values", "low_precision_values", "memory_values", "profile_timings",
           "timing_values", "paper_estimates", "sweep_rows", "prompt_speedup", "pytorch_values", "observed_break_even"]


def _missing(numbers: Sequence[str], texts: Sequence[str] = (), zeros: Sequence[str] = ()) -> dict[str, Any]:
    return {**{k: NAN for k in numbers}, **{k: NOT_MEASURED for k in texts}, **{k: 0 for k in zeros}}


def ratio_rows(bench: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per benchmark of the study's pipeline measured against a baseline in the same run:
    its ratio (above 1: faster than the baseline), the two figures and the peak memory. The
    decoding benchmarks are the cost page's (:mod:`~activation_wave.study.chapters.cpu_payoff`)."""
    rows = []
    cap = bench.get("capture_throughput")
    if cap:
        rows.append({"benchmark": "capture (all hidden states) vs plain forward", "ratio": cap["ratio"],
                     "figure": cap["figure"], "baseline": cap["baseline"], "peak MiB": cap["peak_rss_mib"]})
    met = bench.get("metrics", {}).get("entries", {})
    for key, label in (("layer_entropies", "entropy, all layers: d-side vs n x n Gram"),
                       ("products_and_cka", "pair products + CKA: one pass vs pairwise"),
                       ("renyi2_all_triples", "S2 of all triples: closed form vs eigen"),
                       ("concat_entropy_alpha1", "S1 of a triple: d-side vs n x n Gram")):
        if key in met:
            e = met[key]
            rows.append({"benchmark": label, "ratio": e["ratio"], "figure": e["seconds"],
                         "baseline": e["baseline"]["seconds"], "peak MiB": e["peak_rss_mb"]})
    tp = bench.get("training_precision")
    if tp:
        for label, run in (("this CPU", tp["native"]), ("AVX2 kernels only", tp.get("avx2_only"))):
            if run:
                rows.append({"benchmark": f"drafter training, fp32 vs bf16 autocast ({label})",
                             "ratio": run["ratio_fp32_over_bf16"], "figure": run["median"]["fp32"],
                             "baseline": run["median"]["bf16"], "peak MiB": tp.get("peak_rss_mib")})
    return rows


#: The ratios the figure draws on one log axis; a ratio beyond them (the order-2 closed form's,
#: about a million) would squash the rest, and stays in the table.
FIGURE_RANGE = (1e-2, 1e2)


def figure_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows of :func:`ratio_rows` whose ratio lies within :data:`FIGURE_RANGE` (one scale)."""
    lo, hi = FIGURE_RANGE
    return [r for r in rows if lo <= r["ratio"] <= hi]


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


def capture_values(cap: Mapping[str, Any] | None) -> dict[str, Any]:
    """Capture throughput against a plain forward and against the decoder alone."""
    if not cap:
        return _missing(["capture_ratio", "capture_tps", "capture_resp_share", "capture_vs_decoder"])
    return {"capture_ratio": cap["ratio"], "capture_tps": cap["figure"],
            "capture_resp_share": 100 * cap.get("response_tokens", NAN) / cap["tokens"],
            "capture_vs_decoder": cap.get("ratio_vs_decoder_only", NAN)}


def study_drafter_values(train_s: Sequence[float | None], workers: int) -> dict[str, Any]:
    """Chapter 6's drafters under this profile: how many, seconds each, minutes in all
    with ``workers`` trained at once."""
    secs = [s for s in train_s if s]
    return {"study_drafters_n": len(train_s), "study_drafter_s": sum(secs) / len(secs) if secs else NAN,
            "study_drafters_min": sum(secs) / max(1, workers) / 60 if secs else NAN, "study_workers": workers}


def data_scaling_values(scaling: Mapping[str, Any] | None) -> dict[str, Any]:
    """Tau against the drafter's training positions (``drafter_data_scaling``): the greedy
    shares' gain per doubling, the full greedy drafter's positions, tau and last-epoch training
    accuracy, how many shares, and the sampling temperature of the sampled responses."""
    if not scaling:
        return {**_missing(["ds_per_doubling", "ds_full_tau", "ds_train_acc", "ds_temperature"]), "ds_full_tokens": 0,
                "ds_n": 0}
    greedy = sorted((p for p in scaling["points"] if not p.get("samples_per_prompt")), key=lambda p: p["loss_tokens"])
    full = greedy[-1]
    return {"ds_per_doubling": scaling["tau_per_doubling"], "ds_full_tokens": full["loss_tokens"],
            "ds_full_tau": full["tau_offline"], "ds_train_acc": full["train_acc_last_epoch"], "ds_n": len(greedy),
            "ds_temperature": scaling.get("sample_temperature", NAN)}


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
    """Streaming memory: tokens streamed, the last resident size and its change from the first checkpoint."""
    if not mem:
        return {"mem_tokens": 0, "mem_growth": NAN, "mem_last": NAN}
    return {"mem_tokens": mem["tokens"], "mem_growth": mem["growth_mib_from_first_to_last"],
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


def _sweep_rows(lc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in ((lc.get("investigation") or {}).get("rows") or []) if r.get("speedup") is not None]


def _sweep_checked(lc: Mapping[str, Any]) -> bool:
    """Whether the sweep's settings were read back from the servers (entries written before
    that check sent the depth and p_min per request, which llama-server ignored)."""
    rows = _sweep_rows(lc)
    return bool(rows) and all(r.get("settings_checked") for r in rows)


def sweep_rows(lc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The sweep's rows for a table (empty when there is none or it was not checked)."""
    if not lc or not _sweep_checked(lc):
        return []
    keys = ("outtype", "depth", "p_min", "tau", "acceptance", "drafted_per_round", "speedup", "round_in_plain_steps",
            "draft_ms_per_round", "identical")
    return [{k: r.get(k) for k in keys} for r in _sweep_rows(lc)]


def pytorch_values(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """The study's own PyTorch decoder on the 135M target (``speculative_decoding``), numbers only:
    the recipe drafter's (``pt_``) and the data-scale drafter's (``pta_``) speedups over plain at
    T = 0 with their intervals over prompts (:func:`prompt_speedup`), the speed word of each
    (:func:`~activation_wave.study.chapters.cpu_payoff.speed_word`), tau online, and the
    round as the timed run measured it (a plain step and a round in ms, and the break-even tau,
    :func:`observed_break_even`), the cost model's ceiling at its depth (every draft accepted), and
    the verify of depth + 1 tokens against a step."""
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
            "pt_step_ms": 1000 / spec["tokens_per_s"]["plain_t0"],
            "pt_round_ms": 1000 * spec["tau_t0"] / spec["tokens_per_s"]["spec_chain_t0"],
            "pt_break_even": observed_break_even(spec), "pt_ceiling": float(pred["ceiling"]), "pt_depth": depth,
            "pt_verify_rel": float(costs["verify_ms"][str(depth + 1)]) / float(costs["step_ms"]),
            "pt_lossless": spec.get("lossless_t0_chain", "-").split(" ")[0]}


def observed_break_even(spec: Mapping[str, Any]) -> float:
    """The tau at which the study's PyTorch decoder breaks even: a round's cost in plain steps as
    the timed run measured it, ``tau / speedup`` (the speedup is tau over that cost). The one
    figure the cost page and the recipe page's projection give for it.

    >>> round(observed_break_even({"tau_t0": 1.84, "speedup_vs_plain_t0": 1.0042}), 4)
    1.8323
    """
    return float(spec["tau_t0"]) / float(spec["speedup_vs_plain_t0"])
