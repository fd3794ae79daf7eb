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

from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import drafter_data_scale, drafter_recipe as recipe_page, drafter_strength, landing
from activation_wave.study.hypotheses import VERDICT_WORD
from activation_wave.study.steps import open_chapter
from activation_wave.plots import plot_key_figure

cfg, _ = open_chapter(profile, model, overrides, capture=False)
k, R = landing.run(cfg, results_root or None)  # the key numbers: activation_wave/study/chapters/landing.py
glue_values(model_name=k.model, n_layers=k.n_layers, n_prompts=k.n_prompts, n_positions=k.n_positions,
            sink_ratio=k.sink_ratio, cliff_layer=k.cliff_layer, cliff_entropy=k.cliff_entropy,
            cliff_entropy_fixed=k.cliff_entropy_without_first, default_layers=str(k.default_layers),
            default_pct=k.default_percentile, exhaustive_layers=str(k.exhaustive_layers), tau_default=k.tau_default,
            tau_default_lo=k.tau_default_lo, tau_default_hi=k.tau_default_hi, ranking=k.ranking,
            rho_renyi2=k.rho_renyi2, rho_deepest=k.rho_deepest,
            n_drafters=k.n_drafters, n_seeds=k.n_seeds, n_triples=k.n_triples, h1_text=k.h1,
            h1_word=VERDICT_WORD[k.h1_supported], second_model=k.second_model, g1_text=k.g1,
            g1_word=VERDICT_WORD[k.g1_supported], g2_text=k.g2, g2_word=VERDICT_WORD[k.g2_supported],
            speedup_default=k.speedup_default, speedup_best=k.speedup_best,
            bench_speedup=k.bench_speedup, bench_tau=k.bench_tau, cpu_text=k.cpu_text,
            lossless_word="exactly" if k.lossless else "not always")
from activation_wave.core.results import load_benchmarks, load_optional

scale_doc = load_optional(drafter_data_scale.NAME, cfg, results_root or None)
glue_values(scale_answer=drafter_data_scale.answer_text(scale_doc) if scale_doc else drafter_data_scale.NOT_RUN,
            scale_curve=drafter_data_scale.curve_text(scale_doc) if scale_doc else "")
glue_values(strength_answer=drafter_strength.answer_text(R.strength),
            strength_change=drafter_strength.change_text(R.strength))
recipe_doc = load_optional("recipe", cfg, results_root or None)
glue_values(recipe_headline=recipe_page.screen_headline(cfg, results_root or None),
            recipe_reach=recipe_page.reach_text(load_benchmarks(), recipe_doc))
tri = landing.ranked_triples(R)
glue_figure("fig_key", plot_key_figure(R.cka.ids, landing.key_sets(R), [r.set for r in tri], [r.tau for r in tri],
                                       [r.lo for r in tri], [r.hi for r in tri], compartments=R.cka.compartments,
                                       entropy=R.entropy.dataset.mean,
                                       xlabel="tau, mean over eval prompts (pre-registered outcome)"))

# %% [markdown]
# ```{glue:figure} fig_key
# :name: fig-key
#
# Left: the layer triples that the selection rules of chapter 5 pick on
# {glue:text}`model_name` ($N$ = {glue:text}`n_layers` blocks), over its CKA
# compartments (shaded) and its layer entropy (line). Right: the mean accepted length
# {term}`tau` of drafters trained on each triple under one budget, on chapter 6's
# pre-registered outcome (offline, at the online runs' depth and draft threshold, mean
# over the eval prompts of the seed-averaged per-prompt $\tau$), with 95% bootstrap
# intervals over prompts, highest first. These marginal intervals overlap; only the paired
# comparisons of chapter 6 can separate the triples.
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
# - **Drafters.** Over {glue:text}`n_drafters:d` drafters trained under one budget, in
#   a design fixed before they were trained (chapter 6), the default's drafters reach
#   $\tau$ = {glue:text}`tau_default:.3f` (95% interval {glue:text}`tau_default_lo:.3f` to
#   {glue:text}`tau_default_hi:.3f` over the eval prompts) on the pre-registered outcome;
#   {glue:text}`ranking`. The primary test, whether the best selection rule's set
#   beats the default (paired over the eval prompts, Holm-corrected), finds
#   {glue:text}`h1_text`: the hypothesis is {glue:text}`h1_word`. Across the triples,
#   Spearman's $\rho$ between concatenation entropy and $\tau$ is {glue:text}`rho_renyi2`;
#   between a triple's deepest layer and $\tau$ it is {glue:text}`rho_deepest` (95%
#   bootstrap intervals over triples and prompts).
# - **Does the answer hold for stronger drafters?** The same layer sets retrained at a
#   stronger budget ({doc}`06b_drafter_strength`, pre-registered: H5, H6).
#   {glue:text}`strength_answer` Against the one-epoch answer: {glue:text}`strength_change`.
# - **A second architecture.** The same test on {glue:text}`second_model`'s own drafters,
#   pre-registered in chapter 7 (the best rule's set against the default): {glue:text}`g1_text`,
#   {glue:text}`g1_word`. Whether a drafter reading one layer gets better with that
#   layer's depth there too (G2): {glue:text}`g2_text`, {glue:text}`g2_word`.
# - **Speed on a 2-core CPU.** Speculative decoding reproduced greedy decoding
#   {glue:text}`lossless_word`. With chapter 6's drafters (one epoch on the greedy
#   and one sampled response per prompt) its wall-time speedup over plain decoding was
#   {glue:text}`speedup_default:.2f`x with the default drafter and at best
#   {glue:text}`speedup_best:.2f`x on its few held-out prompts. The decoding benchmark of chapter 9,
#   whose drafter also trains on sampled responses, measures
#   {glue:text}`bench_speedup:.2f`x at $\tau$ = {glue:text}`bench_tau:.2f`, pooled over
#   its interleaved rounds. $\tau$ stays far below the paper-scale figures, and the
#   chapters say why.
# - **Stronger drafters.** In the pre-registered recipe screen of
#   {doc}`10_drafter_recipe`, {glue:text}`recipe_headline`. So far {glue:text}`recipe_reach`.
# - **Thousands of distinct prompts** ({doc}`06c_data_scale`, pre-registered: H7). The
#   layer answer for drafters trained on 16 times the distinct prompts:
#   {glue:text}`scale_answer` {glue:text}`scale_curve`
# - **Where EAGLE-3 pays on a CPU.** At 135M parameters a speculative round costs more
#   plain steps in llama.cpp than any of these drafters can win back. With the third
#   architecture's 1.5B target and its own drafters (chapter 11):
#   {glue:text}`cpu_text`.
#
# ## How to read this book
#
# {doc}`../background` sets out the mathematics. Chapters 0-6 follow the pipeline
# (data, entropy, concatenation, CKA, filtering, selection, drafters), and the page after
# chapter 6 retrains its drafters at a stronger budget; the "Second
# architecture" pages rerun chapters 1-4 on Gemma-3-270M and the "Third architecture"
# pages chapters 1-5 on Qwen2.5-Coder-1.5B, chapter 7 compares the architectures side by
# side, chapter 8 collects the numbers, chapter 9
# measures the code, {doc}`the recipe page <10_drafter_recipe>` pre-registers the search for drafters
# strong enough to deploy and says how far that search has run, and chapter 11 asks
# {doc}`where EAGLE-3 pays on a CPU <11_cpu_payoff>`. {doc}`../rerun` shows how to rerun everything, or one chapter on
# another model; {doc}`../classroom` is a 60-90 minute session plan.
