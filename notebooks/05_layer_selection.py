# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Which layers do the selection rules choose?
#
# ```{admonition} Answer
# :class: tip
#
# The exact maximiser of concatenation entropy picks {glue:text}`top_ids`; the combined rule, which
# also rewards diversity (lower CKA), picks {glue:text}`lam_ids`. The EAGLE-3 default
# {glue:text}`default_ids` sits above {glue:text}`default_pct:.0f`% of all
# {glue:text}`n_sets_k:,` triples, {glue:text}`default_gap:.2f` nats below the best. On
# concatenation entropy these statistics {glue:text}`default_verdict` the best set from the
# default; whether that gap buys a better drafter is the question of
# {doc}`06_eagle3_speedup`.
# ```
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

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from IPython.display import display

from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import layer_selection as ch
from activation_wave.core.layers import candidate_ids
from activation_wave.study.steps import open_chapter
from activation_wave.plots import plot_lambda_sweep, plot_layer_frequency, plot_selection_map
from activation_wave.core.results import save_result
from activation_wave.select.selection import select_layers
from activation_wave.core.tables import format_table

cfg, cap = open_chapter(profile, model, overrides)

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
#   size $k$ (exact; every triple of this model's {glue:text}`n_candidates:d` decoder outputs
#   takes milliseconds).
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
cond = ch.conditions(cap.cache, cfg)  # LayerStats of the filtered and the unfiltered tokens of one sample
sel = select_layers(cond["filtered" if cfg.select.filtered else "unfiltered"].stats, cfg.select.k, "exhaustive")
print(f"exhaustive: layers {list(sel.ids)}, S2 = {sel.scores['renyi2']:.3f} nats")
r = ch.run(cfg, cap, cond)  # every rule, size, bootstrap and comparison: activation_wave/study/chapters/layer_selection.py
_ = save_result("05_layer_selection", r, cfg, results_root or None)
glue_values(**ch.prose_values(r))
glue_figure("fig_lambda_sweep", plot_lambda_sweep(
    ch.sweep_frame(r), title=f"The combined objective, exact optimum for each lambda (k = {r.k})"))

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
# optimum at {glue:text}`lam_same_n:d` of the {glue:text}`n_lambda:d` swept values of
# $\lambda$. Against the pure-entropy optimum it gives up {glue:text}`lam_cost:.3f` nats of
# concatenation entropy for a mean CKA lower by {glue:text}`lam_cka_drop:.3f`. The greedy
# search of the `combined` rule finds
# {glue:text}`greedy_ids`, {glue:text}`greedy_vs_exact` the exact optimum.
#
# Why not simply $\lambda = 0$? Concatenation entropy already rewards dissimilar layers
# ({eq}`eq-concat-decomp`, and the gains of {numref}`fig-pair-gain`), but only as much as
# they spread the tokens. A positive $\lambda$ asks for layers that are different in the
# CKA sense even at a small cost in spread, on the hypothesis that a drafter profits from
# features it cannot get from one layer alone. Over the swept sets, concatenation entropy
# spans {glue:text}`sweep_s2_range:.3f` nats and mean CKA {glue:text}`sweep_cka_range:.3f`,
# which is the scale on which $\lambda$ trades one against the other. Neither statistic
# can say which $\lambda$ makes the better drafter; the `exhaustive` set ($\lambda = 0$)
# and the `combined` set are both passed on to {doc}`06_eagle3_speedup`, where drafters
# trained on them are compared.
#
# ## Ranking the candidate sets

# %% tags=["hide-input"]
o = r.other
display(format_table(ch.ranking_table(r), {"S2 gain": "{:+.3f}", "mean CKA": "{:.2f}", "max CKA": "{:.2f}",
                                           "percentile": "{:.1f}", f"percentile ({o})": "{:.1f}"}))

# %% [markdown]
# One row per rule for $k =$ {glue:text}`k_main:d`: the set, its order-2 concatenation
# entropy `renyi2` and its gain over the set's best single layer, and the mean and largest
# pairwise CKA. The column `percentile` gives the share of all {glue:text}`n_sets_k:d` sets
# of that size that score lower, on the {glue:text}`main_name` statistics and on the
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

# %% tags=["hide-input"]
display(ch.sizes_table(r))

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

# %% tags=["hide-input"]
shown = {m: s for m, s in r.sets.items() if not m.startswith("random") or m == "random-0"}
glue_figure("fig_selection_map", plot_selection_map(
    r.ids, shown, compartments=r.compartments, entropy=r.entropy2,
    title=f"Sets of k = {r.k} layers on the compartment map ({r.statistics} tokens)"))

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
# {glue:text}`n_compartments_text` ({glue:text}`compartments_text`). The
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
# {glue:text}`stab_tokens:d` tokens to keep the cost down. The EAGLE-3 default and each
# rule's choice on that subsample are scored on every replicate, so that sets can be
# compared on the same resamples.

# %% tags=["hide-input"]
freqs = {f"{m} ({name})": st["layers"] for name, by in r.stability.items() for m, st in by.items()}
chosen = {f"{m} ({name})": st["full"]["ids"] for name, by in r.stability.items() for m, st in by.items()}
glue_figure("fig_stability_layers", plot_layer_frequency(
    candidate_ids(r.ids), freqs, selected=chosen,
    title=f"How often each layer is chosen ({r.n_bootstrap} bootstrap replicates)"))
display(format_table(ch.stability_table(r), {"same choice in replicates": "{:.0%}", "its frequency": "{:.0%}"}))

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

# %% tags=["hide-input"]
if r.paired:
    display(format_table(ch.paired_table(r), {"default at least as high": "{:.0%}"}))

# %% [markdown]
# Is the default's lower concatenation entropy a real gap or sampling noise? On every
# bootstrap replicate, the table compares each rule's set (chosen once, on all the
# sampled tokens) with the default, scored on the same resampled tokens: the mean difference
# in $S_2$, its 90% interval, and the share of replicates in which the default scores at
# least as high. On the {glue:text}`main_name` statistics the exhaustive set scores
# {glue:text}`paired_exh_mean:+.3f` nats against the default on average (90% interval
# {glue:text}`paired_exh_lo:+.3f` to {glue:text}`paired_exh_hi:+.3f`), and the default
# scores at least as high in {glue:text}`paired_exh_frac:.0%` of the replicates. For
# {glue:text}`n_rules_beat_default:d` of the {glue:text}`n_rules:d` data-driven rules the
# whole interval lies above zero. On concatenation entropy, then, these statistics
# {glue:text}`default_verdict` the best set from the default.
#
# The default stays competitive where the statistics cannot separate it from the
# selected sets. That happens when the gap above is of the order of its bootstrap
# interval, when a small token budget widens that interval ({doc}`04_token_filtering`),
# and for rules whose advantage is in CKA rather than entropy. Whether a gap of this size in
# concatenation entropy becomes a longer accepted length is a question for the
# drafters themselves, in {doc}`06_eagle3_speedup`.

# %% [markdown]
# ## Try it
#
# `wave select --model smollm2-135m --profile smoke --json` prints the recommended layers and every candidate with its score; add `--set select.k=2` for pairs.
