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
# # Surfing the Activation Wave, reproduced
#
# An EAGLE-3 draft model {cite:p}`li2025eagle3` guesses the next few tokens of a large
# *target* model from the target's own hidden states, which the target then verifies in
# one forward pass. By default the drafter reads three layers, $[2, N/\!/2, N-3]$.
# *Surfing the Activation Wave* {cite:p}`activationwave2026` asks which layers it should
# read, and answers with two criteria measured on the hidden states: how much
# information a set of layers carries (matrix entropy, alone and concatenated) and how
# different the layers are from each other (CKA, whose heat map falls into
# "compartments"), after filtering out tokens whose next token is easy to predict.
#
# This book re-derives that method from the paper's abstract and the works it builds
# on, runs it on small language models on a laptop CPU, and then checks it where it
# matters: by training drafters on the selected layers and decoding with them.

# %% tags=["parameters", "remove-cell"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["remove-cell"]
import matplotlib.pyplot as plt
import numpy as np
from myst_nb import glue
from scipy.stats import spearmanr

from activation_wave.pipeline import load_results, notebook_config
from activation_wave.plots import plot_selection_map, plot_tau

cfg = notebook_config(profile, model, overrides)
r0 = load_results("00_data_and_capture", cfg, results_root or None)
r1 = load_results("01_layer_entropy", cfg, results_root or None)
r3 = load_results("03_cka_compartments", cfg, results_root or None)
r4 = load_results("04_token_filtering", cfg, results_root or None)
r5 = load_results("05_layer_selection", cfg, results_root or None)
r6 = load_results("06_eagle3_speedup", cfg, results_root or None)

glue("model_name", cfg.model, display=False)
glue("n_layers", r0["info"]["decoder blocks N"], display=False)
glue("n_prompts", r0["summary"]["records"], display=False)
glue("n_positions", r0["summary"]["response_positions"], display=False)
sink = r4["sink"]
allpos = sink["conditions"]["all tokens (mean centring)"]["entropy"]
cliff = int(np.argmin(allpos[1:])) + 1
glue("sink_ratio", float(max(sink["first_norm_ratio"])), display=False)
glue("cliff_layer", cliff, display=False)
glue("cliff_entropy", float(allpos[cliff]), display=False)
nosink = sink["conditions"].get("without the first position", {}).get("entropy", allpos)
glue("cliff_entropy_fixed", float(nosink[cliff]), display=False)
default = r5["default"]
glue("default_layers", str(default["layers"]), display=False)
glue("default_pct", float(default["scores"]["percentile"]), display=False)
glue("exhaustive_layers", str(r5["sets"]["exhaustive"]), display=False)
best, dflt = r6["best"], r6["default"]
glue("tau_default", dflt["tau"], display=False)
glue("tau_best", best["tau"], display=False)
glue("best_set", f"{best['set']} {best['layers']}", display=False)
glue("rho_renyi2", r6["spearman"]["renyi2 (triples)"], display=False)
tri6 = [r for r in r6["summary"] if r["k"] == 3]
glue("rho_deepest", float(spearmanr([max(r["layers"]) for r in tri6], [r["tau"] for r in tri6]).statistic), display=False)
glue("n_drafters", len(r6["runs"]), display=False)
glue("n_seeds", max(r["n_seeds"] for r in r6["summary"]), display=False)
on = r6["online"]
glue("speedup_default", on["eagle3-default"]["speedup_vs_plain_t0"], display=False)
glue("speedup_best", max(v["speedup_vs_plain_t0"] for v in on.values()), display=False)
lossless = all(v["lossless_prompts"] == v["n_prompts"] for v in on.values())
glue("lossless_word", "exactly" if lossless else "not always", display=False)

# %% tags=["remove-cell"]
tri = sorted((r for r in r6["summary"] if r["k"] == 3), key=lambda r: -r["tau"])
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained", gridspec_kw={"width_ratios": [1.2, 1]})
sets = {m: r5["sets"][m] for m in ("exhaustive", "entropy-greedy", "combined", "cka-diverse", "eagle3-default", "last-k")
        if m in r5["sets"]}
plot_selection_map(r3["ids"], sets, compartments=[tuple(c) for c in r3["compartments"]],
                   entropy=r1["dataset"]["mean"], ax=axes[0], title="Which layers each rule picks")
plot_tau([r["set"] for r in tri], [r["tau"] for r in tri], [r["tau_lo"] for r in tri], [r["tau_hi"] for r in tri],
         ax=axes[1], title="Drafters reading those layers")
glue("fig_key", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_key
# :name: fig-key
#
# Left: the layer triples that the selection rules of chapter 5 pick on
# {glue:text}`model_name` ($N$ = {glue:text}`n_layers` blocks), over its CKA
# compartments (shaded) and its layer entropy (line). Right: the mean accepted length
# {term}`tau` of drafters trained on each triple under one budget, with 95% intervals
# (chapter 6).
# ```
#
# ## What we found
#
# On {glue:text}`model_name`, over {glue:text}`n_prompts` prompts and
# {glue:text}`n_positions` response positions:
#
# - **The "wave" is an outlier artefact here.** Over all sequence positions, layer
#   entropy collapses at layer {glue:text}`cliff_layer` (to
#   {glue:text}`cliff_entropy:.2f` nats) and climbs back. The first token of every
#   sequence reaches {glue:text}`sink_ratio:.0f`x the median token norm in those layers
#   (an attention sink with massive activations); without it, layer
#   {glue:text}`cliff_layer` is at {glue:text}`cliff_entropy_fixed:.2f` nats and the
#   cliff is gone (chapter 4).
# - **Selection.** The EAGLE-3 default {glue:text}`default_layers` scores above
#   {glue:text}`default_pct:.0f`% of all triples in concatenation entropy; the exact
#   entropy maximiser is {glue:text}`exhaustive_layers` (chapter 5).
# - **Drafters: selection does not pay off here.** Over {glue:text}`n_drafters:d`
#   drafters ({glue:text}`n_seeds:d` seeds per layer set, one budget), the default's reaches
#   $\tau$ = {glue:text}`tau_default:.3f`, the best triple, {glue:text}`best_set`,
#   {glue:text}`tau_best:.3f`, within each other's intervals, and the sets the entropy
#   rules pick are among the worst. Across triples, Spearman's $\rho$ between
#   concatenation entropy and $\tau$ is {glue:text}`rho_renyi2:.2f`; between a triple's
#   deepest layer and $\tau$ it is {glue:text}`rho_deepest:.2f`. On this model entropy
#   rises towards the last layers, and drafters reading those layers do worse
#   (chapters 6 and 8).
# - **Speed on a 2-core CPU.** Speculative decoding reproduced greedy decoding
#   {glue:text}`lossless_word`; its wall-time speedup over plain decoding was
#   {glue:text}`speedup_default:.2f`x with the default drafter and at best
#   {glue:text}`speedup_best:.2f`x. With drafters trained on tens of thousands of
#   tokens, $\tau$ stays far below the paper-scale figures, and the chapters say why.
#
# ## How to read this book
#
# {doc}`../background` sets out the mathematics. Chapters 0-6 follow the pipeline
# (data, entropy, concatenation, CKA, filtering, selection, drafters); the "Second
# architecture" pages rerun chapters 1-4 on Gemma-3-270M, chapter 7 compares the two
# architectures side by side, chapter 8 collects the numbers and chapter 9
# measures the code. {doc}`../rerun` shows how to rerun everything, or one chapter on
# another model; {doc}`../classroom` is a 60-90 minute session plan.
