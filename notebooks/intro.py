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
from activation_wave.study import findings
from activation_wave.study.chapters import landing
from activation_wave.study.glue import glue_fields, glue_figure, glue_values
from activation_wave.study.steps import open_chapter

cfg, _ = open_chapter(profile, model, overrides, capture=False)
F = findings.record(cfg, results_root or None)  # one record per registered test: data/findings/registry.yaml
k, R = landing.run(cfg, results_root or None)  # values only: activation_wave/study/chapters/landing.py
glue_fields(k)
findings.glue(F, findings.headline(F))
held = findings.default_held(F)  # the layer test on every model and budget (the registry's layer_test)
glue_values(**{f"lt_{k}": held[k] for k in ("tests", "models", "held", "beaten", "not_testable", "beaten_on")})
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
#    drafts better than the default {glue:text}`default_layers` (H1) is {glue:text}`f_h1_label`.
#    The same question was registered {glue:text}`lt_tests` times, on {glue:text}`lt_models`
#    models and several training budgets: a rule's set beat the default in
#    {glue:text}`lt_beaten` (on {glue:text}`lt_beaten_on`), the default held in {glue:text}`lt_held`,
#    and {glue:text}`lt_not_testable` could not be tested ({ref}`each model and budget <sec-layer-tests>`).
# 2. **Do entropy and CKA predict $\tau$?** Their correlation (H2) is {glue:text}`f_h2_label`.
# 3. **Does EAGLE-3 pay on a CPU?** In llama.cpp ({glue:text}`large_model`), EAGLE-3 runs at
#    {glue:text}`f_c1_value` the speed of plain decoding (C1: {glue:text}`f_c1_label`).
# :::
#
# ::::{container} how-sure
#
# | how sure | result [95% interval] | n | test | verdict |
# |---|---|---|---|---|
# | best rule vs default, $\Delta\tau$ (default's $\tau$ {glue:text}`f_h1_base`) | {glue:text}`f_h1_value` {glue:text}`f_h1_interval` | {glue:text}`f_h1_n` | H1, Holm p {glue:text}`f_h1_p` | {glue:text}`f_h1_label` |
# | same, 16x training prompts (default {glue:text}`f_scale_base`) | {glue:text}`f_scale_value` {glue:text}`f_scale_interval` | {glue:text}`f_scale_n` | {glue:text}`f_scale_key`, Holm p {glue:text}`f_scale_p` | {glue:text}`f_scale_label` |
# | same, {glue:text}`large_model`, 3 seeds (default {glue:text}`f_c2_base`) | {glue:text}`f_c2_value` {glue:text}`f_c2_interval` | {glue:text}`f_c2_n` | C2, Holm p {glue:text}`f_c2_p` | {glue:text}`f_c2_label` |
# | entropy vs $\tau$, Spearman $\rho$ | {glue:text}`f_h2_value` {glue:text}`f_h2_interval` | {glue:text}`f_h2_n` | H2, bootstrap | {glue:text}`f_h2_label` |
# | EAGLE-3 speedup, llama.cpp, 1.5B | {glue:text}`f_c1_value` {glue:text}`f_c1_interval` | {glue:text}`f_c1_n` | C1, bootstrap | {glue:text}`f_c1_label` |
# | EAGLE-3 speedup, the study's loop, 135M | {glue:text}`loop_ratio:.2f`x [{glue:text}`loop_lo:.2f`, {glue:text}`loop_hi:.2f`] | {glue:text}`loop_n` prompts | measurement | {glue:text}`loop_side` |
# ::::
#
# EAGLE-3 drafters {cite:p}`li2025eagle3` read three of the target's layers, by default
# $[2, N/\!/2, N-3]$; *Surfing the Activation Wave* {cite:p}`activationwave2026` picks
# them by matrix entropy and CKA. Does that give better drafters?
#
# Each row named by a test id was fixed before its drafters were trained; the
# {doc}`lab record <../lab/index>` keeps each registration. The last row is a measurement
# of the decoding benchmark, not a registered test. n counts held-out prompts (for
# $\rho$, layer triples); drafters are compared paired over the same prompts, with 95%
# bootstrap intervals. *Within noise* means the interval includes zero effect (a difference
# of 0, a speedup of 1); {doc}`../background` defines every verdict word. n-gram lookup in
# the same llama.cpp run, against the plain server with its default flags:
# {glue:text}`large_ngram_ratio:.2f`x [{glue:text}`large_ngram_lo:.2f`,
# {glue:text}`large_ngram_hi:.2f`], {glue:text}`large_ngram_n` prompts
# ({glue:text}`large_ngram_side`; a measurement).
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
# {glue:text}`loop_tau:.2f` in the study's loop, against 6.1 to 6.7 for EAGLE-3 on
# LLaMA-3.1-8B-Instruct at $T=0$ on a GPU {cite:p}`li2025eagle3`. At that strength the layer choice moves $\tau$ by a few
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
# **Try it.** `bash scripts/study.sh smoke` runs every chapter on the smoke profile and builds
# the book (CI runs it) in about half an hour on two idle cores; {doc}`../rerun` reruns one
# chapter on another model and {doc}`../classroom`
# is a 90-minute class built on these pages.
