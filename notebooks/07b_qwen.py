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
# # Does the answer hold on Qwen2.5-Coder-1.5B?
#
# ```{admonition} Answer
# On {glue:text}`cross_1_name`, the best rule's set {glue:text}`c2_rival_layers` against the
# default {glue:text}`c2_default_layers` (C2) reads {glue:text}`f_C2_label`.
# Its $\Delta\tau$ is {glue:text}`f_C2_figure`, over n = {glue:text}`f_C2_n`, with
# {glue:text}`c2_seeds:d` drafters per set averaged per prompt; this design detects a difference
# of about {glue:text}`c2_mde:.2f`. {glue:text}`c2_ok:d` of the {glue:text}`c2_drafters:d` drafters
# accepted a draft on at least {glue:text}`c2_min_prompts:d` of the {glue:text}`c2_prompts:d`
# prompts, the check that the instrument works. The layer statistics: the default triple's $S_2$
# is above {glue:text}`cross_1_default_pct:.0f`% of all triples, and the outlier treatments that
# remove the largest entropy fall on their own are {glue:text}`tf_other_removed` (on
# {glue:text}`cross_0_name`: {glue:text}`tf_first_removed`).
# ```
#
# **Why it matters.** This is the model on which {doc}`11_cpu_payoff` asks whether EAGLE-3
# pays on a CPU, so its drafter's layers matter most for that question. It is also a third
# family, about ten times the size of the first model, instruction-tuned, with grouped-query
# attention: if the first model's answer holds here too, it is less likely to belong to one model.
#
# **Method.** The same statistics and selection rules run on Qwen2.5-Coder-1.5B-Instruct
# {cite:p}`hui2024qwen25coder` (28 blocks, width 1536) on its own prompt set. Its
# responses come from {glue:text}`cross_engine` on the same GGUF file; on a checked sample
# they equal the PyTorch target's on {glue:text}`cross_agree_same:d` of
# {glue:text}`cross_agree_n:d` prompts, and their common prefix covers
# {glue:text}`cross_agree_prefix:.0f`% of a response on average. Its drafters are the design
# that drafts on this target ({doc}`11_cpu_payoff`): 1,000,000 training tokens on the greedy
# responses to its 128 train prompts, three seeds per set, scored on its held-out prompts. The
# test was first run with drafters of one epoch, whose default accepted no draft; the
# {ref}`lab record <lab-cpu-c2-again>` keeps that attempt and why the test was re-stated.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from IPython.display import display

import pandas as pd

from activation_wave.core.results import load_benchmarks, load_optional, save_result
from activation_wave.core.tables import format_table
from activation_wave.plots import plot_cka_models, plot_entropy_relative_depth, plot_selection_models
from activation_wave.select.across_models import third_config
from activation_wave.study.chapters import cpu_payoff
from activation_wave.study.chapters import cross_model as ch
from activation_wave.study import findings
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.steps import open_chapter

cfg, _ = open_chapter(profile, model, overrides, capture=False)
root = results_root or None
r = ch.run(cfg, "third")  # both models' statistics and selections: activation_wave/study/chapters/cross_model.py
_ = save_result(ch.NAMES["third"], r, cfg, root)
c2 = load_benchmarks().get(cpu_payoff.LAYER_TEST)  # C2's drafters: activation_wave/benchmarks/layer_test_1p5b.py
if c2 is None:
    raise ValueError(f"data/results/benchmarks.json has no {cpu_payoff.LAYER_TEST} entry: run "
                     f"`wave bench --profile {profile} --only {cpu_payoff.LAYER_TEST}` (about 3.5 hours, resumable)")
glue_values(**ch.model_values(r), **cpu_payoff.c2_values(c2), **ch.responses_values(cfg, root),
            **ch.outlier_values(load_optional("04_token_filtering", cfg, root),
                                load_optional("04_token_filtering", third_config(cfg), root) if cfg.third.model
                                else None))
F = findings.record(cfg, root)  # C2's record, quoted below
findings.glue(F, ["C2"])
display(format_table(ch.overview_table(r), {"default's S2 percentile": "{:.1f}"}))

# %% [markdown]
# ## Results
#
# ### Entropy across relative depth

# %% tags=["remove-input"]
glue_figure("fig_qwen_entropy", plot_entropy_relative_depth(r.summaries))

