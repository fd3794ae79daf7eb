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
# # Two architectures side by side
#
# Are the shapes seen on SmolLM2 properties of that one model, or of small decoder-only
# language models? This chapter runs the same statistics and the same selection methods
# on a second architecture, Gemma-3-270M {cite:p}`gemmateam2025gemma3` (18 blocks, width
# 640, a 262k vocabulary), on a smaller prompt set (the profile's `cross` section), and
# puts the two models next to each other. Depth is compared as *relative* depth,
# layer index divided by $N$.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
from IPython.display import display

from activation_wave.book import glue_figure, glue_values
from activation_wave.chapters import cross_model as ch
from activation_wave.pipeline import open_chapter
from activation_wave.plots import plot_cka, plot_entropy_relative_depth, plot_selection_map
from activation_wave.results import save_result
from activation_wave.tables import format_table

cfg, _ = open_chapter(profile, model, overrides, capture=False)
r = ch.run(cfg)  # both models' statistics and selections: activation_wave/chapters/cross_model.py
_ = save_result("07_cross_model", r, cfg, results_root or None)

# %% [markdown]
# ## Entropy across relative depth

# %% tags=["remove-input"]
glue_figure("fig_cross_entropy", plot_entropy_relative_depth(r.summaries))

# %% [markdown]
# ```{glue:figure} fig_cross_entropy
# :name: fig-cross-entropy
#
# Matrix entropy ({ref}`sec-matrix-entropy`) of each layer's hidden states over
# next-token-entropy-filtered response positions, divided by its maximum
# $\log\min(n, d)$, against relative depth, for both models. Crosses mark the EAGLE-3
# default layers $[2, N/\!/2, N-3]$.
# ```
#
# ## Similarity structure

# %% tags=["remove-input"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
for ax, s in zip(axes, r.summaries):
    plot_cka(s.ids, s.cka, compartments=s.compartments, ax=ax, title=f"{s.model}: {len(s.compartments)} compartments")
glue_figure("fig_cross_cka", fig)

# %% [markdown]
# ```{glue:figure} fig_cross_cka
# :name: fig-cross-cka
#
# Linear {term}`CKA` between every pair of layer indices, with the automatically chosen
# contiguous compartments outlined ({ref}`sec-compartments`), for each model.
# ```
#
# ## Which layers each method picks

# %% tags=["remove-input"]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
for ax, s in zip(axes, r.summaries):
    shown = {**s.sets, **({"eagle3-default": s.default} if s.default else {})}
    plot_selection_map(s.ids, shown, compartments=s.compartments, entropy=s.entropy, ax=ax, title=s.model)
glue_figure("fig_cross_selection", fig)
display(format_table(ch.percentile_table(r), {"S2 percentile among all sets": "{:.1f}"}))
for s, tag in zip(r.summaries, ("a", "b")):
    glue_values(**{f"cross_model_{tag}": s.model, f"cross_ncomp_{tag}": len(s.compartments),
                   f"cross_default_pct_{tag}": s.percentile.get("eagle3-default", float("nan"))})

# %% [markdown]
# ```{glue:figure} fig_cross_selection
# :name: fig-cross-selection
#
# The layer triples each selection method picks on each model, over the compartment
# map (shaded); the line is the layer entropy.
# ```
#
# On {glue:text}`cross_model_a` the CKA map splits into {glue:text}`cross_ncomp_a:d`
# compartments and on {glue:text}`cross_model_b` into {glue:text}`cross_ncomp_b:d`. The
# EAGLE-3 default triple's concatenation entropy ($S_2$) is above
# {glue:text}`cross_default_pct_a:.0f`% of all triples on the first model and above
# {glue:text}`cross_default_pct_b:.0f`% on the second.
