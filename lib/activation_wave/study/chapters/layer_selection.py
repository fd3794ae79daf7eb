"""Chapter 5, selecting the layers a drafter reads: every rule's set for k layers on
filtered and unfiltered statistics, the CKA weight of the combined rule, rankings
against all sets, bootstrap stability and the paired comparison with the EAGLE-3
default.

:func:`run` returns a :class:`LayerSelectionResult`; chapter 6 trains drafters on its
``sets`` and the landing page reads its ``default_layers`` / ``scores``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.measure.layer_stats import CacheStats, stats_from_cache
from activation_wave.core.layers import candidate_ids, default_or_none, span_of, span_text
from activation_wave.select.selection import lambda_choice, method_sets, rank_among_all, rank_sets, score_set, select_layers, sweep_lambda
from activation_wave.select.stability import bootstrap_methods, paired_difference
from activation_wave.study.glue import counted

#: Rules that read the data (the bootstrap and the paired comparison rerun these).
DATA_RULES = ("entropy-greedy", "combined", "exhaustive", "cka-diverse")
#: Rules compared across set sizes (the data rules and the deterministic baselines).
SIZE_RULES = (*DATA_RULES, "eagle3-default", "last-k", "evenly-spaced")
#: Set sizes compared in the "other sizes" table.
SIZES = (2, 3, 4, 5)
#: CKA weights swept for the combined objective (the profile's own is added).
LAMBDAS = (0.0, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)

Ids = list[int]


@dataclass(frozen=True)
class RankedSet:
    """One named set in the ranking: :func:`~activation_wave.select.selection.score_set` columns,
    its percentile among all sets of its size, and the same on the other statistics."""

    rank: int
    name: str
    ids: Ids
    renyi2: float
    renyi2_gain: float
    mean_cka: float
    max_cka: float
    percentile: float
    renyi2_other: float
    percentile_other: float


@dataclass(frozen=True)
class StabilityRow:
    """How often a rule's choice on the bootstrap subsample comes back in the replicates."""

    statistics: str
    rule: str
    choice: Ids
    same_choice: float
    most_frequent: Ids
    most_frequent_share: float
    distinct_sets: int


@dataclass(frozen=True)
class PairedRow:
    """``S_2(rule's set) - S_2(default)`` over the replicates (:func:`~activation_wave.select.stability.paired_difference`)."""

    statistics: str
    rule: str
    mean: float
    lo: float
    hi: float
    frac_b_at_least_a: float
    n_boot: int


@dataclass(frozen=True)
class LayerSelectionResult:
    """Everything chapter 5 reports; ``statistics`` names the main token set
    (``"filtered"`` or ``"unfiltered"``), ``other`` the comparison."""

    k: int
    n_layers: int
    ids: Ids
    statistics: str
    other: str
    filtered: bool
    filter_quantile: float
    filter_threshold: float
    n_tokens: int
    n_tokens_other: int
    alpha: float
    lam: float
    sets: dict[str, Ids]
    scores: dict[str, dict[str, float]]
    default_layers: Ids | None
    ranking: list[RankedSet]
    by_k: dict[str, dict[str, dict[str, Ids]]]
    same_with_and_without_filter: int
    greedy_nested: bool
    exhaustive_nested: bool
    lambda_sweep: list[dict[str, Any]]
    lambda_choice: dict[str, Any]
    greedy: Ids
    entropy2: list[float]
    compartments: list[tuple[int, int]]
    compartments_hit: dict[str, int]
    stability_tokens: int
    n_bootstrap: int
    stability: dict[str, dict[str, dict[str, Any]]]
    stability_rows: list[StabilityRow]
    paired: list[PairedRow]

    @property
    def default_row(self) -> RankedSet | None:
        """The EAGLE-3 default's row of the ranking (None when it is not ranked)."""
        return next((r for r in self.ranking if r.name == "eagle3-default"), None)


def conditions(cache: Any, cfg: StudyConfig) -> dict[str, CacheStats]:
    """Filtered and unfiltered statistics on one token sample."""
    m = cfg.metrics
    sample = cache.sample_tokens(m.token_budget, seed=m.seed, min_position=m.drop_first)
    return {name: stats_from_cache(cache, cfg, filtered=name == "filtered", sample=sample)
            for name in ("filtered", "unfiltered")}


