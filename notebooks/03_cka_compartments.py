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
# # CKA between layers and its compartments
#
# The paper's second criterion is *diversity*: a drafter that reads two nearly identical
# layers reads the same information twice. This chapter measures similarity between
# every pair of layers with linear {term}`CKA` {cite:p}`kornblith2019cka`, finds the
# {term}`compartment`s (runs of consecutive, mutually similar layers) by an exact
# contiguous segmentation ({ref}`sec-compartments`), and checks how much the plain CKA
# estimator's bias matters by comparing it with {term}`debiased CKA`
# {cite:p}`song2012hsic`.

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display
from myst_nb import glue

from activation_wave.cka import cka_matrix, compartment_costs, segment_compartments
from activation_wave.entropy import set_compute_threads
from activation_wave.layers import eagle3_default_layers
from activation_wave.pipeline import notebook_config, run_capture, save_results
from activation_wave.plots import plot_cka, plot_cka_grid, plot_compartment_elbow
from activation_wave.selection import LayerStats, compartment_table

cfg = notebook_config(profile, model, overrides)
set_compute_threads(1)
cap = run_capture(cfg, progress=False)
cache = cap.cache
N = cache.n_layers
sample = cache.sample_tokens(cfg.metrics.token_budget, seed=cfg.metrics.seed, min_position=cfg.metrics.drop_first)
H, ids = sample.hidden, sample.layers
stats = LayerStats.from_hidden(H, ids, N)
C = stats.cka  # plain linear CKA of the mean-centred hidden states
Cd = cka_matrix(H, debiased=True)
k_max = min(len(ids), 12)
W = compartment_costs(C, k_max)
comps = segment_compartments(C, ids=ids, k_max=k_max)  # k by the gain-ratio rule
comps_elbow = segment_compartments(C, ids=ids, k_max=k_max, rule="elbow")
try:
    default = eagle3_default_layers(N)
except ValueError:
    default = []
glue("n_tokens", H.shape[1], display=False)
glue("k_auto", len(comps), display=False)
glue("k_elbow", len(comps_elbow), display=False)
glue("k_max", k_max, display=False)
print(cache.summary())

# %% [markdown]
# ## The CKA map
#
# ```{glue:figure} fig_cka
# :name: fig-cka
#
# Linear CKA between every pair of layer indices over {glue:text}`n_tokens:d` response
# positions, with the {glue:text}`k_auto:d` compartments found automatically outlined in
# white.
# ```

# %%
fig = plot_cka(ids, C, compartments=comps)
glue("fig_cka", fig, display=False)
plt.close(fig)
off = ~np.eye(len(ids), dtype=bool)
adjacent = np.array([C[i, i + 1] for i in range(len(ids) - 1)])
j = int(np.argmin(adjacent[:-1]))  # sharpest step between consecutive layers, last (normed) entry aside
glue("cka_min", float(C[off].min()), display=False)
a, b = np.unravel_index(int(np.argmin(np.where(off, C, np.inf))), C.shape)
glue("cka_min_pair", f"{ids[min(a, b)]} and {ids[max(a, b)]}", display=False)
glue("cka_adjacent_median", float(np.median(adjacent)), display=False)
glue("sharpest_from", int(ids[j]), display=False)
glue("sharpest_to", int(ids[j + 1]), display=False)
glue("sharpest_value", float(adjacent[j]), display=False)
glue("cka_first_last", float(C[1, -2]), display=False)
glue("compartments_text", ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in comps), display=False)

# %% [markdown]
# The median CKA between consecutive layers is
# {glue:text}`cka_adjacent_median:.2f`; the least similar pair, layers
# {glue:text}`cka_min_pair`, has CKA {glue:text}`cka_min:.2f`. The first decoder output
# (index 1) and the last un-normed entry (index $N-1$) have CKA
# {glue:text}`cka_first_last:.2f`. The sharpest step between consecutive layers (last
# entry aside) is from layer {glue:text}`sharpest_from:d` to
# {glue:text}`sharpest_to:d`, CKA {glue:text}`sharpest_value:.2f`. The automatic
# segmentation splits the layers into {glue:text}`k_auto:d` compartments:
# {glue:text}`compartments_text`.
#
# ## How many compartments?
#
# The segmentation minimises the total scatter $W(k)$ of the layers around their
# compartment's centre ({eq}`eq-segmentation`; exact, by dynamic programming) for every
# $k$ up to {glue:text}`k_max:d`. $W$ always falls as $k$ grows, so $k$ is read off the
# curve. The default rule picks the $k$ after which the gain of one more compartment drops
# most, compared with the next gain; it keeps a small but distinct block (such as a lone
# final normed layer). The classic "elbow" (farthest point below the chord) tends to
# merge small blocks.

