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
# # Two architectures side by side
#
# Are the shapes seen on SmolLM2 properties of that one model, or of small decoder-only
# language models? This chapter runs the same statistics and the same selection methods
# on a second architecture, Gemma-3-270M {cite:p}`gemmateam2025gemma3` (18 blocks, width
# 640, a 262k vocabulary), on a smaller prompt set (the profile's `cross` section), and
# puts the two models next to each other. Depth is compared as *relative* depth,
# layer index divided by $N$.

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import display
from myst_nb import glue

from activation_wave.crossmodel import cross_config, layer_summary
from activation_wave.pipeline import notebook_config, run_capture, save_results
from activation_wave.plots import plot_cka, plot_entropy_relative_depth, plot_selection_map

torch.set_num_threads(1)  # small eigenproblems: one thread is faster on a shared 2-core machine
cfg = notebook_config(profile, model, overrides)
configs = [cfg, cross_config(cfg)]
summaries = []
for c in configs:
    cap = run_capture(c, progress=False)
    print(cap.cache.summary())
    summaries.append(layer_summary(cap.cache, c))

# %% [markdown]
# ## Entropy across relative depth

# %%
fig = plot_entropy_relative_depth(summaries)
glue("fig_cross_entropy", fig, display=False)
plt.close(fig)

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

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
for ax, s in zip(axes, summaries):
    plot_cka(s["ids"], pd.DataFrame(s["cka"]).to_numpy(), compartments=[tuple(c) for c in s["compartments"]], ax=ax,
             title=f"{s['model']}: {len(s['compartments'])} compartments")
glue("fig_cross_cka", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_cross_cka
# :name: fig-cross-cka
#
# Linear {term}`CKA` between every pair of layer indices, with the automatically chosen
# contiguous compartments outlined ({ref}`sec-compartments`), for each model.
# ```
#
# ## Which layers each method picks

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
for ax, s in zip(axes, summaries):
    sel = dict(s["sets"])
    if s["default"]:
        sel["eagle3-default"] = s["default"]
    plot_selection_map(s["ids"], sel, compartments=[tuple(c) for c in s["compartments"]], entropy=s["entropy"],
                       ax=ax, title=s["model"])
glue("fig_cross_selection", fig, display=False)
plt.close(fig)

rows = []
for s in summaries:
    for method, ids in s["sets"].items():
        rows.append({"model": s["model"], "method": method, "layers": str(ids),
                     "S2 percentile among all triples": round(s["percentile"][method], 1)})
table = pd.DataFrame(rows)
display(table)
for s, tag in zip(summaries, ("a", "b")):
    glue(f"cross_model_{tag}", s["model"], display=False)
    glue(f"cross_ncomp_{tag}", len(s["compartments"]), display=False)
    glue(f"cross_default_pct_{tag}", float(s["percentile"].get("eagle3-default", float("nan"))), display=False)

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

# %%
_ = save_results("07_cross_model", {"summaries": summaries}, cfg, results_root or None)
