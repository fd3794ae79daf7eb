# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Which layers should an EAGLE-3 drafter read?

# %% tags=["parameters", "remove-cell"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["remove-cell"]
from activation_wave.plots import plot_key_figure
from activation_wave.study.chapters import landing
from activation_wave.study.glue import glue_fields, glue_figure
from activation_wave.study.steps import open_chapter

cfg, _ = open_chapter(profile, model, overrides, capture=False)
k, R = landing.run(cfg, results_root or None)  # values only: activation_wave/study/chapters/landing.py
glue_fields(k)
tri = landing.ranked_triples(R)
glue_figure("fig_key", plot_key_figure(R.cka.ids, landing.key_sets(R), [r.set for r in tri], [r.tau for r in tri],
                                       [r.lo for r in tri], [r.hi for r in tri], compartments=R.cka.compartments,
                                       entropy=R.entropy.dataset.mean,
                                       xlabel="mean accepted length per target pass (tau)"))

# %% [markdown]
# :::{admonition} The answer, on {glue:text}`model` ($N$ = {glue:text}`n_layers` blocks)
# :class: tip
#
# 1. **Which layers?** Read {glue:text}`answer_layers`. The test that the best rule's set
#    drafts better than the default {glue:text}`default_layers` is {glue:text}`h1_verdict`.
# 2. **Do entropy and CKA predict $\tau$?** Their correlation is {glue:text}`h2`.
# 3. **Does EAGLE-3 pay on a CPU?** In llama.cpp ({glue:text}`large_model`):
#    {glue:text}`large_eagle3_ratio:.2f`x plain decoding ({glue:text}`large_eagle3_side`);
#    n-gram lookup: {glue:text}`large_ngram_ratio:.2f`x ({glue:text}`large_ngram_side`).
# :::
#
# ::::{container} how-sure
#
# | how sure | result [95% interval] | n | test | verdict |
# |---|---|---|---|---|
# | best rule vs default, $\Delta\tau$ | {glue:text}`h1_delta:+.3f` [{glue:text}`h1_lo:+.3f`, {glue:text}`h1_hi:+.3f`] | {glue:text}`h1_n` | paired, Holm p {glue:text}`h1_p:.2g` | {glue:text}`h1_verdict` |
# | same, 16x training prompts | {glue:text}`scale_delta:+.3f` [{glue:text}`scale_lo:+.3f`, {glue:text}`scale_hi:+.3f`] | {glue:text}`scale_n` | paired, Holm p {glue:text}`scale_p:.2g` | {glue:text}`scale_verdict` |
# | same, {glue:text}`second_model` | {glue:text}`g1_delta:+.3f` [{glue:text}`g1_lo:+.3f`, {glue:text}`g1_hi:+.3f`] | {glue:text}`g1_n` | paired, p {glue:text}`g1_p:.2g` | {glue:text}`g1_verdict` |
# | entropy vs $\tau$, Spearman $\rho$ | {glue:text}`rho:+.2f` [{glue:text}`rho_lo:+.2f`, {glue:text}`rho_hi:+.2f`] | {glue:text}`n_triples` sets | bootstrap | {glue:text}`h2` |
# | speedup, the study's loop | {glue:text}`loop_ratio:.2f`x [{glue:text}`loop_lo:.2f`, {glue:text}`loop_hi:.2f`] | {glue:text}`loop_n` | bootstrap | {glue:text}`loop_side` |
# | speedup, llama.cpp | {glue:text}`large_eagle3_ratio:.2f`x [{glue:text}`large_eagle3_lo:.2f`, {glue:text}`large_eagle3_hi:.2f`] | {glue:text}`large_eagle3_n` | bootstrap | {glue:text}`large_eagle3_side` |
# ::::
#
# EAGLE-3 drafters {cite:p}`li2025eagle3` read three of the target's layers, by default
# $[2, N/\!/2, N-3]$; *Surfing the Activation Wave* {cite:p}`activationwave2026` picks
# them by matrix entropy and CKA. Does that give better drafters?
#
# Every comparison in the table was fixed before its drafters were trained; n counts the
# held-out prompts (for $\rho$, the layer triples), and drafters are compared paired over
# the same prompts, with 95% bootstrap intervals. *Within noise*: the interval covers no
# effect. n-gram lookup in the same llama.cpp run: {glue:text}`large_ngram_ratio:.2f`x
# [{glue:text}`large_ngram_lo:.2f`, {glue:text}`large_ngram_hi:.2f`], {glue:text}`large_eagle3_n`
# prompts ({glue:text}`large_ngram_side`).
#
# ```{glue:figure} fig_key
# :name: fig-key
#
# Left: the layer triples the selection rules pick on {glue:text}`model`, over its CKA
# compartments (shaded) and its layer entropy (line). Right: the mean accepted length
# $\tau$ of drafters trained on each triple under one budget, mean over the held-out
# prompts, with 95% bootstrap intervals over prompts, highest first. These marginal
# intervals overlap; the paired comparisons in the table above separate the triples.
# ```
#
# ## Why
#
# On {glue:text}`model` the paper's measures describe the hidden states, but they are a
# weak guide to drafters. Much of the "activation wave" in layer entropy comes from one
# token: the first position of every sequence reaches {glue:text}`sink_ratio:.0f` times the
# median token's norm, and the entropy dip at layer {glue:text}`cliff_layer` is its shadow
# ({doc}`04_token_filtering`). The drafters are weak on a CPU budget: online $\tau$
# {glue:text}`loop_tau:.2f` in the study's loop, against 6 to 7 for EAGLE-3 on an 8B target
# on a GPU {cite:p}`li2025eagle3`. At that strength the layer choice moves $\tau$ by a few
# hundredths. A round of speculation costs several plain steps on a CPU, so EAGLE-3 needs a
# much stronger drafter to pay there, while n-gram lookup costs almost nothing to draft.
#
# ## How to read this book
#
# {doc}`../background` defines the measures. **Part I** measures the layers: the data,
# entropy over depth, concatenations, CKA compartments, token filtering and the selection
# rules. **Part II** trains drafters on the chosen layers and asks whether the measures
# pick better ones, then whether the answer changes with stronger drafters and on two
# other architectures. **Part III** asks what a speculative round costs on a CPU and when
# it pays. {doc}`08_results_summary` lists every pre-registered hypothesis with its
# verdict; the {doc}`lab record <../lab/index>` keeps how each was tested.
#
# **Try it.** `bash scripts/study.sh smoke` runs every chapter on the smoke profile in
# minutes; {doc}`../rerun` reruns one chapter on another model and {doc}`../classroom`
# is a 90-minute class built on these pages.
