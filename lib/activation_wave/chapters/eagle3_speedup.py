"""Chapter 6: drafters on selected layers, offline tau, and lossless online decoding.

:func:`run` trains (or loads) one drafter per layer set and seed on the same data and
budget (:func:`~activation_wave.experiment.run_sets`), summarises each set
(:func:`summarise_sets`: tau over seeds with the interval policy of
:func:`tau_interval`, the set's selection scores), compares pairs with their single
layers (:func:`pair_gains`), correlates the scores with tau (:func:`score_correlations`),
decodes held-out prompts online with the default and the best drafter against the
baselines (:func:`online_figures`), and returns an :class:`Eagle3SpeedupResult`.
Later chapters read its fields (``load_result(..., cls=Eagle3SpeedupResult)``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..comparison import OnlineComparison, compare_online, held_out_prompts, method_name
from ..config import StudyConfig
from ..drafter import load_drafter
from ..experiment import bootstrap_mean_ci, run_sets
from ..stats import spearman
from ..pipeline import Captured
from ..layer_stats import LayerStats, stats_from_cache
from ..selection import rank_among_all, score_set

NAME = "06_eagle3_speedup"
DEFAULT_SET = "eagle3-default"

__all__ = ["Eagle3SpeedupResult", "DrafterRun", "SetSummary", "PairGain", "ScoreCorrelations", "OnlineDrafter",
           "OnlineBaselines", "SetTau", "Verdict", "layer_sets", "tau_interval", "summarise_sets", "pair_gains",
           "score_correlations", "online_figures", "verdict", "run", "NAME"]


# ----------------------------------------------------------------------------- result objects


@dataclass(frozen=True)
class DrafterRun:
    """One trained drafter: its set, seed, training figures and offline tau (eval split)."""

    set: str
    layers: tuple[int, ...]
    k: int
    seed: int
    train_s: float | None
    tokens_per_s: float | None
    acceptance_by_position: tuple[float | None, ...] | None
    final_loss_by_step: tuple[float, ...] | None
    final_acc_by_step: tuple[float, ...] | None
    tau: float | None = None
    tau_lo: float | None = None
    tau_hi: float | None = None
    eval_records: int | None = None


@dataclass(frozen=True)
class SetSummary:
    """A layer set over its seeds: tau with its interval, and its selection scores."""

    set: str
    layers: tuple[int, ...]
    k: int
    tau: float
    tau_lo: float | None
    tau_hi: float | None
    n_seeds: int
    renyi2: float | None  # concatenation entropy S2 (a single layer: its own S2)
    mean_cka: float | None  # None for a single layer
    percentile: float | None  # of S2 among all sets of the same size; None for a single layer
    acc1: float  # first-position acceptance, mean over seeds
    train_s: float | None


@dataclass(frozen=True)
class PairGain:
    """A drafter reading two layers against the same layers read alone."""

    pair: tuple[int, int]
    tau: float
    tau_lo: float | None
    tau_hi: float | None
    tau_first: float | None  # tau of the first layer alone (None: not trained)
    tau_second: float | None
    gain: float | None  # tau minus the better single layer's
    beats: bool  # the pair's whole interval lies above the better single layer
    renyi2: float | None


@dataclass(frozen=True)
class ScoreCorrelations:
    """Spearman's rho between a selection score and offline tau, over a kind of set."""

    renyi2_triples: float | None
    mean_cka_triples: float | None
    renyi2_singles: float | None
    renyi2_pairs: float | None


@dataclass(frozen=True)
class OnlineDrafter:
    """One drafter decoding the held-out prompts online, against the baselines of the same run."""

    layers: tuple[int, ...]
    tau_t0: float
    tau_t1: float
    tokens_per_s_t0: float
    tokens_per_s_t1: float
    lossless_prompts: int  # prompts whose T = 0 chain output equals plain greedy decoding's
    n_prompts: int
    speedup_vs_plain_t0: float
    speedup_vs_plain_t1: float
    speedup_vs_prompt_lookup_t0: float
    acceptance_t0: tuple[float | None, ...]
    tau_offline_all_eval: float
    tau_tree_t0: float | None = None
    speedup_tree_vs_plain_t0: float | None = None
    lossless_prompts_tree: int | None = None


@dataclass(frozen=True)
class OnlineBaselines:
    """Tokens/s of the baselines in the online run."""

    plain_tokens_per_s_t0: float
    plain_tokens_per_s_t1: float
    prompt_lookup_tokens_per_s_t0: float


@dataclass(frozen=True)
class SetTau:
    """A set's name, layers and offline tau with its interval."""

    set: str
    layers: tuple[int, ...]
    tau: float
    tau_lo: float | None
    tau_hi: float | None


