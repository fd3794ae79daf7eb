# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Selecting the layers a drafter reads
#
# The previous chapters measured informativeness (concatenation entropy,
# {doc}`02_concat_entropy`) and diversity (CKA and its compartments,
# {doc}`03_cka_compartments`), on all response positions or on the uncertain ones only
# ({doc}`04_token_filtering`). This chapter turns them into choices: for
# $k = 2, 3, 4, 5$ layers, which set does each selection rule pick, how do the sets
# score, how stable is each choice when the prompts are resampled, and where do the sets
# sit on the compartment map? The main case is $k = 3$, the number of layers an EAGLE-3
# drafter reads {cite:p}`li2025eagle3`, and the sets chosen here are the ones the
# drafters of {doc}`06_eagle3_speedup` are trained on.

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display
from myst_nb import glue

from activation_wave.entropy import set_compute_threads
from activation_wave.layers import eagle3_default_layers
from activation_wave.pipeline import notebook_config, run_capture, save_results
from activation_wave.plots import plot_lambda_sweep, plot_layer_frequency, plot_selection_map
from activation_wave.selection import (bootstrap_methods, compartment_of, lambda_choice, method_sets,
                                       paired_difference, rank_among_all, rank_sets, score_set, select_layers,
                                       stats_from_cache, sweep_lambda)

cfg = notebook_config(profile, model, overrides)
set_compute_threads(1)
cap = run_capture(cfg, progress=False)
cache = cap.cache
N = cache.n_layers
sc = cfg.select
K = sc.k
sample = cache.sample_tokens(cfg.metrics.token_budget, seed=cfg.metrics.seed, min_position=cfg.metrics.drop_first)
cond = {"filtered": stats_from_cache(cache, cfg, filtered=True, sample=sample),
        "unfiltered": stats_from_cache(cache, cfg, filtered=False, sample=sample)}
main_name = "filtered" if sc.filtered else "unfiltered"
other_name = "unfiltered" if sc.filtered else "filtered"
main, other = cond[main_name], cond[other_name]
stats = main.stats
ids = list(stats.ids)
try:
    default = eagle3_default_layers(N)
except ValueError:
    default = None
glue("k_main", K, display=False)
glue("n_main", main.n_tokens, display=False)
glue("n_other", other.n_tokens, display=False)
glue("main_name", main_name, display=False)
glue("other_name", other_name, display=False)
glue("q", float(cfg.metrics.filter_quantile), display=False)
glue("thr", float(cond["filtered"].threshold), display=False)
glue("lam_cfg", float(sc.lam), display=False)
glue("n_candidates", len(ids) - 1, display=False)
print(cache.summary())

# %% [markdown]
# ## The rules
#
# All rules choose among the layer indices 1 to $N$ (the {glue:text}`n_candidates:d`
# decoder outputs; index 0, the token embeddings, is already an input of the drafter).
# Entropies are of order 2, which has a closed form for any set
# ({ref}`sec-concat-entropy`).
#
# - **entropy-greedy**: add, one at a time, the layer that most raises the concatenation
#   entropy of the set.
# - **exhaustive**: the set with the highest concatenation entropy among *all* sets of
#   size $k$ (exact; every triple of a 30-block model takes milliseconds).
# - **combined**: greedy on concatenation entropy minus $\lambda$ times the mean pairwise
#   CKA of the set, trading informativeness against diversity.
# - **cka-diverse**: split the layers into $k$ contiguous CKA compartments and take the
#   highest-entropy layer of each: one reader per compartment.
# - baselines: **eagle3-default** $[2, N/2, N-3]$ ($k = 3$ only), **last-k** (the
#   deepest $k$), **evenly-spaced** (centres of $k$ equal depth bins) and seeded
#   **random** sets.
#
# Unless said otherwise, the statistics are those of the
# {glue:text}`main_name` tokens ({glue:text}`n_main:d` response positions; the filter
# keeps next-token entropy of at least {glue:text}`thr:.3f` nats, the
# {glue:text}`q:.2f` quantile), as the run profile asks; the
# {glue:text}`other_name` statistics ({glue:text}`n_other:d` positions) are the
# comparison.
#
# ## The CKA weight of the combined rule

