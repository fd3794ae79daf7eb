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
#
# An EAGLE-3 draft model {cite:p}`li2025eagle3` guesses the next few tokens of a large
# *target* model from the target's own hidden states; the target then checks the guesses
# in one forward pass. By default the drafter reads three layers, $[2, N/\!/2, N-3]$.
# *Surfing the Activation Wave* {cite:p}`activationwave2026` proposes to choose them by
# two measures of the hidden states: how much information the layers carry (matrix
# entropy) and how different they are from each other (CKA). This book rebuilds that
# method, runs it on small models on a laptop CPU, and then asks the question that
# matters: do drafters trained on the chosen layers draft better?

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
# ```{admonition} The answer, on {glue:text}`model` ($N$ = {glue:text}`n_layers` blocks)
# :class: tip
#
# 1. **Which layers?** Read {glue:text}`answer_layers`. The best selection rule's set,
#    {glue:text}`h1_set` {glue:text}`h1_layers`, against the default
#    {glue:text}`default_layers`: $\Delta\tau$ = {glue:text}`h1_delta:+.3f`
#    [{glue:text}`h1_lo:+.3f`, {glue:text}`h1_hi:+.3f`] over {glue:text}`h1_n` prompts
#    ({glue:text}`h1_verdict`). With 16 times the training prompts, the best rule's set
#    against the default is {glue:text}`scale_verdict`.
# 2. **Do entropy and CKA predict a drafter's quality?** Across {glue:text}`n_triples`
#    layer triples, Spearman's $\rho$ between concatenation entropy and $\tau$ is
#    {glue:text}`rho:+.2f` [{glue:text}`rho_lo:+.2f`, {glue:text}`rho_hi:+.2f`]:
#    {glue:text}`h2`.
# 3. **Does EAGLE-3 pay on a CPU?** In this study's loop it runs at
#    {glue:text}`loop_ratio:.2f`x plain decoding [{glue:text}`loop_lo:.2f`,
#    {glue:text}`loop_hi:.2f`] ({glue:text}`loop_side`). In llama.cpp with the
#    {glue:text}`large_model` target it runs at {glue:text}`large_eagle3_ratio:.2f`x
#    ({glue:text}`large_eagle3_side`), while n-gram lookup, which needs no drafter, runs at
#    {glue:text}`large_ngram_ratio:.2f`x ({glue:text}`large_ngram_side`).
# ```
#
# ```{glue:figure} fig_key
# :name: fig-key
#
# Left: the layer triples the selection rules pick on {glue:text}`model`, over its CKA
# compartments (shaded) and its layer entropy (line). Right: the mean accepted length
# $\tau$ of drafters trained on each triple under one budget, mean over the held-out
# prompts, with 95% bootstrap intervals over prompts, highest first. These marginal
# intervals overlap; the paired comparisons in the table below separate the triples.
# ```
#
# ## How sure
#
# Every row is a comparison fixed before its drafters were trained, on prompts the
# drafters never saw. Intervals are 95% bootstrap intervals; comparisons of drafters are
# paired over the same prompts. A verdict reads *within noise* when the interval covers
# no effect.
#
# | question | result | 95% interval | n | test | verdict |
# |---|---|---|---|---|---|
# | best rule's set vs the default, $\Delta\tau$ | {glue:text}`h1_delta:+.3f` | [{glue:text}`h1_lo:+.3f`, {glue:text}`h1_hi:+.3f`] | {glue:text}`h1_n` prompts | paired bootstrap, Holm p {glue:text}`h1_p:.2g` | {glue:text}`h1_verdict` |
# | the same with 16 times the training prompts | {glue:text}`scale_delta:+.3f` | [{glue:text}`scale_lo:+.3f`, {glue:text}`scale_hi:+.3f`] | {glue:text}`scale_n` prompts | paired bootstrap, Holm p {glue:text}`scale_p:.2g` | {glue:text}`scale_verdict` |
# | the same on {glue:text}`second_model` | {glue:text}`g1_delta:+.3f` | [{glue:text}`g1_lo:+.3f`, {glue:text}`g1_hi:+.3f`] | {glue:text}`g1_n` prompts | paired bootstrap, p {glue:text}`g1_p:.2g` | {glue:text}`g1_verdict` |
# | concatenation entropy predicts $\tau$, Spearman $\rho$ | {glue:text}`rho:+.2f` | [{glue:text}`rho_lo:+.2f`, {glue:text}`rho_hi:+.2f`] | {glue:text}`n_triples` triples | bootstrap over sets and prompts | {glue:text}`h2` |
# | EAGLE-3 speedup, this study's loop | {glue:text}`loop_ratio:.2f`x | [{glue:text}`loop_lo:.2f`, {glue:text}`loop_hi:.2f`] | {glue:text}`loop_n` prompts | bootstrap over prompts | {glue:text}`loop_side` |
# | EAGLE-3 and n-gram speedup, llama.cpp, {glue:text}`large_model` | {glue:text}`large_eagle3_ratio:.2f`x and {glue:text}`large_ngram_ratio:.2f`x | [{glue:text}`large_eagle3_lo:.2f`, {glue:text}`large_eagle3_hi:.2f`] and [{glue:text}`large_ngram_lo:.2f`, {glue:text}`large_ngram_hi:.2f`] | {glue:text}`large_eagle3_n` prompts | bootstrap over prompts | {glue:text}`large_eagle3_side` and {glue:text}`large_ngram_side` |
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