@dataclass(frozen=True)
class Verdict:
    """The best triple against the default: tau gap, and whether their intervals overlap."""

    gap: float
    overlap: bool
    text: str


@dataclass(frozen=True)
class Eagle3SpeedupResult:
    """Chapter 6's results: every drafter, every set, the online run and the verdict."""

    runs: tuple[DrafterRun, ...]
    summary: tuple[SetSummary, ...]  # sorted by tau, best first
    pairs: tuple[PairGain, ...]
    spearman: ScoreCorrelations
    online: dict[str, OnlineDrafter]  # by set name: the default and the best triple
    baselines: OnlineBaselines
    prompts: tuple[str, ...]  # ids of the online prompts
    default: SetTau
    best: SetTau  # the best triple
    verdict: Verdict

    def sets_of_size(self, k: int) -> list[SetSummary]:
        """Summaries of the sets with ``k`` layers, best tau first (singles: by layer)."""
        rows = [s for s in self.summary if s.k == k]
        return sorted(rows, key=lambda s: s.layers[0]) if k == 1 else rows

    def first_seed_acceptance(self, name: str) -> tuple[float | None, ...]:
        """Acceptance by draft position of the set's first drafter (first seed)."""
        return next(r.acceptance_by_position for r in self.runs if r.set == name) or ()


# ----------------------------------------------------------------------------- the analysis


def layer_sets(selected: Mapping[str, Sequence[int]], n_layers: int, sweep_stride: int) -> dict[str, list[int]]:
    """Chapter 5's named sets, then (``sweep_stride > 0``) one single layer every
    ``sweep_stride`` block outputs from 1 and every pair of those layers."""
    sets = {name: list(ids) for name, ids in selected.items()}
    if sweep_stride:
        sweep = list(range(1, n_layers + 1, sweep_stride))
        sets.update({f"single-{layer}": [layer] for layer in sweep})
        sets.update({f"pair-{a}-{b}": [a, b] for a, b in itertools.combinations(sweep, 2)})
    return sets


def tau_interval(taus: Sequence[float], los: Sequence[float], his: Sequence[float]) -> tuple[float, float]:
    """The 95% interval of a set's tau over its seeds.

    One seed: that drafter's bootstrap interval over eval records. Several: the bootstrap
    interval of the mean over seeds, widened to the mean per-seed record interval where
    that is wider (seed spread and record sampling, whichever is larger)."""
    if len(taus) == 1:
        return float(min(los)), float(max(his))
    lo, hi = bootstrap_mean_ci(np.asarray(taus, float))
    return float(min(lo, float(np.mean(los)))), float(max(hi, float(np.mean(his))))


def _none(x: Any) -> Any:
    """NaN -> None (the results file's convention for 'not defined')."""
    return None if isinstance(x, float) and math.isnan(x) else x


def summarise_sets(runs: Sequence[Mapping[str, Any]], stats: LayerStats) -> list[SetSummary]:
    """One :class:`SetSummary` per set of ``runs`` (rows of ``run_sets``), best tau first."""
    df = pd.DataFrame(runs)
    rows = []
    for name, grp in df.groupby("set", sort=False):
        ids = list(grp["layers"].iloc[0])
        taus = grp["tau"].to_numpy(float)
        lo, hi = tau_interval(taus, grp["tau_lo"].to_numpy(float), grp["tau_hi"].to_numpy(float))
        if len(ids) > 1:
            sc = score_set(stats, ids)
            renyi2, cka, pct = sc["renyi2"], sc.get("mean_cka", np.nan), rank_among_all(stats, ids)["percentile"]
        else:
            renyi2, cka, pct = float(stats.entropy2[stats.pos([ids[0]])[0]]), np.nan, np.nan
        rows.append({"set": name, "layers": tuple(ids), "k": len(ids), "tau": float(taus.mean()), "tau_lo": lo,
                     "tau_hi": hi, "n_seeds": len(grp), "renyi2": float(renyi2), "mean_cka": float(cka),
                     "percentile": float(pct),
                     "acc1": float(np.mean([r[0] for r in grp["acceptance_by_position"]])),
                     "train_s": float(grp["train_s"].mean())})
    ordered = pd.DataFrame(rows).sort_values("tau", ascending=False)  # pandas' order, as the chapter always had
    return [SetSummary(**{k: _none(v) for k, v in row.items()}) for row in ordered.to_dict("records")]


def pair_gains(summary: Sequence[SetSummary]) -> list[PairGain]:
    """Each pair's tau against the better of its two layers read alone."""
    single = {s.layers[0]: s.tau for s in summary if s.k == 1}
    out = []
    for s in (s for s in summary if s.k == 2):
        a, b = s.layers
        alone = [single.get(a), single.get(b)]
        better = max(alone) if None not in alone else None
        out.append(PairGain(pair=(a, b), tau=s.tau, tau_lo=s.tau_lo, tau_hi=s.tau_hi, tau_first=alone[0],
                            tau_second=alone[1], gain=None if better is None else s.tau - better,
                            beats=better is not None and s.tau_lo is not None and s.tau_lo > better,
                            renyi2=s.renyi2))
    return out