def ranking(main: CacheStats, other: CacheStats, sets: dict[str, Sequence[int]], alpha: float) -> list[RankedSet]:
    """Named sets ranked by ``S_2`` on ``main``, with percentiles on both statistics."""
    table = rank_sets(main.stats, sets, alpha=alpha)
    return [RankedSet(rank=int(r["rank"]), name=r["name"], ids=list(r["ids"]), renyi2=r["renyi2"],
                      renyi2_gain=r["renyi2_gain"], mean_cka=r["mean_cka"], max_cka=r["max_cka"],
                      percentile=rank_among_all(main.stats, r["ids"])["percentile"],
                      renyi2_other=other.stats.concat_entropy(r["ids"], 2.0),
                      percentile_other=rank_among_all(other.stats, r["ids"])["percentile"])
            for r in table.to_dict("records")]


def sets_by_size(cond: dict[str, CacheStats], cfg: StudyConfig) -> dict[str, dict[str, dict[str, Ids]]]:
    """``str(k)`` -> statistics -> rule -> set, for the sizes in :data:`SIZES` below the
    number of candidates."""
    sc = cfg.select
    out: dict[str, dict[str, dict[str, Ids]]] = {}
    for k in SIZES:
        by_stat = {}
        for name, cs in cond.items():
            if k >= len(candidate_ids(cs.stats.ids)):
                continue
            named = method_sets(cs.stats, k, lam=sc.lam, alpha=sc.alpha, n_random=0, seed=sc.seed, methods=SIZE_RULES)
            by_stat[name] = {m: list(s) for m, s in named.items()}
        if by_stat:
            out[str(k)] = by_stat
    return out


def nested(by_k: dict[str, dict[str, dict[str, Ids]]], statistics: str, rule: str) -> bool:
    """Whether ``rule``'s set for each size contains its set for the size below."""
    ks = sorted(int(k) for k in by_k)
    return all(set(by_k[str(k)][statistics][rule]) <= set(by_k[str(k + 1)][statistics][rule])
               for k in ks if k + 1 in ks)


def same_sets(a: dict[str, Ids], b: dict[str, Ids], rules: Sequence[str]) -> int:
    """How many of ``rules`` pick the same set in ``a`` and in ``b``.

    >>> same_sets({"x": [1, 2], "y": [3, 4]}, {"x": [1, 2], "y": [3, 5]}, ["x", "y", "z"])
    1
    """
    return sum(1 for m in rules if m in a and a[m] == b.get(m))


def stability(cond: dict[str, CacheStats], cfg: StudyConfig, default: Ids | None) -> tuple[dict, list[StabilityRow], list[PairedRow]]:
    """Bootstrap every data rule on both statistics; paired comparison with the default."""
    sc = cfg.select
    k = sc.k
    stab, rows, paired = {}, [], []
    for name, cs in cond.items():
        base = {m: select_layers(cs.stats, k, m, lam=sc.lam if m == "combined" else None, alpha=sc.alpha).ids
                for m in DATA_RULES}
        track = {f"full:{m}": s for m, s in base.items()}
        if default is not None:
            track["eagle3-default"] = default
        records: list = []
        st = bootstrap_methods(cs.hidden, cs.groups, DATA_RULES, k, sc.n_bootstrap, sc.seed, ids=list(cs.stats.ids),
                               n_blocks=cs.stats.n_blocks, lam=sc.lam, alpha=sc.alpha, max_tokens=sc.stability_tokens,
                               track=track, scores_out=records)
        stab[name] = {m: st[m].to_dict() for m in DATA_RULES}
        for m in DATA_RULES:
            s = st[m]
            rows.append(StabilityRow(statistics=name, rule=m, choice=list(s.full.ids),
                                     same_choice=float(s.sets.loc[s.sets["ids"] == s.full.ids, "freq"].sum()),
                                     most_frequent=list(s.sets.iloc[0]["ids"]),
                                     most_frequent_share=float(s.sets.iloc[0]["freq"]), distinct_sets=len(s.sets)))
            if default is not None:
                paired.append(PairedRow(statistics=name, rule=m,
                                        **paired_difference(records, f"full:{m}", "eagle3-default")))
    return stab, rows, paired


