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
# # Do drafters that read the selected layers beat the default?
#
# ```{admonition} Answer
# Against the EAGLE-3 default $[2, N/\!/2, N-3]$, the best selection rule's set,
# {glue:text}`f_H1_compared` {glue:text}`best_rule_layers`, changes $\tau$ by
# $\Delta\tau$ = {glue:text}`f_H1_figure` (Holm p {glue:text}`f_H1_p`, n =
# {glue:text}`f_H1_n`). Pre-registered H1, "a rule's set drafts better than the default",
# is {glue:text}`f_H1_label`.
# ```
#
# **Why it matters.** The earlier pages score layers by entropy and CKA and
# {doc}`05_layer_selection` picks triples with high scores. Those scores are only useful if a drafter reading the picked layers drafts
# better. A drafter that reads more useful layers should guess more of the target's next
# tokens, so more drafts are accepted per target pass. Here that is tested head on: the
# same drafter, the same data and seeds, only the layers differ.
#
# **Method.** Every drafter has the architecture of {ref}`sec-eagle3` and is trained on the
# target's own responses. Quality is the mean accepted length {term}`tau` on held-out
# prompts ({ref}`sec-metrics`), computed offline from the cached greedy responses, one value
# per prompt, so every comparison is paired by prompt. The design, its four hypotheses and
# what was shrunk to fit this machine are in the lab record, {doc}`../lab/eagle3_speedup`.
# For the default and the best rule's set the drafters then also decode online.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import display

from activation_wave.study import findings
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import drafter_predictors as dp, drafter_strength as st, eagle3_speedup
from activation_wave.study.steps import load_results, open_chapter
from activation_wave.plots import plot_acceptance_by_position, plot_scores_vs_tau, plot_sweep, plot_tau
from activation_wave.core.results import load_optional, save_result
from activation_wave.core.tables import format_table

cfg, cap = open_chapter(profile, model, overrides, threads=None)  # torch's threads: drafters are scored here
sel = load_results("05_layer_selection", cfg, results_root or None)

# %% tags=["hide-input"]
res, pred = eagle3_speedup.run(cfg, cap, sel["sets"])
_ = save_result(eagle3_speedup.NAME, res, cfg, results_root or None)
_ = save_result(dp.NAME, pred, cfg, results_root or None)
resampled = st.seed_resampled(load_optional(st.NAME, cfg, results_root or None), "delta at the bottom budget",
                              dp.ranking_values(pred)["rank_vs"])
F = findings.record(cfg, results_root or None)  # H1-H4's records, quoted by the text below
findings.glue(F, ["H1", "H2", "H3", "H4"])
glue_values(**eagle3_speedup.prose_values(res, cfg, pred), **dp.prose_values(pred),
            **{f"seeds_{k}": v for k, v in resampled.items()})
print(f"{len(res.runs)} drafters over {len(res.summary)} layer sets")

# %% [markdown]
# ## Results
#
# ### H1: the rules' sets against the default
#
# Every drafter is scored on the same {glue:text}`paired_n:d` eval prompts, so each set is
# compared with the default prompt by prompt: the mean of the per-prompt $\Delta\tau$
# (seeds averaged), a paired bootstrap interval, and Holm's correction across the
# {glue:text}`paired_n_rules:d` selection rules (column `p_holm_rules`) and across every
# set (`p_holm_all`). Of the rules' sets, {glue:text}`paired_n_higher:d` beat the default
# and {glue:text}`paired_n_lower:d` fall below it.

# %% tags=["hide-input"]
cmp = pd.DataFrame(pred.comparisons).sort_values(["family", "delta"], ascending=[False, False])
display(format_table(cmp[["set", "layers", "family", "delta", "lo", "hi", "p", "p_holm_rules", "p_holm_all", "n",
                          "mde_holm"]]))
tri = dp.outcome_rows(pred, 3)  # the pre-registered outcome, highest first
glue_figure("fig_tau_sets", plot_tau([r.set for r in tri], [r.tau for r in tri], [r.lo for r in tri],
                                     [r.hi for r in tri], title=None, xlabel=r"$\tau$, mean over held-out prompts"))