def score_correlations(summary: Sequence[SetSummary]) -> ScoreCorrelations:
    """Spearman's rho of S2 and mean CKA against tau over the triples, and of S2 over the
    single layers and the pairs (undefined, None, with fewer than three)."""
    def rho(k: int, field: str) -> float | None:
        rows = [s for s in summary if s.k == k]
        x = [np.nan if getattr(s, field) is None else getattr(s, field) for s in rows]
        return _none(spearman(x, [s.tau for s in rows]))

    return ScoreCorrelations(renyi2_triples=rho(3, "renyi2"), mean_cka_triples=rho(3, "mean_cka"),
                             renyi2_singles=rho(1, "renyi2"), renyi2_pairs=rho(2, "renyi2"))


def online_figures(cmp: OnlineComparison, name: str, layers: Sequence[int], tau_offline: float) -> OnlineDrafter:
    """What chapter 6 reports of drafter ``name`` in an online comparison."""
    m = lambda kind: method_name(name, kind)  # noqa: E731
    r0, r1 = cmp.pooled[m("chain_t0")], cmp.pooled[m("chain_t1")]
    tree = cmp.pooled.get(m("tree_t0"))
    return OnlineDrafter(
        layers=tuple(layers), tau_t0=r0.tau, tau_t1=r1.tau, tokens_per_s_t0=r0.tokens_per_s,
        tokens_per_s_t1=r1.tokens_per_s, lossless_prompts=cmp.identical(m("chain_t0")), n_prompts=len(cmp.prompt_ids),
        speedup_vs_plain_t0=cmp.speedup(m("chain_t0"), "plain_t0"),
        speedup_vs_plain_t1=cmp.speedup(m("chain_t1"), "plain_t1"),
        speedup_vs_prompt_lookup_t0=cmp.speedup(m("chain_t0"), "prompt_lookup_t0"),
        acceptance_t0=tuple(_none(a) for a in r0.acceptance_by_position), tau_offline_all_eval=tau_offline,
        tau_tree_t0=tree.tau if tree else None,
        speedup_tree_vs_plain_t0=cmp.speedup(m("tree_t0"), "plain_t0") if tree else None,
        lossless_prompts_tree=cmp.identical(m("tree_t0")) if tree else None)


def verdict(best: SetTau, default: SetTau) -> Verdict:
    """The best triple against the default: overlapping intervals mean 'within the uncertainty'."""
    overlap = bool(best.tau_lo is None or default.tau_hi is None or best.tau_lo <= default.tau_hi)
    if best.set == default.set:
        text = "the default itself"
    else:
        text = "within the uncertainty of the default's" if overlap else "clearly above the default's"
    return Verdict(gap=best.tau - default.tau, overlap=overlap, text=text)


def _set_tau(s: SetSummary) -> SetTau:
    return SetTau(set=s.set, layers=s.layers, tau=s.tau, tau_lo=s.tau_lo, tau_hi=s.tau_hi)


def _drafter_run(row: Mapping[str, Any]) -> DrafterRun:
    tup = lambda v: None if v is None else tuple(_none(x) for x in v)  # noqa: E731
    return DrafterRun(set=row["set"], layers=tuple(row["layers"]), k=row["k"], seed=row["seed"],
                      train_s=row.get("train_s"), tokens_per_s=row.get("tokens_per_s"),
                      acceptance_by_position=tup(row.get("acceptance_by_position")),
                      final_loss_by_step=tup(row.get("final_loss_by_step")),
                      final_acc_by_step=tup(row.get("final_acc_by_step")), tau=row.get("tau"),
                      tau_lo=row.get("tau_lo"), tau_hi=row.get("tau_hi"), eval_records=row.get("eval_records"))


