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
# # Concatenation entropy of layer sets
#
# A drafter reads several layers at once, concatenated feature-wise. This chapter
# measures how much a *set* of layers spreads the tokens: the {term}`concatenation
# entropy` of [$Z_a \mid Z_b \mid \dots$], whose Gram matrix is the sum of the layers'
# Gram matrices ({ref}`sec-concat-entropy`). At Rényi order 2 it has a closed form from
# one $(N{+}1) \times (N{+}1)$ matrix of pairwise products, which makes scoring every
# pair and every triple of layers essentially free. The chapter checks that closed form
# against a direct eigendecomposition, maps every pair, and lists the best pairs and
# triples.

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display
from myst_nb import glue
from scipy.stats import spearmanr

from activation_wave.cka import cka_from_products
from activation_wave.entropy import concat_entropy, pairwise_renyi2, renyi2_all_subsets, set_compute_threads
from activation_wave.layers import eagle3_default_layers
from activation_wave.pipeline import notebook_config, run_capture, save_results
from activation_wave.plots import plot_pair_entropy
from activation_wave.selection import LayerStats, rank_among_all

cfg = notebook_config(profile, model, overrides)
set_compute_threads(1)
cap = run_capture(cfg, progress=False)
cache = cap.cache
N = cache.n_layers
sample = cache.sample_tokens(cfg.metrics.token_budget, seed=cfg.metrics.seed, min_position=cfg.metrics.drop_first)
H, ids = sample.hidden, sample.layers
t0 = time.perf_counter()
stats = LayerStats.from_hidden(H, ids, N)
M, t = stats.M, stats.t
glue("t_products", time.perf_counter() - t0, display=False)
glue("n_tokens", H.shape[1], display=False)
glue("n_layers_total", len(ids), display=False)
print(cache.summary())

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
candidates = [i for i in ids if i != 0]
pos = {i: p for p, i in enumerate(ids)}
cand_pos = [pos[i] for i in candidates]
t1 = time.perf_counter()
sets2, s2_pairs = renyi2_all_subsets(M, t, 2, pool=cand_pos)
sets3, s2_triples = renyi2_all_subsets(M, t, 3, pool=cand_pos)
glue("t_all_subsets_ms", 1e3 * (time.perf_counter() - t1), display=False)
glue("n_pairs", len(sets2), display=False)
glue("n_triples", len(sets3), display=False)
best_pair = [ids[p] for p in sets2[int(np.argmax(s2_pairs))]]
best_triple = [ids[p] for p in sets3[int(np.argmax(s2_triples))]]
worst_pair = [ids[p] for p in sets2[int(np.argmin(s2_pairs))]]
rng = np.random.default_rng(cfg.metrics.seed)
checks = {"best pair": best_pair, "lowest pair": worst_pair, "best triple": best_triple,
          "random triple": sorted(int(i) for i in rng.choice(candidates, 3, replace=False)),
          "random 4 layers": sorted(int(i) for i in rng.choice(candidates, 4, replace=False))}
try:
    checks["EAGLE-3 default"] = eagle3_default_layers(N)
except ValueError:
    pass
rows = []
for name, S in checks.items():
    blocks = [H[pos[i]] for i in S]
    closed = stats.concat_entropy(S, 2.0)
    eig2 = concat_entropy(blocks, 2.0)
    rows.append({"set": name, "layers": str(S), "S2 closed form": closed, "S2 eigen": eig2,
                 "|difference|": abs(closed - eig2), "S1 eigen": concat_entropy(blocks, 1.0)})
check = pd.DataFrame(rows)
display(check.style.format({c: "{:.4f}" for c in ("S2 closed form", "S2 eigen", "S1 eigen")} | {"|difference|": "{:.1e}"}).hide(axis="index"))
glue("max_abs_diff", float(check["|difference|"].max()), display=False)