# %% [markdown]
# ```{glue:figure} fig_tau_sets
# :name: fig-tau-sets
#
# Mean accepted length {term}`tau` of drafters reading each triple (offline, chain drafts at
# $T=0$, mean over the eval prompts of the seed-averaged per-prompt $\tau$), with a 95%
# bootstrap interval over prompts; highest first. The paired table above is the test: these
# marginal intervals overlap far more than the paired ones.
# ```
#
# The highest triple is {glue:text}`rank_top` {glue:text}`rank_top_layers`, $\tau$ =
# {glue:text}`rank_top_tau:.3f` [{glue:text}`rank_top_lo:.3f`, {glue:text}`rank_top_hi:.3f`].
# The closest rival, {glue:text}`rank_vs`, against the default: {glue:text}`rank_vs_word`
# on prompts alone ($\Delta\tau$ = {glue:text}`rank_vs_delta:+.3f`, Holm p
# {glue:text}`rank_vs_p:.3f` over all sets). With each set's seeds resampled as well as the
# prompts, the same comparison is {glue:text}`seeds_verdict` (Holm p
# {glue:text}`seeds_p_holm:.2f`; {doc}`06b_drafter_strength` explains this check).
#
# ### What one layer is worth

# %% tags=["remove-input"]
one, ref = dp.sweep_rows(pred), {r.set: r.tau for r in tri}[pred.reference]
glue_figure("fig_sweep", plot_sweep([r.layers[0] for r in one], [r.tau for r in one], [r.lo for r in one],
                                    [r.hi for r in one], res.profile, reference=ref, seeds=dp.single_layer_seeds(pred)))

# %% [markdown]
# ```{glue:figure} fig_sweep
# :name: fig-sweep
#
# Top: {term}`tau` of drafters that read a single block output (these drafters see
# {glue:text}`sweep_share:.0%` of the triples' data), with the default triple for reference;
# red dashes mark single seeds of the layers trained twice. The intervals resample prompts
# only; the seeds show the training noise they leave out. Below, over the same layer index:
# the layer's Rényi-2 entropy, its median token norm and the ratio to the previous layer's,
# and CKA to the previous layer. Index N is the last block's output before the final norm.
# ```
#
# Alone, layer {glue:text}`peak_layer` is highest, $\tau$ = {glue:text}`peak_tau:.3f`
# [{glue:text}`peak_lo:.3f`, {glue:text}`peak_hi:.3f`]. But {glue:text}`peak_n_close:d`
# other layers lie within {glue:text}`peak_gap:.3f` of it, while two seeds of one layer
# differ by {glue:text}`peak_spread:.3f` on average ({glue:text}`peak_spread_n:d` layers
# with two seeds). So the sweep shows a trend over depth, not a best layer. Layer
# {glue:text}`single_worst_layer` is lowest ({glue:text}`single_worst_tau:.3f`).
#
# ### H2: does concatenation entropy predict $\tau$?

# %% tags=["hide-input"]
glue_figure("fig_score_tau", plot_scores_vs_tau(dp.score_panels(pred, tri), [r.tau for r in tri], [r.set for r in tri],
                                                ylabel="$\\tau$, mean over held-out prompts\n(depth and threshold of the online runs)"))
display(format_table(pd.DataFrame(pred.predictors)))

# %% [markdown]
# ```{glue:figure} fig_score_tau
# :name: fig-score-tau
#
# Selection score of each triple against its drafters' {term}`tau`; Spearman's $\rho$ and
# the number of triples in each title. Left: concatenation entropy $S_2$; right: mean
# pairwise CKA (lower = more diverse).
# ```
#
# Over the triples, $\rho(S_2, \tau)$ = {glue:text}`f_H2_figure`, n = {glue:text}`f_H2_n`.
# H2, that $S_2$ rises with $\tau$, is {glue:text}`f_H2_label`. The table also gives mean CKA, the deepest layer and a cheap
# supervised probe ({doc}`05_layer_selection`), each with its interval.
#
# ### H3: does token filtering help the prediction?

# %% tags=["hide-input"]
display(format_table(pd.DataFrame(pred.filtering)))

# %% [markdown]
# $\rho(S_2, \tau)$ with $S_2$ computed after dropping the tokens of lowest next-token
# entropy (quantile $q$), every quantile on the same number of tokens, and the change
# against no filtering: {glue:text}`f_H3_figure` at $q$ = 0.5, n = {glue:text}`f_H3_n`.
# H3 is {glue:text}`f_H3_label`.
#
# ### H4: does depth still matter with a per-layer norm?

# %% tags=["hide-input"]
display(format_table(pd.DataFrame(pred.norm_effects)))
display(format_table(pd.DataFrame(pred.norm_predictors)))