# %%
lams = sorted({0.0, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, float(sc.lam)})
sweep = sweep_lambda(stats, K, lams, alpha=sc.alpha, search="exhaustive")
choice = lambda_choice(sweep, sc.lam)
fig = plot_lambda_sweep(sweep, title=f"The combined objective, exact optimum for each lambda (k = {K})")
glue("fig_lambda_sweep", fig, display=False)
plt.close(fig)
greedy = select_layers(stats, K, "combined", lam=sc.lam, alpha=sc.alpha)
glue("lam_ids", str(choice["ids"]), display=False)
glue("lam_zero_ids", str(choice["ids_at_zero"]), display=False)
glue("lam_lo", choice["lam_lo"], display=False)
glue("lam_hi", choice["lam_hi"], display=False)
glue("lam_cost", choice["entropy_cost"], display=False)
glue("lam_cka_drop", choice["cka_drop"], display=False)
glue("lam_max", float(max(lams)), display=False)
glue("lam_max_ids", str(list(sweep.iloc[-1]["ids"])), display=False)
glue("lam_max_cost", float(sweep.iloc[0]["renyi2"] - sweep.iloc[-1]["renyi2"]), display=False)
glue("greedy_ids", str(list(greedy.ids)), display=False)
glue("greedy_vs_exact", "the same set as" if list(greedy.ids) == choice["ids"] else "a different set from", display=False)
glue("n_distinct_sets", int(sweep["ids"].nunique()), display=False)
glue("sweep_s2_range", float(sweep["renyi2"].max() - sweep["renyi2"].min()), display=False)
glue("sweep_cka_range", float(sweep["mean_cka"].max() - sweep["mean_cka"].min()), display=False)

# %% [markdown]
# The combined rule scores a set by $S_2(S) - \lambda \cdot \overline{\mathrm{CKA}}(S)$: one
# unit of mean pairwise CKA costs $\lambda$ nats. The figure shows, for a range of
# $\lambda$, the set that maximises this objective exactly, its concatenation entropy and
# its mean CKA.
#
# ```{glue:figure} fig_lambda_sweep
# :name: fig-lambda-sweep
#
# For each CKA weight $\lambda$, the $k =$ {glue:text}`k_main:d` set maximising
# $S_2 - \lambda \cdot$ mean CKA over all sets (annotated where it changes): its
# concatenation entropy (left axis) and mean pairwise CKA (right axis).
# ```
#
# At $\lambda = 0$ the objective is pure concatenation entropy and picks
# {glue:text}`lam_zero_ids`; the sweep visits {glue:text}`n_distinct_sets:d` different
# sets in all, and at $\lambda =$ {glue:text}`lam_max:.0f` it picks
# {glue:text}`lam_max_ids`, giving up {glue:text}`lam_max_cost:.3f` nats of entropy.
# The run profile's $\lambda =$ {glue:text}`lam_cfg:.2f` picks {glue:text}`lam_ids`, the
# same set for every swept $\lambda$ from {glue:text}`lam_lo:.3f` to
# {glue:text}`lam_hi:.3f`; against the pure-entropy optimum it gives up
# {glue:text}`lam_cost:.3f` nats of concatenation entropy for a mean CKA lower by
# {glue:text}`lam_cka_drop:.3f`. The greedy search of the `combined` rule finds
# {glue:text}`greedy_ids`, {glue:text}`greedy_vs_exact` the exact optimum.
#
# Why not simply $\lambda = 0$? Concatenation entropy already rewards dissimilar layers
# ({eq}`eq-concat-decomp`, and the gains of {numref}`fig-pair-gain`), but only as much as
# they spread the tokens; a positive $\lambda$ asks for layers that are different in the
# CKA sense even at a small cost in spread, on the hypothesis that a drafter profits from
# features it cannot get from one layer alone. Over the swept sets, concatenation entropy
# spans {glue:text}`sweep_s2_range:.3f` nats and mean CKA {glue:text}`sweep_cka_range:.3f`,
# which is the scale on which $\lambda$ trades one against the other. Neither statistic
# can say which $\lambda$ makes the better drafter; the `exhaustive` set ($\lambda = 0$)
# and the `combined` set are both passed on to {doc}`06_eagle3_speedup`, where drafters
# trained on them are compared.
#
# ## Ranking the candidate sets

