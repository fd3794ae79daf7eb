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
# # How much does each layer's hidden state spread out?
#
# ```{admonition} Answer
# :class: tip
#
# Over {glue:text}`n_tokens:,` response positions of {glue:text}`n_prompts` prompts, layer
# entropy is {glue:text}`ds_first:.2f` nats at the embeddings and {glue:text}`ds_last:.2f` at
# the last block's output ({glue:text}`ds_trend`). It is highest at layer
# {glue:text}`ds_argmax` ({glue:text}`ds_max:.2f`) and lowest at layer {glue:text}`ds_argmin`
# ({glue:text}`ds_min:.2f`); its largest fall between two consecutive layers,
# {glue:text}`ds_drop:.2f` nats, is {glue:text}`drop_vs_band` than the bootstrap band of
# {glue:text}`ds_band:.2f` nats.
# ```
#
# How much do a layer's hidden states spread out? This chapter measures the
# {term}`matrix entropy` of every layer of the target, from the embeddings (index 0) to
# the last block's output (index $N$, taken before the final norm, as serving engines
# capture it), the quantity that {cite:t}`skean2025layer` track
# over depth and that the paper uses as its *informativeness* criterion. The definition,
# the preparation of the hidden states (centring over tokens, unit-norm rows) and the
# normalisations are in {ref}`sec-matrix-entropy`.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import layer_entropy as ch
from activation_wave.study.steps import open_chapter
from activation_wave.plots import plot_entropy_depth, plot_entropy_normalisations
from activation_wave.core.results import save_result

cfg, cap = open_chapter(profile, model, overrides)

# %% [markdown]
# ## The tokens
#
# Every statistic of Part I is computed on the same kind of data: a seeded
# sample of {glue:text}`n_tokens:d` *response positions* (those whose hidden state
# predicts a token of the target's own response, the positions a drafter is trained and
# run on) drawn from {glue:text}`n_prompts:d` prompts of the capture of
# {doc}`00_data_and_capture`. The entropies below use Rényi order
# $\alpha =$ {glue:text}`alpha:.1f`; the token budget, the seed and the order are
# parameters of the run profile.
#
# Two ways of pooling the tokens ({ref}`sec-matrix-entropy`): **prompt entropy** averages
# the entropy of each prompt's own tokens, and **dataset entropy** pools all tokens into
# one matrix. Both come with a bootstrap band over prompts (prompts resampled with
# replacement; for dataset entropy every replicate recomputes all the eigenproblems, so
# it has fewer replicates).

# %%
r = ch.run(cfg, cap)  # prompt_entropy, dataset_entropy and the Renyi orders: activation_wave/study/chapters/layer_entropy.py
_ = save_result("01_layer_entropy", r, cfg, results_root or None)
print(f"sample: {r.n_tokens} response positions from {r.n_prompts} prompts; alpha = {r.alpha}")
glue_values(**ch.prose_values(r))
curves = {"dataset entropy (pooled tokens)": r.dataset.curve(), "prompt entropy (mean over prompts)": r.prompt.curve()}
glue_figure("fig_entropy_depth", plot_entropy_depth(r.ids, curves,
                                                    title=f"Matrix entropy over depth (alpha = {r.alpha:g})"))

# %% [markdown]
# ## Entropy of every layer
#
# ```{glue:figure} fig_entropy_depth
# :name: fig-entropy-depth
#
# Matrix entropy of every layer index, over {glue:text}`n_tokens:d` response positions.
# Dataset entropy pools all tokens; prompt entropy averages over prompts (about
# {glue:text}`mean_prompt_tokens:.0f` sampled tokens each). Shaded: 95% bootstrap bands
# over prompts ({glue:text}`n_boot_dataset:d` and {glue:text}`n_boot_prompt:d` replicates).
# ```
#
# On this model, dataset entropy starts at {glue:text}`ds_first:.2f` nats at the
# embeddings (index 0), reaches its highest value, {glue:text}`ds_max:.2f` nats, at
# layer {glue:text}`ds_argmax:d` and its lowest, {glue:text}`ds_min:.2f` nats, at layer
# {glue:text}`ds_argmin:d`. The largest fall between two consecutive layers is
# {glue:text}`ds_drop:.2f` nats, from layer {glue:text}`ds_drop_from:d` to layer
# {glue:text}`ds_drop_to:d`: {glue:text}`drop_vs_band` than the average width of the
# bootstrap band, {glue:text}`ds_band:.2f` nats. Index {glue:text}`N:d`, the last block's
# output before the final norm (see {ref}`sec-layer-index`), has {glue:text}`ds_last:.2f`
# nats against {glue:text}`ds_before_last:.2f` at the layer before. The same tokens after the
# final norm (transformers' own last entry, which no serving engine feeds a drafter and
# which is therefore not a candidate here) have {glue:text}`ds_last_normed:.2f` nats: the
# norm's per-channel gains move the entropy by {glue:text}`norm_shift:.2f` nats,
# {glue:text}`norm_vs_block` the last block does ({glue:text}`block_shift:.2f` nats).
#
# Prompt entropy runs from {glue:text}`ps_first:.2f` nats at the embeddings to at most
# {glue:text}`ps_max:.2f`, at layer {glue:text}`ps_argmax:d`, and lies below dataset
# entropy at {glue:text}`ps_below:d` of the {glue:text}`n_ids:d` layers: a prompt's few
# tokens cannot spread over as many directions as tokens drawn from every prompt, so the
# two curves are compared by their *shape*, not their level. The normalisations below put
# the levels on a common scale.

