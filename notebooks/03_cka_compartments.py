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
# # Which layers are alike?
#
# ```{admonition} Answer
# :class: tip
#
# The median CKA between neighbouring layers is {glue:text}`cka_adjacent_median:.2f`, and
# the map falls into {glue:text}`k_auto_text`: {glue:text}`compartments_text`. The
# EAGLE-3 default {glue:text}`default_layers` puts its layers in
# {glue:text}`default_compartments_text`. Debiased CKA draws {glue:text}`debias_same`
# compartments.
# ```
#
# The paper's second criterion is *diversity*: a drafter that reads two nearly identical
# layers reads the same information twice. This chapter measures similarity between
# every pair of layers with linear {term}`CKA` {cite:p}`kornblith2019cka`, finds the
# {term}`compartment`s (runs of consecutive, mutually similar layers) by an exact
# contiguous segmentation ({ref}`sec-compartments`), and checks how much the plain CKA
# estimator's bias matters by comparing it with {term}`debiased CKA`
# {cite:p}`song2012hsic`.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from IPython.display import display

from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import cka_compartments as ch
from activation_wave.study.steps import open_chapter
from activation_wave.plots import plot_cka, plot_cka_grid, plot_compartment_elbow
from activation_wave.core.results import save_result
from activation_wave.core.tables import format_table

cfg, cap = open_chapter(profile, model, overrides)

# %% [markdown]
# ## The CKA map
#
# ```{glue:figure} fig_cka
# :name: fig-cka
#
# Linear CKA between every pair of layer indices over {glue:text}`n_tokens:d` response
# positions, with the automatic compartments ({glue:text}`k_auto_text`) outlined in white.
# ```

# %%
r = ch.run(cfg, cap)  # CKA, its compartments and the debiased estimator: activation_wave/study/chapters/cka_compartments.py
_ = save_result("03_cka_compartments", r, cfg, results_root or None)
glue_values(**ch.prose_values(r))
glue_figure("fig_cka", plot_cka(r.ids, r.cka, compartments=r.compartments))

# %% [markdown]
# The median CKA between consecutive layers is
# {glue:text}`cka_adjacent_median:.2f`; the least similar pair, layers
# {glue:text}`cka_min_pair`, has CKA {glue:text}`cka_min:.2f`. The first decoder output
# (index 1) and the last block's output (index $N$, before the final norm) have CKA
# {glue:text}`cka_first_last:.2f`. The sharpest step between consecutive layers is from layer {glue:text}`sharpest_from:d` to
# {glue:text}`sharpest_to:d`, CKA {glue:text}`sharpest_value:.2f`. The automatic
# segmentation groups the layers into {glue:text}`k_auto_text`:
# {glue:text}`compartments_text`.
#
# Read the compartments with care. Plain CKA weighs every token by its norm, so a few
# tokens with very large hidden states can move them: {doc}`04_token_filtering`
# recomputes the compartments without the highest-norm response tokens and with every
# token weighted alike, and gives the boundaries for this run. A compartment boundary is a
# property of this sample and estimator, not yet of the model.
#
# ## How many compartments?
#
# The segmentation minimises the total scatter $W(k)$ of the layers around their
# compartment's centre ({eq}`eq-segmentation`; exact, by dynamic programming) for every
# $k$ up to {glue:text}`k_max:d`. $W$ always falls as $k$ grows, so $k$ is read off the
# curve. The default rule picks the $k$ after which the gain of one more compartment drops
# most, compared with the next gain; it keeps a small but distinct block (such as a lone
# last layer). The classic "elbow" (farthest point below the chord) tends to
# merge small blocks.

# %% tags=["remove-input"]
glue_figure("fig_compartment_elbow", plot_compartment_elbow(r.W, len(r.compartments)))

# %% [markdown]
# ```{glue:figure} fig_compartment_elbow
# :name: fig-compartment-elbow
#
# Within-compartment scatter $W(k)$ of the best segmentation into $k$ contiguous
# compartments, and the automatic choice. The dotted chord is the reference of the
# elbow rule.
# ```
#
# The scatter is {glue:text}`W1:.2f` for one block and {glue:text}`W_auto:.2f` for the
# automatic choice of {glue:text}`k_auto_text`, which thus accounts for
# {glue:text}`explained_auto:.0%` of it. The elbow rule would choose
# {glue:text}`k_elbow_text` ({glue:text}`compartments_elbow_text`).
#
# ## The compartments
#
# One row per compartment: its layers, how similar they are to each other and to the
# neighbouring compartments, their single-layer order-2 entropy (as in
# {doc}`01_layer_entropy`), and which of the EAGLE-3 default layers fall in it.

# %% tags=["remove-input"]
display(format_table(ch.compartment_frame(r.table), {"mean CKA inside": "{:.2f}", "mean CKA to neighbours": "{:.2f}",
                                                     "mean S2": "{:.2f}"}))

# %% [markdown]
# The EAGLE-3 default {glue:text}`default_layers` puts its layers in
# {glue:text}`default_compartments_text`. Forced into exactly
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

# %% tags=["remove-input"]
glue_figure("fig_cka_debiased", plot_cka_grid(r.ids, {"plain CKA": r.cka, "debiased CKA": r.cka_debiased},
                                              compartments={"plain CKA": r.compartments,
                                                            "debiased CKA": r.compartments_debiased}))

# %% [markdown]
# ```{glue:figure} fig_cka_debiased
# :name: fig-cka-debiased
#
# Plain (left) and debiased (right) linear CKA on the same tokens, each with its own
# automatic compartments.
# ```
#
# Plain minus debiased CKA is {glue:text}`debias_mean:+.3f` on average over pairs of
# layers (largest absolute difference {glue:text}`debias_max:.3f`), and the
# automatic segmentation of the debiased map gives {glue:text}`debias_same` compartments
# ({glue:text}`compartments_d_text`). CKA without row normalisation is dominated by the
# tokens with the largest hidden states; whether a few outlier tokens draw these
# compartments is checked in {doc}`04_token_filtering`.

# %% [markdown]
# ## Try it
#
# `wave select --model smollm2-135m --profile smoke --json` prints the compartments of the smoke capture
# (`compartments`) next to each rule's set (`candidates`, with the compartment of each of its layers), in a
# few minutes; check whether the default's three layers fall in three of them (`default_compartments`).