# %%
sets = method_sets(stats, K, lam=sc.lam, alpha=sc.alpha, n_random=sc.n_random, seed=sc.seed)
table = rank_sets(stats, sets, alpha=sc.alpha)
table["percentile"] = [rank_among_all(stats, s)["percentile"] for s in table["ids"]]
table[f"S2 ({other_name})"] = [other.stats.concat_entropy(s, 2.0) for s in table["ids"]]
table[f"percentile ({other_name})"] = [rank_among_all(other.stats, s)["percentile"] for s in table["ids"]]
view = table.assign(ids=[str(list(s)) for s in table["ids"]]).drop(columns=["k", "objective"])
display(view.style.format({c: "{:.3f}" for c in ("renyi2", "renyi2_gain", f"S2 ({other_name})")}
                          | {c: "{:.2f}" for c in ("mean_cka", "max_cka")}
                          | {c: "{:.1f}" for c in ("percentile", f"percentile ({other_name})")})
        .hide(axis="index"))
scores = {r["name"]: {**score_set(stats, r["ids"], alpha=sc.alpha, lam=sc.lam if r["name"] == "combined" else 0.0),
                      **rank_among_all(stats, r["ids"]),
                      f"renyi2_{other_name}": r[f"S2 ({other_name})"]} for r in table.to_dict("records")}
top = table.iloc[0]
glue("top_name", top["name"], display=False)
glue("top_ids", str(list(top["ids"])), display=False)
glue("top_s2", float(top["renyi2"]), display=False)
glue("n_sets_k", rank_among_all(stats, top["ids"])["n_sets"], display=False)
if default is not None and K == 3:
    drow = table[table["name"] == "eagle3-default"].iloc[0]
    glue("default_ids", str(default), display=False)
    glue("default_rank", int(drow["rank"]), display=False)
    glue("n_named", len(table), display=False)
    glue("default_s2", float(drow["renyi2"]), display=False)
    glue("default_gap", float(top["renyi2"] - drow["renyi2"]), display=False)
    glue("default_pct", float(drow["percentile"]), display=False)
    glue("default_pct_other", float(drow[f"percentile ({other_name})"]), display=False)
    glue("default_cka", float(drow["mean_cka"]), display=False)
lastk = table[table["name"] == "last-k"].iloc[0]
glue("lastk_pct", float(lastk["percentile"]), display=False)
rand = table[table["name"].str.startswith("random")]
glue("random_pct_median", float(rand["percentile"].median()) if len(rand) else float("nan"), display=False)

# %% [markdown]
# One row per rule for $k =$ {glue:text}`k_main:d`: the set, its order-2 concatenation
# entropy `renyi2` and its gain over the set's best single layer, the mean and largest
# pairwise CKA, and the share of all {glue:text}`n_sets_k:d` sets of that size that score
# lower (`percentile`), on the {glue:text}`main_name` statistics and on the
# {glue:text}`other_name` ones.
#
# The highest-scoring rule is {glue:text}`top_name` with {glue:text}`top_ids`
# ({glue:text}`top_s2:.3f` nats). The EAGLE-3 default {glue:text}`default_ids` ranks
# {glue:text}`default_rank:d` of the {glue:text}`n_named:d` named sets, at
# {glue:text}`default_s2:.3f` nats, {glue:text}`default_gap:.3f` below the best; it
# beats {glue:text}`default_pct:.1f`% of all triples ({glue:text}`default_pct_other:.1f`%
# on the {glue:text}`other_name` statistics). For scale: the deepest layers (`last-k`)
# beat {glue:text}`lastk_pct:.1f`% of the triples, and the seeded random triples
# {glue:text}`random_pct_median:.1f`% at the median.