def run(cfg: StudyConfig, cap: Any, cond: dict[str, CacheStats] | None = None) -> LayerSelectionResult:
    """Chapter 5 on a capture (:class:`~activation_wave.study.steps.Captured`); ``cond``: the
    statistics of :func:`conditions`, if already computed."""
    sc = cfg.select
    N = cap.cache.n_layers
    cond = conditions(cap.cache, cfg) if cond is None else cond
    main_name = "filtered" if sc.filtered else "unfiltered"
    other_name = "unfiltered" if sc.filtered else "filtered"
    main, other = cond[main_name], cond[other_name]
    stats = main.stats
    default = default_or_none(N, sc.k)
    sweep = sweep_lambda(stats, sc.k, sorted({*LAMBDAS, float(sc.lam)}), alpha=sc.alpha, search="exhaustive")
    sets = method_sets(stats, sc.k, lam=sc.lam, alpha=sc.alpha, n_random=sc.n_random, seed=sc.seed)
    ranked = ranking(main, other, sets, sc.alpha)
    scores = {r.name: {**score_set(stats, r.ids, alpha=sc.alpha, lam=sc.lam if r.name == "combined" else 0.0),
                       **rank_among_all(stats, r.ids), f"renyi2_{other_name}": r.renyi2_other} for r in ranked}
    by_k = sets_by_size(cond, cfg)
    same_k = by_k.get(str(sc.k), {})
    stab, stab_rows, paired = stability(cond, cfg, default)
    comps = stats.compartments
    return LayerSelectionResult(
        k=sc.k, n_layers=N, ids=list(stats.ids), statistics=main_name, other=other_name, filtered=main.filtered,
        filter_quantile=float(cfg.metrics.filter_quantile), filter_threshold=float(cond["filtered"].threshold),
        n_tokens=main.n_tokens, n_tokens_other=other.n_tokens, alpha=float(sc.alpha), lam=float(sc.lam),
        sets={m: list(s) for m, s in sets.items()}, scores=scores, default_layers=default, ranking=ranked,
        by_k=by_k,
        same_with_and_without_filter=same_sets(same_k.get("filtered", {}), same_k.get("unfiltered", {}), DATA_RULES),
        greedy_nested=nested(by_k, main_name, "entropy-greedy"), exhaustive_nested=nested(by_k, main_name, "exhaustive"),
        lambda_sweep=[{**r, "ids": list(r["ids"])} for r in sweep.to_dict("records")],
        lambda_choice=lambda_choice(sweep, sc.lam),
        greedy=list(select_layers(stats, sc.k, "combined", lam=sc.lam, alpha=sc.alpha).ids),
        entropy2=stats.entropy2.tolist(), compartments=comps,
        compartments_hit={m: len(set(span_of(s, comps))) for m, s in sets.items()},
        stability_tokens=int(min(sc.stability_tokens, main.n_tokens)), n_bootstrap=int(sc.n_bootstrap),
        stability=stab, stability_rows=stab_rows, paired=paired)


# ------------------------------------------------------------- tables for reading
def sweep_frame(result: LayerSelectionResult) -> pd.DataFrame:
    """The lambda sweep as the frame :func:`~activation_wave.plots.plot_lambda_sweep` reads."""
    return pd.DataFrame(result.lambda_sweep)


def ranking_table(result: LayerSelectionResult) -> pd.DataFrame:
    """The ranking as a frame with readable column names."""
    o = result.other
    return pd.DataFrame([{"rank": r.rank, "rule": r.name, "layers": str(r.ids), "S2": r.renyi2,
                          "S2 gain": r.renyi2_gain, "mean CKA": r.mean_cka, "max CKA": r.max_cka,
                          "percentile": r.percentile, f"S2 ({o})": r.renyi2_other, f"percentile ({o})": r.percentile_other}
                         for r in result.ranking])


def sizes_table(result: LayerSelectionResult) -> pd.DataFrame:
    """Rule x (k, statistics) -> the set, '-' where undefined."""
    cols = {(int(k), name): {m: str(s) for m, s in sets.items()}
            for k, by in result.by_k.items() for name, sets in by.items()}
    df = pd.DataFrame(cols).reindex([m for m in SIZE_RULES])
    df = df.dropna(how="all").fillna("-")
    df.columns.names = ["k", "statistics"]
    return df


def stability_table(result: LayerSelectionResult) -> pd.DataFrame:
    return pd.DataFrame([{"statistics": r.statistics, "rule": r.rule, "choice on the subsample": str(r.choice),
                          "same choice in replicates": r.same_choice, "most frequent set": str(r.most_frequent),
                          "its frequency": r.most_frequent_share, "distinct sets": r.distinct_sets}
                         for r in result.stability_rows])


def paired_table(result: LayerSelectionResult) -> pd.DataFrame:
    return pd.DataFrame([{"statistics": p.statistics, "rule": p.rule, "S2(rule) - S2(default), mean": p.mean,
                          "5%": p.lo, "95%": p.hi, "default at least as high": p.frac_b_at_least_a}
                         for p in result.paired])


