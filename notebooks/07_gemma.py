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
# # Does the answer hold on Gemma-3-270M?
#
# ```{admonition} Answer
# On {glue:text}`cross_1_name`, the best rule's set {glue:text}`xd_rule_set` against the
# default {glue:text}`xd_default`: $\Delta\tau$ = {glue:text}`f_G1_figure`, n =
# {glue:text}`f_G1_n` (G1, that it drafts better: {glue:text}`f_G1_label`). Whether a
# drafter reading one deeper layer drafts better (G2): {glue:text}`f_G2_label` ($\rho$ =
# {glue:text}`f_G2_figure`, n = {glue:text}`f_G2_n`). Outlier
# treatments that remove this model's entropy fall on their own: {glue:text}`tf_other_removed`
# (on {glue:text}`cross_0_name`: {glue:text}`tf_first_removed`).
# ```
#
# **Why it matters.** Everything before this page was measured on one small model. A rule
# for choosing layers is only worth having if it carries over to other models: if the
# default triple also wins on a model of another family, the advice "keep the default"
# rests on more than one case. Comparing models also shows which shapes of the entropy and
# CKA curves belong to one model and which to small language models in general.
#
# **Method.** The same statistics, selection rules and drafters run on Gemma-3-270M
# {cite:p}`gemmateam2025gemma3` (18 blocks, width 640, a 262k vocabulary), the second
# architecture of the study. Depth is compared as relative depth, the layer index divided
# by $N$. Its drafters train on the model's own greedy responses to the study's prompts,
# with the recipe of {doc}`06_eagle3_speedup`: one drafter per single layer and two seeds
# each for the default and the best rule's set. Three tests were fixed before any of these
# drafters trained: G1 compares the two triples, G2 asks whether $\tau$ rises with depth and
# G3 whether it rises with entropy. The registration is in {doc}`../lab/cross_model`.

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
from activation_wave.plots import plot_cka_models, plot_cross_sweep, plot_entropy_relative_depth, plot_selection_models
from activation_wave.select.across_models import cross_config
from activation_wave.study.chapters import cross_drafters as cd
from activation_wave.study.chapters import cross_model as ch
from activation_wave.study.chapters.drafter_predictors import DrafterPredictors, peak_values, single_layer_peak
from activation_wave.study.chapters.eagle3_speedup import Eagle3SpeedupResult
from activation_wave.study import findings
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.steps import open_chapter

cfg, _ = open_chapter(profile, model, overrides, capture=False)
root = results_root or None
r = ch.run(cfg, "cross")  # both models' statistics and selections: activation_wave/study/chapters/cross_model.py
_ = save_result(ch.NAMES["cross"], r, cfg, root)
six = load_result("06_eagle3_speedup", cfg, root, cls=Eagle3SpeedupResult)
# the drafters (their results file when it holds this design): activation_wave/study/chapters/cross_drafters.py
d = cd.load_or_run(cfg, r.summaries[-1].sets, six.best_rule.set, root)
pred6 = load_result("06_predictors", cfg, root, cls=DrafterPredictors)
glue_values(**ch.model_values(r), **cd.page_values(d, cfg.draft.workers),
            **ch.outlier_values(load_optional("04_token_filtering", cfg, root),
                                load_optional("04_token_filtering", cross_config(cfg), root)))
F = findings.record(cfg, root)  # G1-G3's records, quoted below
findings.glue(F, ["G1", "G2", "G3"])
display(format_table(ch.overview_table(r), {"default's S2 percentile": "{:.1f}"}))

# %% [markdown]
# ## Results
#
# ### Entropy across relative depth

# %% tags=["remove-input"]
glue_figure("fig_gemma_entropy", plot_entropy_relative_depth(r.summaries))

# %% [markdown]
# ```{glue:figure} fig_gemma_entropy
# :name: fig-gemma-entropy
#
# Matrix entropy ({ref}`sec-matrix-entropy`) of each layer's hidden states over
# next-token-entropy-filtered response positions, divided by its largest possible value
# $\log\min(n, d)$, against relative depth. Crosses mark the EAGLE-3 default layers
# $[2, N/\!/2, N-3]$.
# ```
#
# Both models' entropy falls somewhere in depth. On {glue:text}`cross_1_name` the largest
# fall is {glue:text}`tf_other_drop:.2f` nats, from layer {glue:text}`tf_other_from:d` into
# layer {glue:text}`tf_other_to:d`; on {glue:text}`cross_0_name` it is
# {glue:text}`tf_first_drop:.2f` nats into layer {glue:text}`tf_first_to:d`.
# {doc}`04_token_filtering` asks whether a few outlier tokens cause such a fall, with three
# treatments: leaving out the first position, leaving out tokens of very large norm, and
# centring on the median. Treatments that remove the fall on their own: on
# {glue:text}`cross_0_name`, {glue:text}`tf_first_removed`; on {glue:text}`cross_1_name`,
# {glue:text}`tf_other_removed`. A fall that no treatment removes is not the attention-sink
# artefact of the first model, so on this model it may be a property of the layers
# themselves. The per-treatment curves are on the
# {doc}`token filtering page of this model <second/04_token_filtering>`.
#
# ### Similarity structure

# %% tags=["remove-input"]
glue_figure("fig_gemma_cka", plot_cka_models(r.summaries))

# %% [markdown]
# ```{glue:figure} fig_gemma_cka
# :name: fig-gemma-cka
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
glue_figure("fig_gemma_selection", plot_selection_models(r.summaries))
display(format_table(ch.percentile_table(r), {"S2 percentile among all sets": "{:.1f}"}))