# %%
rows = []
by_k = {}
for k in (2, 3, 4, 5):
    if k >= len(ids) - 1:
        continue
    by_k[k] = {}
    for name, cs in cond.items():
        named = method_sets(cs.stats, k, lam=sc.lam, alpha=sc.alpha, n_random=0, seed=sc.seed,
                            methods=[m for m in ("entropy-greedy", "combined", "exhaustive", "cka-diverse",
                                                 "eagle3-default", "last-k", "evenly-spaced")])
        by_k[k][name] = {m: list(s) for m, s in named.items()}
        best = max(cs.stats.concat_entropy(s, 2.0) for s in named.values())
        for m, s in named.items():
            rows.append({"k": k, "statistics": name, "rule": m, "layers": str(list(s)),
                         "S2 below best rule": best - cs.stats.concat_entropy(s, 2.0)})
wide = pd.DataFrame(rows)
layers_wide = wide.pivot_table(index="rule", columns=["k", "statistics"], values="layers", aggfunc="first")
layers_wide = layers_wide.reindex([m for m in ("entropy-greedy", "combined", "exhaustive", "cka-diverse",
                                               "eagle3-default", "last-k", "evenly-spaced") if m in layers_wide.index])
display(layers_wide.fillna("-"))
same_k3 = [m for m in by_k.get(3, {}).get("filtered", {}) if by_k[3]["filtered"][m] == by_k[3]["unfiltered"].get(m)]
data_rules = ("entropy-greedy", "combined", "exhaustive", "cka-diverse")
glue("n_same_k3", len([m for m in same_k3 if m in data_rules]), display=False)
glue("n_data_rules", len(data_rules), display=False)
nested = [m for m in ("entropy-greedy",) if all(set(by_k[k][main_name][m]) <= set(by_k[k + 1][main_name][m])
                                                  for k in by_k if k + 1 in by_k)]
glue("greedy_nested", "are" if nested else "are not", display=False)
exh_nested = all(set(by_k[k][main_name]["exhaustive"]) <= set(by_k[k + 1][main_name]["exhaustive"])
                 for k in by_k if k + 1 in by_k)
glue("exhaustive_nested", "are" if exh_nested else "are not", display=False)

# %% [markdown]
# ## Other sizes, with and without filtering
#
# The table gives each rule's set for $k = 2$ to $5$, on the filtered and the unfiltered
# statistics. For $k =$ {glue:text}`k_main:d`, {glue:text}`n_same_k3:d` of the
# {glue:text}`n_data_rules:d` data-driven rules pick the same set with and without the
# filter. The greedy sets {glue:text}`greedy_nested` nested (each $k$ extends the set for
# $k - 1$), by construction of a greedy search; the exhaustive optima
# {glue:text}`exhaustive_nested` nested here (in general the best set of four need not
# contain the best set of three).
#
# ## Where the sets sit

# %%
comps = stats.compartments
show_sets = {m: s for m, s in sets.items() if not m.startswith("random") or m == "random-0"}
fig = plot_selection_map(ids, show_sets, compartments=comps, entropy=stats.entropy2,
                         title=f"Sets of k = {K} layers on the compartment map ({main_name} tokens)")
glue("fig_selection_map", fig, display=False)
plt.close(fig)
hit = {m: len(set(compartment_of(s, comps))) for m, s in sets.items()}
glue("n_compartments", len(comps), display=False)
glue("compartments_text", ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in comps), display=False)
glue("hit_exhaustive", hit.get("exhaustive", 0), display=False)
glue("hit_default", hit.get("eagle3-default", 0), display=False)
glue("hit_combined", hit.get("combined", 0), display=False)
glue("hit_greedy", hit.get("entropy-greedy", 0), display=False)

