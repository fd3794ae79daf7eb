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
# On {glue:text}`cross_1_name`, the outlier treatments that remove the largest entropy fall
# on their own are {glue:text}`tf_other_removed` (on {glue:text}`cross_0_name`:
# {glue:text}`tf_first_removed`), and the default triple's $S_2$ is above
# {glue:text}`cross_1_default_pct:.0f`% of all triples. Whether the best rule's set
# {glue:text}`qd_rule_set` drafts better than the default (C2): {glue:text}`f_C2_label`
# ($\Delta\tau$ = {glue:text}`f_C2_figure`, n = {glue:text}`f_C2_n`).
# The default drafter accepted a draft on {glue:text}`qd_default_live:d` of those prompts;
# the study gives no verdict against a drafter that accepts none.
# ```
#
# **Why it matters.** This is the model on which {doc}`11_cpu_payoff` asks whether EAGLE-3
# pays on a CPU, so its drafter's layers matter most for that question. It is also a third
# family, about ten times the size of the first model, with grouped-query attention: if
# the first model's patterns hold here too, they are less likely to belong to one model.
#
# **Method.** The same statistics and selection rules run on Qwen2.5-Coder-1.5B-Instruct
# {cite:p}`hui2024qwen25coder` (28 blocks, width 1536) on its own prompt set. Its
# responses come from {glue:text}`cross_engine` on the same GGUF file; on a checked sample
# they equal the PyTorch target's on {glue:text}`cross_agree_same:d` of
# {glue:text}`cross_agree_n:d` prompts, and their common prefix covers
# {glue:text}`cross_agree_prefix:.0f`% of a response on average. Its drafters are trained
# and registered on {doc}`11_cpu_payoff`: the default and the best rule's triple, one seed
# each, on {glue:text}`qd_records:d` of the model's greedy responses.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from IPython.display import display

import pandas as pd

from activation_wave.core.results import load_optional, load_result, save_result
from activation_wave.core.tables import format_table
from activation_wave.plots import plot_cka_models, plot_entropy_relative_depth, plot_selection_models
from activation_wave.select.across_models import third_config
from activation_wave.study.chapters import cpu_payoff
from activation_wave.study.chapters import cross_drafters as cd
from activation_wave.study.chapters import cross_model as ch
from activation_wave.study import findings
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.steps import open_chapter

cfg, _ = open_chapter(profile, model, overrides, capture=False)
root = results_root or None
r = ch.run(cfg, "third")  # both models' statistics and selections: activation_wave/study/chapters/cross_model.py
_ = save_result(ch.NAMES["third"], r, cfg, root)
try:  # the drafters the CPU payoff page trains and registers (C2); none in a profile without them
    q = load_result(cpu_payoff.NAME, cfg, root, cls=cd.CrossDrafterResult)
except FileNotFoundError:
    q = None
glue_values(**ch.model_values(r), **cd.page_values(q, 1, prefix="qd"), **ch.responses_values(cfg, root),
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
if q is not None:
    display(format_table(cd.triples_frame(q)))

# %% [markdown]
# The default triple's drafter reaches $\tau$ = {glue:text}`qd_tau_default:.3f` and the
# rule's set {glue:text}`qd_rule_set` reaches {glue:text}`qd_tau_rule:.3f`, on
# {glue:text}`qd_eval_prompts:d` held-out prompts. Paired by prompt, the difference is
# {glue:text}`qd_delta:+.3f` [{glue:text}`qd_delta_lo:+.3f`, {glue:text}`qd_delta_hi:+.3f`].
# The default drafter accepted at least one draft on {glue:text}`qd_default_live:d` of
# those prompts.
#
# ## How sure

# %% tags=["remove-input"]
if q is not None:
    display(format_table(findings.table(F, ["C2"])))

# %% [markdown]
# C2 is the test registered on {doc}`11_cpu_payoff` (its registration is in the lab record,
# {doc}`../lab/cpu_payoff`): the best rule's set beats the default, paired over the held-out
# prompts. A verdict rests on a working instrument: when either
# drafter accepts no draft on any prompt, its $\tau$ is 1 everywhere, and a difference
# against it says how often the other drafter is lucky, not which layers are better. The
# study then marks the test not testable, whatever its $p$. Here it reads
# {glue:text}`f_C2_label`. Drafters reading a single layer on this model:
# {glue:text}`qd_n_singles:d`; the depth and entropy tests (G2, G3) were registered for
# Gemma-3-270M only.
#
# The layer statistics rest on one prompt set and one capture; compartments and selected
# sets can move with the prompts, as {doc}`05_layer_selection` shows for the first model.
# Of the model's {glue:text}`qd_n_responses:d` greedy responses for the drafters,
# {glue:text}`qd_at_limit:d` ({glue:text}`qd_at_limit_pct:.0f`%) run to the token limit.
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