# %% [markdown]
# ```{glue:figure} fig_gemma_selection
# :name: fig-gemma-selection
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
display(format_table(cd.triples_frame(d)))

# %% [markdown]
# {glue:text}`xd_n_drafters:d` drafters trained on {glue:text}`xd_records:d` responses
# ({glue:text}`xd_positions:,d` response positions) in {glue:text}`xd_train_min:.0f` minutes
# on this machine and were scored on {glue:text}`xd_eval_prompts:d` held-out prompts. The
# table gives the offline $\tau$ of the two triples: mean over prompts of the seed-averaged
# $\tau$ per prompt, with its 95% bootstrap interval over prompts. The rule's set reaches
# {glue:text}`xd_tau_rule:.3f` and the default {glue:text}`xd_tau_default:.3f`; paired by
# prompt, the difference is {glue:text}`xd_delta:+.3f` [{glue:text}`xd_delta_lo:+.3f`,
# {glue:text}`xd_delta_hi:+.3f`] ($p$ = {glue:text}`xd_p:.2g`).

# %% tags=["remove-input"]
first = cd.sweep_frame(cfg.model, r.summaries[0].n_layers, pred6.sets)
frame = pd.concat([first, cd.sweep_frame(d.model, d.n_layers, d.sets)], ignore_index=True)
glue_figure("fig_gemma_sweep", plot_cross_sweep(frame, [(cfg.model, r.summaries[0].n_layers, six.profile),
                                                        (d.model, d.n_layers, d.profile)]))
p6 = {p.name: p for p in pred6.predictors if p.units == "single layers"}
glue_values(xd_first_peak_rel=cd.peak_relative_depth(first["layer"], first["tau"], r.summaries[0].n_layers),
            xd_first_rho_depth=p6["deepest"].rho, xd_first_rho_entropy=p6["renyi2"].rho, xd_first_n=p6["deepest"].n,
            **peak_values(single_layer_peak(pred6)))

# %% [markdown]
# ```{glue:figure} fig_gemma_sweep
# :name: fig-gemma-sweep
#
# Top: offline $\tau$ of drafters that read a single layer (mean over held-out prompts, 95%
# bootstrap interval over prompts) against the layer's relative depth, for both models.
# The levels are not comparable between the models, since each drafted its own responses on
# its own data; the shapes are. Bottom: each layer's Renyi-2 matrix entropy.
# ```
#
# Over {glue:text}`cross_1_name`'s {glue:text}`xd_rho_depth_n:d` single layers, the rank
# correlation of $\tau$ with depth is $\rho$ = {glue:text}`xd_rho_depth:+.2f`
# [{glue:text}`xd_rho_depth_lo:+.2f`, {glue:text}`xd_rho_depth_hi:+.2f`] (G2:
# {glue:text}`f_G2_label`) and with Renyi-2 entropy $\rho$ =
# {glue:text}`xd_rho_entropy:+.2f` [{glue:text}`xd_rho_entropy_lo:+.2f`,
# {glue:text}`xd_rho_entropy_hi:+.2f`] (G3: {glue:text}`f_G3_label`). On
# {glue:text}`cross_0_name` the same two were {glue:text}`xd_first_rho_depth:+.2f` and
# {glue:text}`xd_first_rho_entropy:+.2f` over {glue:text}`xd_first_n:d` layers. The best
# single layer is layer {glue:text}`xd_best_layer:d` ($\tau$ = {glue:text}`xd_best_tau:.3f`,
# relative depth {glue:text}`xd_peak_rel:.2f`; on {glue:text}`cross_0_name`:
# {glue:text}`xd_first_peak_rel:.2f`), against {glue:text}`xd_tau_default:.3f` for the
# default triple.
#
# ## How sure

# %% tags=["remove-input"]
display(format_table(findings.table(F, ["G1", "G2", "G3"])))

# %% [markdown]
# Each row is a test fixed before the drafters trained, with its rule applied as written.
# G1 is one paired test over {glue:text}`xd_eval_prompts:d` prompts; it detects a
# $\Delta\tau$ of {glue:text}`xd_mde:.3f` or more at 80% power, so a smaller difference is
# within noise, not evidence that the two triples are equal. Entropy and depth rise together
# over this model's layers ($\rho$ = {glue:text}`xd_rho_entropy_depth:+.2f`), so with
# {glue:text}`xd_rho_depth_n:d` layers G2 and G3 cannot tell a depth effect from an entropy
# effect. Each single layer has one seed; on {glue:text}`cross_0_name`,
# {glue:text}`peak_n_close:d` layers lie within {glue:text}`peak_gap:.3f` of the best layer
# while two seeds of one layer differ by {glue:text}`peak_spread:.3f` on average, so the
# best layer's depth is a region, not a layer.
#
# The largest caveat is the model itself. The embedded Gemma is the *base* model, not an
# instruction-tuned one: {glue:text}`xd_at_limit:d` of its {glue:text}`xd_n_responses:d`
# greedy responses ({glue:text}`xd_at_limit_pct:.0f`%) run to the token limit instead of
# ending, and many repeat a sentence. Repeated text is easy to draft, so its $\tau$ is not
# comparable in level with the first model's; the tests compare drafters of the same model.
# The registration and its budget are in the lab record, {doc}`../lab/cross_model`.
#
# ## Try it
#
# On the smoke profile, after the drafters page's line (this page compares with its results), in a
# few minutes:
#
# ```bash
# wave study --profile smoke --only 07_gemma --no-build
# ```
#
# Look at the hypotheses table: with a dozen prompts per source G1 reads "not testable" (the tiny
# drafters accept nothing), and the two correlations rest on three single layers, so read their
# words beside n = 3.