# %% tags=["remove-input"]
glue_figure("fig_entropy_normalised", plot_entropy_normalisations(r.ids, curves, d=r.hidden_size))

# %% [markdown]
# ## Normalised entropy
#
# {cite:t}`skean2025layer` report the entropy raw and divided by three normalisers:
# $\log n$ (the most a sample of $n$ tokens can reach), $\log d$ (the most a width-$d$
# representation can reach) and the smaller of the two, which is the largest attainable
# value, so that 1 means "as spread as possible". Here $\log n =$
# {glue:text}`log_n_dataset:.2f` for the pooled sample and $\log d =$
# {glue:text}`log_d:.2f` for the hidden size $d =$ {glue:text}`hidden_size:d`; prompt
# entropy is normalised with the mean number of sampled tokens per prompt,
# $n =$ {glue:text}`n_per_prompt:d`.
#
# ```{glue:figure} fig_entropy_normalised
# :name: fig-entropy-normalised
#
# The curves of {numref}`fig-entropy-depth` under each normalisation. Dividing by a
# constant does not change a curve's shape; it tells how close each layer comes to the
# largest value its sample allows.
# ```
#
# Normalised by $\min(\log n, \log d)$, dataset entropy reaches at most
# {glue:text}`ds_min_max:.2f` of its ceiling (last entry excluded) and prompt entropy at
# most {glue:text}`ps_min_max:.2f`. Prompt entropy's ceiling is $\log n$ for the
# {glue:text}`n_per_prompt:d` tokens of a typical prompt's sample, so its normalised value
# says as much about how few tokens each prompt contributes as about the layer. The rest of the study uses pooled statistics, like
# dataset entropy: they are what a drafter meets, tokens from many different contexts.

# %% tags=["remove-input"]
glue_figure("fig_entropy_orders", plot_entropy_depth(r.ids, {f"alpha = {a}": v for a, v in r.orders.items()},
                                                     title="Dataset entropy for several Renyi orders"))

# %% [markdown]
# ## Does the Rényi order matter?
#
# Layer selection ({doc}`05_layer_selection`) scores thousands of layer sets, which is
# only cheap at order 2, where the concatenation entropy has a closed form
# ({ref}`sec-concat-entropy`). Order 2 weighs the largest eigenvalues more than order 1,
# and the min-entropy ($\alpha = \infty$) only sees the largest one.
#
# ```{glue:figure} fig_entropy_orders
# :name: fig-entropy-orders
#
# Dataset entropy of every layer for several Rényi orders, from the same spectra.
# Higher orders give lower values (the Rényi entropy falls with $\alpha$).
# ```
#
# Order 2 sits on average {glue:text}`gap_1_2:.2f` nats below order 1, and the two
# profiles' rankings of layers 0 to $N-1$ have a Spearman correlation of
# {glue:text}`rho_1_2:.2f`. Order 2 puts its maximum at layer {glue:text}`argmax_alpha2:d`
# (order 1: layer {glue:text}`ds_argmax:d`). How much an outlier token, rather than the
# bulk of the tokens, shapes these curves is the subject of {doc}`04_token_filtering`.

# %% [markdown]
# ## Try it
#
# `wave study --profile smoke --only 01 --no-build` re-executes this page on the smoke capture in a few minutes;
# open `scratch/smoke/book/chapters/01_layer_entropy.ipynb` and compare where its profile peaks.