def stability_row(result: LayerSelectionResult, rule: str) -> StabilityRow:
    """The main statistics' stability row of ``rule``."""
    return next(r for r in result.stability_rows if r.statistics == result.statistics and r.rule == rule)


def paired_row(result: LayerSelectionResult, rule: str) -> PairedRow | None:
    """The main statistics' paired comparison of ``rule`` with the default (None without a default)."""
    return next((p for p in result.paired if p.statistics == result.statistics and p.rule == rule), None)


def prose_values(r: LayerSelectionResult) -> dict[str, Any]:
    """The values the chapter's prose quotes, by the names it quotes them."""
    sweep = r.lambda_sweep
    s2 = [x["renyi2"] for x in sweep]
    cka = [x["mean_cka"] for x in sweep]
    top, lastk = r.ranking[0], next(x for x in r.ranking if x.name == "last-k")
    rand = [x.percentile for x in r.ranking if x.name.startswith("random")]
    out: dict[str, Any] = {
        "k_main": r.k, "n_main": r.n_tokens, "n_other": r.n_tokens_other, "main_name": r.statistics,
        "other_name": r.other, "q": r.filter_quantile, "thr": r.filter_threshold, "lam_cfg": r.lam,
        "n_candidates": len(candidate_ids(r.ids)), "lam_ids": str(r.lambda_choice["ids"]),
        "lam_zero_ids": str(r.lambda_choice["ids_at_zero"]), "lam_lo": r.lambda_choice["lam_lo"],
        "lam_hi": r.lambda_choice["lam_hi"], "lam_cost": r.lambda_choice["entropy_cost"],
        "lam_cka_drop": r.lambda_choice["cka_drop"], "lam_max": float(sweep[-1]["lam"]),
        "lam_max_ids": str(sweep[-1]["ids"]), "lam_max_cost": float(s2[0] - s2[-1]), "greedy_ids": str(r.greedy),
        "greedy_vs_exact": "the same set as" if r.greedy == r.lambda_choice["ids"] else "a different set from",
        "n_distinct_sets": len({tuple(x["ids"]) for x in sweep}), "sweep_s2_range": float(max(s2) - min(s2)),
        "n_lambda": len(sweep), "lam_same_n": sum(list(x["ids"]) == list(r.lambda_choice["ids"]) for x in sweep),
        "n_compartments_text": counted(len(r.compartments), "compartment"),
        "sweep_cka_range": float(max(cka) - min(cka)), "top_name": top.name, "top_ids": str(top.ids),
        "top_s2": top.renyi2, "n_sets_k": int(r.scores[top.name]["n_sets"]), "lastk_pct": lastk.percentile,
        "random_pct_median": float(pd.Series(rand).median()) if rand else float("nan"),
        "n_same_k3": r.same_with_and_without_filter, "n_data_rules": len(DATA_RULES),
        "greedy_nested": "are" if r.greedy_nested else "are not",
        "exhaustive_nested": "are" if r.exhaustive_nested else "are not", "n_compartments": len(r.compartments),
        "compartments_text": span_text(r.compartments), "stab_tokens": r.stability_tokens, "n_boot": r.n_bootstrap,
        **{f"hit_{key}": r.compartments_hit.get(m, 0) for key, m in (("exhaustive", "exhaustive"),
           ("default", "eagle3-default"), ("combined", "combined"), ("greedy", "entropy-greedy"))},
    }
    rows = {m: stability_row(r, m) for m in DATA_RULES}
    out.update({f"stab_{m}": row.same_choice for m, row in rows.items()})
    out.update({f"distinct_{m}": row.distinct_sets for m, row in rows.items()})
    out["most_stable"] = max(DATA_RULES, key=lambda m: rows[m].same_choice)
    d = r.default_row
    if d is not None:
        out.update(default_ids=str(r.default_layers), default_rank=d.rank, n_named=len(r.ranking), default_s2=d.renyi2,
                   default_gap=top.renyi2 - d.renyi2, default_pct=d.percentile, default_pct_other=d.percentile_other,
                   default_cka=d.mean_cka)
    exh = paired_row(r, "exhaustive")
    if exh is not None:
        mine = [p for p in r.paired if p.statistics == r.statistics]
        out.update(paired_exh_mean=exh.mean, paired_exh_lo=exh.lo, paired_exh_hi=exh.hi,
                   paired_exh_frac=exh.frac_b_at_least_a, n_rules_beat_default=sum(p.lo > 0 for p in mine),
                   n_rules=len(mine), default_verdict="separate" if exh.lo > 0 else "do not separate")
    return out