# %% [markdown]
# The two routes agree to {glue:text}`max_abs_diff:.1e` nats, the rounding error of
# float64. Scoring all {glue:text}`n_pairs:d` pairs and all {glue:text}`n_triples:d`
# triples of candidate layers (every index but the embeddings, 0) from $M$ and $t$ took
# {glue:text}`t_all_subsets_ms:.1f` ms in total.

# %%
pair = pairwise_renyi2(M, t)
fig = plot_pair_entropy(ids, pair, kind="entropy", title="Order-2 entropy of pair concatenations")
glue("fig_pair_entropy", fig, display=False)
plt.close(fig)
fig = plot_pair_entropy(ids, pair, kind="gain")
glue("fig_pair_gain", fig, display=False)
plt.close(fig)
single = np.diag(pair)
gain = pair - np.maximum(single[:, None], single[None, :])
iu = np.triu_indices(len(ids), 1)
rho = cka_from_products(M)  # cosine between the layers' prepared Gram matrices
glue("gain_max", float(gain[iu].max()), display=False)
glue("gain_min", float(gain[iu].min()), display=False)
glue("frac_pairs_gain", float((gain[iu] > 0).mean()), display=False)
glue("spearman_gain_rho", float(spearmanr(gain[iu], rho[iu]).statistic), display=False)
gap = np.abs(single[:, None] - single[None, :])[iu]
close = gap <= np.median(gap)  # pairs whose layers are about equally informative alone
glue("spearman_gain_rho_close", float(spearmanr(gain[iu][close], rho[iu][close]).statistic), display=False)
glue("gap_median", float(np.median(gap)), display=False)
a, b = iu[0][int(np.argmax(gain[iu]))], iu[1][int(np.argmax(gain[iu]))]
glue("gain_best_pair", str([int(ids[a]), int(ids[b])]), display=False)
glue("single_best", float(single[1:].max()), display=False)
glue("single_best_layer", int(ids[1 + int(np.argmax(single[1:]))]), display=False)

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

# %%
def top_table(sets: np.ndarray, scores: np.ndarray, k: int, top: int = 8) -> pd.DataFrame:
    order = np.argsort(-scores)[:top]
    out = []
    for r, j in enumerate(order, 1):
        S = [ids[p] for p in sets[j]]
        out.append({"rank": r, "layers": str(S), "S2 (nats)": scores[j],
                    "gain over best layer": scores[j] - max(single[pos[i]] for i in S),
                    "mean rho": float(np.mean([rho[pos[a], pos[b]] for a in S for b in S if a < b]))})
    return pd.DataFrame(out)


best2 = top_table(sets2, s2_pairs, 2)
best3 = top_table(sets3, s2_triples, 3)
fmt = {"S2 (nats)": "{:.3f}", "gain over best layer": "{:+.3f}", "mean rho": "{:.2f}"}
display(best2.style.format(fmt).hide(axis="index").set_caption("Best pairs (order-2 concatenation entropy)"))
display(best3.style.format(fmt).hide(axis="index").set_caption("Best triples (order-2 concatenation entropy)"))
glue("best_pair", str(best_pair), display=False)
glue("best_triple", str(best_triple), display=False)
glue("best_triple_s2", float(s2_triples.max()), display=False)
try:
    default = eagle3_default_layers(N)
    dr = rank_among_all(stats, default)
    glue("default_layers", str(default), display=False)
    glue("default_s2", stats.concat_entropy(default, 2.0), display=False)
    glue("default_rank", dr["rank"], display=False)
    glue("default_pct", dr["percentile"], display=False)
    has_default = True
except ValueError:
    dr, has_default = None, False

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

# %%
_ = save_results("02_concat_entropy", {
    "ids": ids, "n_tokens": int(H.shape[1]), "M": M, "t": t, "pair_renyi2": pair,
    "check": check.to_dict("records"), "max_abs_diff": float(check["|difference|"].max()),
    "best_pairs": best2.to_dict("records"), "best_triples": best3.to_dict("records"),
    "default": {"layers": eagle3_default_layers(N), **dr} if has_default else None,
}, cfg, results_root or None)