# %% [markdown]
# Each triple trained once more with an RMSNorm on each captured layer before `fc`, paired
# against the same triple without it. With the norm, $\rho$(deepest layer, $\tau$) =
# {glue:text}`f_H4_figure`, n = {glue:text}`f_H4_n`: H4 is {glue:text}`f_H4_label`.
#
# ### Online: lossless, and how fast?
#
# The default drafter and the best rule's decode the held-out prompts for real. At $T=0$
# the output must equal plain greedy decoding token for token. Plain decoding and
# prompt-lookup decoding run on the same prompts in the same session, interleaved.

# %% tags=["hide-input"]
online = pd.DataFrame.from_dict({name: vars(o) for name, o in res.online.items()}, orient="index")
display(format_table(online.drop(columns=["acceptance_t0"]).reset_index(names="set")))
display(format_table(pd.DataFrame(res.reconciliation)))
display(format_table(pd.DataFrame(eagle3_speedup.tau_definitions(res, pred, cfg))))
acc = {r.set: res.first_seed_acceptance(r.set) for r in tri[:4]}
acc.setdefault(res.default.set, res.first_seed_acceptance(res.default.set))
glue_figure("fig_acceptance", plot_acceptance_by_position(acc))

# %% [markdown]
# At $T=0$ speculative decoding reproduced plain greedy decoding exactly on
# {glue:text}`lossless_default` prompts with the default drafter and
# {glue:text}`lossless_rule` with the best rule's. Wall time against plain decoding:
# {glue:text}`speedup_default_t0:.2f`x with the default drafter and
# {glue:text}`speedup_rule_t0:.2f`x with the best rule's, on
# {glue:text}`n_online_prompts:d` prompts of up to {glue:text}`online_tokens:d` new tokens.
# At $T=1$ the best rule's drafter reaches $\tau$ = {glue:text}`tau_rule_t1:.3f`. A
# draft tree (top-{glue:text}`tree_topk:d`, {glue:text}`tree_size:d` draft tokens) reaches
# $\tau$ = {glue:text}`tau_tree:.3f` and {glue:text}`speedup_tree:.2f`x plain decoding.
# Why these speeds stay near 1 is the subject of {doc}`09_performance`.
#
# ```{glue:figure} fig_acceptance
# :name: fig-acceptance
#
# Acceptance by draft position $r_j$ (offline, $T=0$, depth {glue:text}`train_depth:d`
# without a draft threshold, first seed): the share of rounds that drafted position $j$ in
# which drafts $1..j$ were all accepted, for the four highest triples and the default.
# ```
#
# (sec-which-tau)=
# ### Which offline $\tau$
#
# The last table scores the same default drafters under each definition of offline $\tau$
# used in the book, one setting changed per row. The training-time evaluation gives
# {glue:text}`tau_train_default:.3f`. At the online depth and draft threshold it is
# {glue:text}`tau_pooled_default:.3f` ({glue:text}`tau_step_threshold:+.3f`; the depth
# goes {glue:text}`tau_step_depth`). The pre-registered outcome, the mean over prompts with
# seeds averaged per prompt, is {glue:text}`tau_outcome_default:.3f`. Every test on this
# page uses the outcome. Online, the first seed reaches {glue:text}`recon_online:.3f`
# against {glue:text}`recon_capped:.3f` offline on the same prompts and token limit.
#
# (sec-hypotheses)=
# ## How sure

# %% tags=["hide-input"]
display(format_table(findings.table(F, ["H1", "H2", "H3", "H4"])))

# %% [markdown]
# Each row is a pre-registered primary test, worded by the one rule of
# {doc}`08_results_summary` (the same record on every page). The paired tests detect a
# $\Delta\tau$ of about {glue:text}`paired_mde_rules:.3f` at 80% power at the strictest Holm
# level; a smaller difference is within noise, not evidence that the sets are equal. The
# tests resample prompts, with each set's seeds averaged; {doc}`06b_drafter_strength` adds
# the seeds' own spread. Caveats: the drafters are weak ({glue:text}`epochs:d` epoch, offline
# $\tau$ near {glue:text}`tau_default:.2f`), so the robustness page repeats the comparison
# for stronger drafters. The registration, the deviations and the earlier run are in
# {doc}`../lab/eagle3_speedup`.
#
# ## Try it
#
# On the smoke profile, from a fresh clone (the selection page writes the sets this page trains
# drafters on, so it runs first), in about ten minutes on two idle cores:
#
# ```bash
# wave study --profile smoke --only 05 --only 06_eagle3_speedup --no-build
# ```
#
# Look at the hypotheses table: with a handful of prompts H1 should read "not testable",
# because the paired bootstrap needs at least ten prompts.