# %% [markdown]
# ```{glue:figure} fig_selection_map
# :name: fig-selection-map
#
# The layers each rule picks for $k =$ {glue:text}`k_main:d` (one row per rule), over the
# automatic CKA compartments (alternating shades) and the single-layer order-2 entropy
# (faint line, right axis).
# ```
#
# On the {glue:text}`main_name` statistics the layers fall into
# {glue:text}`n_compartments:d` compartments ({glue:text}`compartments_text`). The
# exhaustive optimum reads from {glue:text}`hit_exhaustive:d` of them, entropy-greedy
# from {glue:text}`hit_greedy:d`, combined from {glue:text}`hit_combined:d`, and the
# EAGLE-3 default from {glue:text}`hit_default:d`. {doc}`04_token_filtering` shows how
# far the compartments of plain CKA answer to a few high-norm tokens; where they do,
# "one layer per compartment" is a weaker guide than it looks on the map.
#
# ## How stable is each choice?
#
# Each rule is rerun on bootstrap resamples of the prompts (prompts drawn with
# replacement, their tokens pooled), on a seeded subsample of at most
# {glue:text}`stab_tokens:d` tokens to keep the cost down; the EAGLE-3 default and each
# rule's choice on that subsample are scored on every replicate, so that sets can be
# compared on the same resamples.

# %%
rules = ["entropy-greedy", "combined", "exhaustive", "cka-diverse"]
stab, records = {}, {}
for name, cs in cond.items():
    base = {m: select_layers(cs.stats, K, m, lam=sc.lam if m == "combined" else None, alpha=sc.alpha).ids for m in rules}
    track = {f"full:{m}": s for m, s in base.items()}
    if default is not None and K == 3:
        track["eagle3-default"] = default
    records[name] = []
    stab[name] = bootstrap_methods(cs.hidden, cs.groups, rules, K, sc.n_bootstrap, sc.seed, ids=ids, n_blocks=N,
                                   lam=sc.lam, alpha=sc.alpha, max_tokens=sc.stability_tokens, track=track,
                                   scores_out=records[name])
freqs = {f"{m} ({name})": stab[name][m].layers.to_dict() for name in cond for m in rules}
chosen = {f"{m} ({name})": list(stab[name][m].full.ids) for name in cond for m in rules}
fig = plot_layer_frequency([i for i in ids if i != 0], freqs, selected=chosen,
                           title=f"How often each layer is chosen ({sc.n_bootstrap} bootstrap replicates)")
glue("fig_stability_layers", fig, display=False)
plt.close(fig)
srows = []
for name in cond:
    for m in rules:
        s = stab[name][m]
        full_freq = float(s.sets.loc[s.sets["ids"] == s.full.ids, "freq"].sum())
        srows.append({"statistics": name, "rule": m, "choice on the subsample": str(list(s.full.ids)),
                      "same choice in replicates": full_freq, "most frequent set": str(list(s.sets.iloc[0]["ids"])),
                      "its frequency": float(s.sets.iloc[0]["freq"]), "distinct sets": len(s.sets)})
stab_table = pd.DataFrame(srows)
display(stab_table.style.format({"same choice in replicates": "{:.0%}", "its frequency": "{:.0%}"}).hide(axis="index"))
m_stab = stab_table[stab_table["statistics"] == main_name].set_index("rule")
glue("stab_tokens", int(min(sc.stability_tokens, main.n_tokens)), display=False)
glue("n_boot", int(sc.n_bootstrap), display=False)
for m in rules:
    glue(f"stab_{m}", float(m_stab.loc[m, "same choice in replicates"]), display=False)
    glue(f"distinct_{m}", int(m_stab.loc[m, "distinct sets"]), display=False)
glue("most_stable", str(m_stab["same choice in replicates"].idxmax()), display=False)

# %% [markdown]
# ```{glue:figure} fig_stability_layers
# :name: fig-stability-layers
#
# Share of the {glue:text}`n_boot:d` bootstrap replicates in which each rule picks each
# layer, on filtered and unfiltered statistics; red outlines mark the rule's choice on
# the subsample itself.
# ```
#
# On the {glue:text}`main_name` statistics, the share of replicates that reproduce the
# subsample's choice exactly is {glue:text}`stab_entropy-greedy:.0%` for entropy-greedy,
# {glue:text}`stab_combined:.0%` for combined, {glue:text}`stab_exhaustive:.0%` for
# exhaustive and {glue:text}`stab_cka-diverse:.0%` for cka-diverse (most stable:
# {glue:text}`most_stable`). A set that changes between replicates is not necessarily a
# fragile *answer*: when several sets score within the bootstrap noise of each other, any
# of them is as good a choice by this criterion, which is what the paired comparison
# below measures.
#
# ## When is the default good enough?

