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

# %% [markdown]
# (sec-cross-prereg)=
# ## Drafters on the second architecture: pre-registration
#
# Fixed on 2026-12-01, before any Gemma drafter was trained (issue 17, item 8); the commit
# that added this section is named where the results are evaluated. Known at that time:
# chapter 6's results on SmolLM2 (every rule's set below the default; tau of one layer
# rising with depth, rho = +0.81 over 30 layers) and this chapter's statistics and
# selections on Gemma (above). Nothing about Gemma's drafters was known.
#
# **Data.** Gemma-3-270M's own greedy responses to the default profile's 420 prompts (train
# split 324, eval split 96; up to 128 new tokens, the profile's `cross.drafter_*` settings),
# generated once with the PyTorch target and committed under `data/responses/`; no sampled
# responses. The drafters' recipe is chapter 6's (`draft` section: one epoch, 512-token
# batches, draft vocabulary 4,096, 3 unrolled steps).
#
# **Drafters.** One per block output $1..N$ ($N = 18$; the last is the pre-norm output of the
# last block), one seed each, on all the training data; the EAGLE-3 default
# $[2, N/\!/2, N-3] = [2, 9, 15]$ and the set chosen by the rule with the largest paired
# $\Delta\tau$ in chapter 6 (`combined`; on Gemma, {numref}`fig-cross-selection`:
# $[4, 12, 18]$), two seeds each. 22 drafters.
#
# **Outcome.** As chapter 6: offline $\tau$ of a chain draft at $T = 0$ on each eval prompt,
# at `spec.depth` and `spec.draft_threshold`, seeds averaged per prompt.
#
# - **G1** (chapter 6's H1 on Gemma): the best rule's set beats the default. *Primary test*: paired bootstrap over the eval prompts (10,000 resamples) of $\Delta\tau$ = rule set $-$ default; one test, no correction. *Supported when*: $\Delta\tau > 0$ with two-sided $p < 0.05$.
# - **G2** (depth): $\tau$ of a single-layer drafter rises with the layer's depth. *Primary test*: Spearman $\rho$(layer index, $\tau$) over the $N$ single layers, 95% bootstrap interval resampling layers and prompts. *Supported when*: the interval lies above 0.
# - **G3** (entropy): $\tau$ of a single-layer drafter rises with the layer's Renyi-2 matrix entropy (filtered statistics of this model's drafter capture, as chapter 6 scores single layers). *Primary test and rule*: as G2, with entropy in place of depth.
#
# **Secondary (not tests).** The relative depth at which $\tau$ peaks on each model;
# $\rho$(entropy, depth) over Gemma's layers, since G2 and G3 cannot be told apart when
# entropy and depth are collinear; the minimum detectable $\Delta\tau$ at 80% power for G1.
#
# **Budget.** The drafters within 45 minutes on 2 cores (the response generation, done
# once and committed, not counted). If they do not fit, the sweep takes every second layer
# before the triples lose a seed.