# %% [markdown]
# ```{glue:figure} fig_qwen_entropy
# :name: fig-qwen-entropy
#
# Matrix entropy ({ref}`sec-matrix-entropy`) of each layer's hidden states over
# next-token-entropy-filtered response positions, divided by its largest possible value
# $\log\min(n, d)$, against relative depth. Crosses mark the EAGLE-3 default layers
# $[2, N/\!/2, N-3]$.
# ```
#
# On {glue:text}`cross_1_name` the largest fall of entropy is
# {glue:text}`tf_other_drop:.2f` nats, from layer {glue:text}`tf_other_from:d` into layer
# {glue:text}`tf_other_to:d`; on {glue:text}`cross_0_name` it is
# {glue:text}`tf_first_drop:.2f` nats into layer {glue:text}`tf_first_to:d`.
# {doc}`04_token_filtering` tests three treatments of outlier tokens: leaving out the first
# position, leaving out tokens of very large norm, and centring on the median. Treatments
# that remove the fall on their own: on {glue:text}`cross_0_name`,
# {glue:text}`tf_first_removed`; on {glue:text}`cross_1_name`, {glue:text}`tf_other_removed`.
# Where all three remove it, the fall comes from a few outlier tokens, the attention-sink
# trap, and says nothing about what the layers carry. The per-treatment curves are on the
# {doc}`token filtering page of this model <third/04_token_filtering>`.
#
# ### Similarity structure

# %% tags=["remove-input"]
glue_figure("fig_qwen_cka", plot_cka_models(r.summaries))

# %% [markdown]
# ```{glue:figure} fig_qwen_cka
# :name: fig-qwen-cka
#
# Linear {term}`CKA` between every pair of layers, with the automatically chosen contiguous
# compartments outlined ({ref}`sec-compartments`), for each model.
# ```
#
# The CKA map splits into {glue:text}`cross_0_compartments:d` compartments on
# {glue:text}`cross_0_name` and {glue:text}`cross_1_compartments:d` on
# {glue:text}`cross_1_name`.
#
# ### Which layers each rule picks

# %% tags=["remove-input"]
glue_figure("fig_qwen_selection", plot_selection_models(r.summaries))
display(format_table(ch.percentile_table(r), {"S2 percentile among all sets": "{:.1f}"}))

# %% [markdown]
# ```{glue:figure} fig_qwen_selection
# :name: fig-qwen-selection
#
# The layer triples each selection rule of {doc}`05_layer_selection` picks on each model,
# over the compartment map (shaded); the faint line is the layer entropy.
# ```
#
# The default triple's concatenation entropy $S_2$ is above
# {glue:text}`cross_0_default_pct:.0f`% of all triples on {glue:text}`cross_0_name` and
# above {glue:text}`cross_1_default_pct:.0f`% on {glue:text}`cross_1_name`. The combined
# rule picks {glue:text}`cross_1_combined` on {glue:text}`cross_1_name`, above
# {glue:text}`cross_1_combined_pct:.1f`% of all triples.
#
# ### Drafters on the two triples

# %% tags=["remove-input"]
display(format_table(cpu_payoff.c2_frame(c2)))

# %% [markdown]
# Each row is one layer set's drafters: outcome $\tau$ of each seed's drafter (the mean over the
# held-out prompts of its accepted tokens per target pass), the set's $\tau$ with its 95%
# interval over prompts (seeds averaged per prompt first), and on how many prompts each drafter
# accepted at least one draft. The default's drafters reach {glue:text}`c2_default_tau:.3f` and
# the combined rule's {glue:text}`c2_rival_tau:.3f`. Training the {glue:text}`c2_drafters:d`
# drafters took {glue:text}`c2_cpu_min:d` CPU-minutes on {glue:text}`c2_cpu` (from each
# drafter's training log, two threads each).
#
# ## How sure

# %% tags=["remove-input"]
display(format_table(findings.table(F, ["C2"])))

# %% [markdown]
# C2 was registered on {doc}`11_cpu_payoff` and re-stated before these drafters trained
# ({ref}`lab record <lab-cpu-c2-again>`): the combined rule's set against the default, paired
# over the same held-out prompts, Holm across the sets compared (one here, so its own $p$). Here it reads {glue:text}`f_C2_label`. Three
# seeds per set average out much of one drafter's luck, but not the prompts: the interval is
# over {glue:text}`f_C2_n`, and a true difference smaller than about {glue:text}`c2_mde:.2f`
# would read as within noise. The depth and entropy tests (G2, G3) were registered for
# Gemma-3-270M only.
#
# The layer statistics rest on one prompt set and one capture; compartments and selected
# sets can move with the prompts, as {doc}`05_layer_selection` shows for the first model.
#
# The same question has a record on each model ({ref}`the glance page's table <sec-layer-tests>`).
# Where the records differ between models, this design cannot say why: the three models differ
# in size, family and instruction tuning, their drafters in training budget and seeds (the
# table's budget column), and each model's rules pick their own sets. Telling these apart would
# take the same drafter design on every model, which on two cores costs hours per model.
#
# ## Try it
#
# The smoke profile names no third architecture; give it one. It needs the 1.5B model
# (`bash scripts/setup.sh --qwen`) and about 14 GB of memory; the default profile's run of this
# page finished in about a quarter of an hour on this machine's two cores, and the smoke one reads
# fewer prompts:
#
# ```bash
# wave study --profile smoke --only 07b_qwen --no-build --set third.model=qwen2.5-coder-1.5b
# ```
#
# Look at the entropy figure: on the default profile the second model's line rises over the
# first fifth of its depth, sags through the middle and climbs again before the last block,
# where the first model's rises almost all the way.