# %%
fig = plot_compartment_elbow(W, len(comps))
glue("fig_compartment_elbow", fig, display=False)
plt.close(fig)
gains = -np.diff(W)
glue("W1", float(W[0]), display=False)
glue("W_auto", float(W[len(comps) - 1]), display=False)
glue("explained_auto", float(1 - W[len(comps) - 1] / W[0]), display=False)
glue("compartments_elbow_text", ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in comps_elbow), display=False)

# %% [markdown]
# ```{glue:figure} fig_compartment_elbow
# :name: fig-compartment-elbow
#
# Within-compartment scatter $W(k)$ of the best segmentation into $k$ contiguous
# compartments, and the automatic choice. The dotted chord is the reference of the
# elbow rule.
# ```
#
# With {glue:text}`k_auto:d` compartments the scatter falls from
# {glue:text}`W1:.2f` (one block) to {glue:text}`W_auto:.2f`, i.e. the compartments
# account for {glue:text}`explained_auto:.0%` of it. The elbow rule would choose
# {glue:text}`k_elbow:d` compartments ({glue:text}`compartments_elbow_text`).
#
# ## The compartments
#
# One row per compartment: its layers, how similar they are to each other and to the
# neighbouring compartments, their single-layer order-2 entropy (as in
# {doc}`01_layer_entropy`), and which of the EAGLE-3 default layers fall in it.

# %%
table = compartment_table(stats, comps, mark={"EAGLE-3 default": default} if default else None)
display(table.style.format({"mean CKA inside": "{:.2f}", "mean CKA to neighbours": "{:.2f}", "mean S2": "{:.2f}"},
                           na_rep="-").hide(axis="index"))
in_comp = [next(j for j, (a, b) in enumerate(comps) if a <= i <= b) for i in default]
glue("default_n_compartments", len(set(in_comp)), display=False)
glue("default_layers", str(default), display=False)
comps_k = segment_compartments(C, cfg.select.k, ids=ids)
glue("select_k", cfg.select.k, display=False)
glue("compartments_k_text", ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in comps_k), display=False)

# %% [markdown]
# The EAGLE-3 default {glue:text}`default_layers` reads from
# {glue:text}`default_n_compartments:d` different compartments. Forced into exactly
# {glue:text}`select_k:d` compartments (one per layer a drafter reads, the basis of the
# `cka-diverse` rule of {doc}`05_layer_selection`), the layers split as
# {glue:text}`compartments_k_text`.
#
# ## Plain or debiased CKA?
#
# The plain estimator of CKA is biased upwards when the number of tokens is not large
# compared with the width; the debiased estimator removes that bias
# ({ref}`sec-cka`). With {glue:text}`n_tokens:d` tokens and width
# {glue:text}`hidden_size:d` the two should be close, and the figure checks it.

# %%
comps_d = segment_compartments(Cd, ids=ids, k_max=k_max)
fig = plot_cka_grid(ids, {"plain CKA": C, "debiased CKA": Cd}, compartments={"plain CKA": comps, "debiased CKA": comps_d})
glue("fig_cka_debiased", fig, display=False)
plt.close(fig)
diff = (C - Cd)[off]
glue("hidden_size", cap.target.hidden_size, display=False)
glue("debias_mean", float(diff.mean()), display=False)
glue("debias_max", float(np.abs(diff).max()), display=False)
glue("debias_same", "the same" if comps_d == comps else "different", display=False)
glue("compartments_d_text", ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in comps_d), display=False)

# %% [markdown]
# ```{glue:figure} fig_cka_debiased
# :name: fig-cka-debiased
#
# Plain (left) and debiased (right) linear CKA on the same tokens, each with its own
# automatic compartments.
# ```
#
# Plain CKA exceeds debiased CKA by {glue:text}`debias_mean:.3f` on average over pairs
# of layers (largest absolute difference {glue:text}`debias_max:.3f`), and the
# automatic segmentation of the debiased map gives {glue:text}`debias_same` compartments
# ({glue:text}`compartments_d_text`). CKA without row normalisation is dominated by the
# tokens with the largest hidden states; whether a few outlier tokens draw these
# compartments is checked in {doc}`04_token_filtering`.

# %%
_ = save_results("03_cka_compartments", {
    "ids": ids, "n_tokens": int(H.shape[1]), "cka": C, "cka_debiased": Cd, "W": W,
    "compartments": comps, "compartments_elbow": comps_elbow, "compartments_debiased": comps_d,
    "compartments_k": comps_k, "table": table.to_dict("records"),
}, cfg, results_root or None)
