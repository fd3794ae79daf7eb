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
# # Do layers read together carry more than one layer?
#
# ```{admonition} Answer
# :class: tip
#
# The triple of highest concatenation entropy is {glue:text}`best_triple`
# ({glue:text}`best_triple_s2:.2f` nats, against {glue:text}`single_best:.2f` for the best
# single layer); the EAGLE-3 default {glue:text}`default_layers` scores
# {glue:text}`default_s2:.2f`, above {glue:text}`default_pct:.0f`% of all
# {glue:text}`n_triples:,` triples. The closed form agrees with the eigen route to
# {glue:text}`max_abs_diff:.0e`.
# ```
#
# A drafter reads several layers at once, concatenated feature-wise. This chapter
# measures how much a *set* of layers spreads the tokens: the {term}`concatenation
# entropy` of [$Z_a \mid Z_b \mid \dots$], whose Gram matrix is the sum of the layers'
# Gram matrices ({ref}`sec-concat-entropy`). At Rényi order 2 it has a closed form from
# one $(N{+}1) \times (N{+}1)$ matrix of pairwise products, which makes scoring every
# pair and every triple of layers essentially free. The chapter checks that closed form
# against a direct eigendecomposition, maps every pair, and lists the best pairs and
# triples.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from IPython.display import display

from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import concat_entropy as ch
from activation_wave.study.steps import open_chapter
from activation_wave.plots import plot_pair_entropy
from activation_wave.core.results import save_result
from activation_wave.core.tables import format_table

cfg, cap = open_chapter(profile, model, overrides)

# %% [markdown]
# ## Closed form against eigendecomposition
#
# The pairwise products $M_{ab} = \lVert Z_a^\top Z_b \rVert_F^2$ and traces
# $t_a = \lVert Z_a \rVert_F^2$ of the {glue:text}`n_layers_total:d` prepared layers were
# computed once from {glue:text}`n_tokens:d` response positions, in
# {glue:text}`t_products:.1f` s. The order-2 entropy of any set then follows from
# {eq}`eq-concat-s2`. The table compares it, for a few sets, with the entropy computed
# the long way: concatenate the prepared layers, diagonalise, apply {eq}`eq-renyi`.
# The last column gives the order-1 (von Neumann) entropy of the same concatenation,
# which has no closed form.

# %%
r = ch.run(cfg, cap)  # products M, t; every pair and triple; the checks: activation_wave/study/chapters/concat_entropy.py
_ = save_result("02_concat_entropy", r, cfg, results_root or None)
glue_values(**ch.prose_values(r))
display(format_table(ch.check_table(r), {"S2 closed form": "{:.4f}", "S2 eigen": "{:.4f}", "|difference|": "{:.1e}",
                                         "S1 eigen": "{:.4f}"}))

# %% [markdown]
# The two routes agree to {glue:text}`max_abs_diff:.1e` nats, the rounding error of
# float64. Scoring all {glue:text}`n_pairs:d` pairs and all {glue:text}`n_triples:d`
# triples of candidate layers (every index but the embeddings, 0) from $M$ and $t$ took
# {glue:text}`t_all_subsets_ms:.1f` ms in total.

# %% tags=["remove-input"]
glue_figure("fig_pair_entropy", plot_pair_entropy(r.ids, r.pair_renyi2, kind="entropy",
                                                  title="Order-2 entropy of pair concatenations"))
glue_figure("fig_pair_gain", plot_pair_entropy(r.ids, r.pair_renyi2, kind="gain"))

# %% [markdown]
# ## Every pair of layers
#
# ```{glue:figure} fig_pair_entropy
# :name: fig-pair-entropy
#
# Order-2 entropy of the concatenation of every pair of layers (diagonal: the layer
# alone). Bright off-diagonal cells are pairs whose concatenation spreads the tokens
# over more directions.
# ```
#
# By {eq}`eq-concat-decomp` (with $\rho_{ab} \le 1$), a pair never scores below the
# weaker of its two layers, but it can score below the stronger one: a low-entropy layer
# dilutes a high-entropy one. The gain over the better of the two layers shows where a
# second layer adds something.
#
# ```{glue:figure} fig_pair_gain
# :name: fig-pair-gain
#
# Gain of each pair over the better of its two layers, $S_2(a, b) - \max(S_2(a), S_2(b))$
# (nats). Red: the pair spreads the tokens more than either layer alone; blue: less.
# ```
#
# The best single candidate layer is layer {glue:text}`single_best_layer:d` at
# {glue:text}`single_best:.2f` nats. Gains over the better layer range from
# {glue:text}`gain_min:.2f` to {glue:text}`gain_max:.2f` nats (the largest for the pair
# {glue:text}`gain_best_pair`), and {glue:text}`frac_pairs_gain:.0%` of the pairs gain
# something. By {eq}`eq-concat-decomp` the gain depends on two things: how *different*
# the two layers are ($\rho_{ab}$, the cosine between their prepared Gram matrices) and
# how *close* their single-layer entropies are (a weak partner dilutes a strong one).
# Over all pairs, the Spearman correlation between gain and $\rho_{ab}$ is
# {glue:text}`spearman_gain_rho:.2f`; over the half of the pairs whose single-layer
# entropies differ by at most {glue:text}`gap_median:.2f` nats, where dilution matters
# little, it is {glue:text}`spearman_gain_rho_close:.2f`. Informativeness and diversity
# are not independent criteria: the concatenation entropy already weighs both.

# %% tags=["remove-input"]
fmt = {"S2 (nats)": "{:.3f}", "gain over best layer": "{:+.3f}", "mean rho": "{:.2f}"}
display(format_table(ch.top_table(r.best_pairs), fmt, caption="Best pairs (order-2 concatenation entropy)"))
display(format_table(ch.top_table(r.best_triples), fmt, caption="Best triples (order-2 concatenation entropy)"))

# %% [markdown]
# ## The best pairs and triples
#
# The tables list the highest-scoring pairs and triples. The best pair is
# {glue:text}`best_pair` and the best triple is {glue:text}`best_triple`
# ({glue:text}`best_triple_s2:.3f` nats). For comparison, the EAGLE-3 default
# {glue:text}`default_layers` scores {glue:text}`default_s2:.3f` nats, rank
# {glue:text}`default_rank:d` of {glue:text}`n_triples:d` triples (better than
# {glue:text}`default_pct:.1f`% of them). This is one criterion on one kind of data;
# {doc}`05_layer_selection` compares selection rules and {doc}`04_token_filtering`
# checks how the numbers move with the choice of tokens.

# %% [markdown]
# ## Try it
#
# `wave select --model smollm2-135m --profile smoke --json` prints every rule's set and its concatenation entropy on the smoke capture.