def run(cfg: StudyConfig, cap: Captured, selected: Mapping[str, Sequence[int]], *,
        progress: bool = False) -> Eagle3SpeedupResult:
    """Chapter 6 end to end on a capture: train or load every drafter, summarise, decode online.

    ``selected``: chapter 5's named layer sets (they include ``"eagle3-default"``).
    """
    target, cache = cap.target, cap.cache
    sets = layer_sets(selected, cache.n_layers, cfg.draft.sweep_stride)
    if DEFAULT_SET not in sets:
        raise ValueError(f"chapter 5's sets must include {DEFAULT_SET!r} (got {sorted(sets)}); re-run chapter 5")
    seeds = [cfg.draft.seed + i for i in range(cfg.draft.n_seeds)]
    rows = run_sets(target, cache, sets, cfg.draft, seeds, progress=progress)
    summary = summarise_sets(rows, stats_from_cache(cache, cfg).stats)
    by_name = {s.set: s for s in summary}
    default, best = _set_tau(by_name[DEFAULT_SET]), _set_tau(next(s for s in summary if s.k == 3))

    prompts = [(p.id, ids) for p, ids in held_out_prompts(target, cfg.data, cfg.spec.max_prompts, cfg.spec.seed)]
    online_sets = list(dict.fromkeys([DEFAULT_SET, best.set]))
    path = {r["set"]: r["path"] for r in reversed(rows)}  # the first seed's drafter
    drafters = {name: load_drafter(path[name], target) for name in online_sets}
    cmp = compare_online(target, drafters, prompts, cfg.spec, progress=progress)
    online = {name: online_figures(cmp, name, sets[name], by_name[name].tau) for name in online_sets}
    plain0, plain1, lookup0 = (cmp.pooled[n].tokens_per_s for n in ("plain_t0", "plain_t1", "prompt_lookup_t0"))
    return Eagle3SpeedupResult(
        runs=tuple(_drafter_run(r) for r in rows), summary=tuple(summary), pairs=tuple(pair_gains(summary)),
        spearman=score_correlations(summary), online=online,
        baselines=OnlineBaselines(plain_tokens_per_s_t0=plain0, plain_tokens_per_s_t1=plain1,
                                  prompt_lookup_tokens_per_s_t0=lookup0),
        prompts=cmp.prompt_ids, default=default, best=best, verdict=verdict(best, default))


def prose_values(res: Eagle3SpeedupResult, cfg: StudyConfig) -> dict[str, Any]:
    """Every number the chapter's text cites, by glue name (NaN where a quantity is undefined)."""
    nan = float("nan")
    num = lambda x: nan if x is None else float(x)  # noqa: E731
    singles, pairs = res.sets_of_size(1), res.pairs
    trained = [r.train_s for r in res.runs if r.train_s is not None]
    o_def, o_best = res.online[res.default.set], res.online[res.best.set]
    out: dict[str, Any] = {
        "tau_default": res.default.tau, "tau_default_lo": num(res.default.tau_lo),
        "tau_default_hi": num(res.default.tau_hi), "tau_best": res.best.tau,
        "tau_best_set": f"{res.best.set} {list(res.best.layers)}", "n_drafters": len(res.runs),
        "train_s_mean": float(np.mean(trained)) if trained else nan,
        "n_pairs": len(pairs), "n_pairs_gain": sum(p.gain is not None and p.gain > 0 for p in pairs),
        "n_pairs_sig": sum(p.beats for p in pairs),
        "rho_renyi2": num(res.spearman.renyi2_triples), "rho_cka": num(res.spearman.mean_cka_triples),
        "lossless_default": f"{o_def.lossless_prompts}/{o_def.n_prompts}",
        "lossless_best": f"{o_best.lossless_prompts}/{o_best.n_prompts}",
        "speedup_best_t0": o_best.speedup_vs_plain_t0, "speedup_default_t0": o_def.speedup_vs_plain_t0,
        "speedup_lookup_best": o_best.speedup_vs_prompt_lookup_t0, "tau_online_default": o_def.tau_t0,
        "speedup_best_t1": o_best.speedup_vs_plain_t1, "tau_best_t1": o_best.tau_t1,
        "n_online_prompts": len(res.prompts), "online_tokens": cfg.spec.max_new_tokens,
        "verdict_gap": res.verdict.gap, "verdict": res.verdict.text,
    }
    if singles:
        best1, worst1 = max(singles, key=lambda s: s.tau), min(singles, key=lambda s: s.tau)
        out.update(single_best_layer=best1.layers[0], single_best_tau=best1.tau,
                   single_worst_layer=worst1.layers[0], single_worst_tau=worst1.tau)
    best_pair = max(pairs, key=lambda p: p.tau, default=None)
    out.update(pair_best=f"{best_pair.pair[0]} + {best_pair.pair[1]}" if best_pair else "(none)",
               pair_best_tau=best_pair.tau if best_pair else nan,
               pair_best_gain=num(best_pair.gain) if best_pair else nan)
    out["tree_note"] = "no draft tree was run (spec.tree_topk = 0)"
    if o_best.tau_tree_t0 is not None:
        out["tree_note"] = (f"the dynamic draft tree (top-{cfg.spec.tree_topk} per node, {cfg.spec.tree_size} draft "
                            f"tokens) reached tau = {o_best.tau_tree_t0:.3f} with the best drafter at "
                            f"{o_best.speedup_tree_vs_plain_t0:.2f}x plain decoding, and reproduced plain greedy on "
                            f"{o_best.lossless_prompts_tree}/{o_best.n_prompts} prompts")
    return out