# %%
prow = []
for name in cond:
    for m in rules:
        if default is None or K != 3:
            continue
        pdiff = paired_difference(records[name], f"full:{m}", "eagle3-default")
        prow.append({"statistics": name, "rule": m, **pdiff})
paired = pd.DataFrame(prow)
if len(paired):
    display(paired.rename(columns={"mean": "S2(rule) - S2(default), mean", "lo": "5%", "hi": "95%",
                                   "frac_b_at_least_a": "default at least as high"})
            .style.format({"S2(rule) - S2(default), mean": "{:.3f}", "5%": "{:.3f}", "95%": "{:.3f}",
                           "default at least as high": "{:.0%}"}).hide(axis="index"))
    pm = paired[paired["statistics"] == main_name].set_index("rule")
    glue("paired_exh_mean", float(pm.loc["exhaustive", "mean"]), display=False)
    glue("paired_exh_lo", float(pm.loc["exhaustive", "lo"]), display=False)
    glue("paired_exh_hi", float(pm.loc["exhaustive", "hi"]), display=False)
    glue("paired_exh_frac", float(pm.loc["exhaustive", "frac_b_at_least_a"]), display=False)
    glue("n_rules_beat_default", int((pm["lo"] > 0).sum()), display=False)
    glue("n_rules", len(pm), display=False)
    glue("default_verdict", "separate" if pm.loc["exhaustive", "lo"] > 0 else "do not separate", display=False)

# %% [markdown]
# Is the default's lower concatenation entropy a real gap or sampling noise? On every
# bootstrap replicate, the table compares each rule's set (chosen once, on all the
# sampled tokens) with the default, scored on the same resampled tokens: the mean difference
# in $S_2$, its 90% interval, and the share of replicates in which the default scores at
# least as high. On the {glue:text}`main_name` statistics the exhaustive set beats the
# default by {glue:text}`paired_exh_mean:.3f` nats on average (90% interval
# {glue:text}`paired_exh_lo:.3f` to {glue:text}`paired_exh_hi:.3f`), and the default
# scores at least as high in {glue:text}`paired_exh_frac:.0%` of the replicates. For
# {glue:text}`n_rules_beat_default:d` of the {glue:text}`n_rules:d` data-driven rules the
# whole interval lies above zero. On concatenation entropy, then, these statistics
# {glue:text}`default_verdict` the best set from the default.
#
# The default stays competitive where the statistics cannot separate it from the
# selected sets: when the gap above is of the order of its bootstrap interval, when a
# small token budget widens that interval ({doc}`04_token_filtering`), and for rules
# whose advantage is in CKA rather than entropy. Whether a gap of this size in
# concatenation entropy becomes a longer accepted length is a question for the
# drafters themselves, in {doc}`06_eagle3_speedup`.

# %%
payload = {
    "k": K, "statistics": main_name, "filtered": main.filtered, "filter_quantile": cfg.metrics.filter_quantile,
    "filter_threshold": cond["filtered"].threshold, "n_tokens": main.n_tokens, "alpha": sc.alpha, "lam": sc.lam,
    "sets": {m: list(s) for m, s in sets.items()},
    "scores": scores,
    "default": {"layers": default, "scores": scores.get("eagle3-default")} if default is not None else None,
    "ranking": [{**r, "ids": list(r["ids"])} for r in table.to_dict("records")],
    "sets_other": {"statistics": other_name, "sets": by_k.get(K, {}).get(other_name, {})},
    "by_k": by_k,
    "lambda": {"sweep": [{**r, "ids": list(r["ids"])} for r in sweep.to_dict("records")], "choice": choice,
               "greedy": list(greedy.ids)},
    "compartments": comps,
    "stability": {name: {m: stab[name][m].to_dict() for m in rules} for name in cond},
    "paired": paired.to_dict("records"),
}
_ = save_results("05_layer_selection", payload, cfg, results_root or None)
