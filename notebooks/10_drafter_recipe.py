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
# # Which recipe makes the strongest drafter per CPU-minute?

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import display

from activation_wave.core.results import load_benchmarks, load_optional
from activation_wave.core.tables import format_table
from activation_wave.plots import plot_recipe_curves, plot_recipe_forest, plot_recipe_projection
from activation_wave.study.chapters import drafter_recipe as dr
from activation_wave.study import findings
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.steps import notebook_config

cfg = notebook_config(profile, model, overrides)
doc = load_optional("recipe", cfg, results_root or None)
bench = load_benchmarks()
proj = dr.data_projection(bench, dr.projection_marks(bench))
mde_lo, mde_hi = dr.mde_range(doc)
glue_values(**dr.screen_values(doc), **dr.seed_values(doc), **dr.equal_cost_values(doc), **dr.efficiency_values(doc),
            **dr.projection_values(proj), mde_lo=mde_lo, mde_hi=mde_hi,
            **dr.agreement_values(load_optional("llamacpp_agreement", cfg, results_root or None)),
            **dr.strength_values(load_optional("06_predictors", cfg, results_root or None), bench))
findings.glue(findings.record(cfg, results_root or None), ["R1"])  # R1's record, quoted in the answer

# %% [markdown]
# ```{admonition} Answer
# Of {glue:text}`n_arms` one-factor changes to the base recipe ({glue:text}`n_seeds`
# seeds each, paired over {glue:text}`n_prompts` eval prompts, Holm-corrected), {glue:text}`n_helps` helped
# ({glue:text}`helps_names`: {glue:text}`help_delta:+.3f` in $\tau$, 95% interval {glue:text}`help_lo:+.3f` to
# {glue:text}`help_hi:+.3f`), {glue:text}`n_hurts` hurt and {glue:text}`n_noise` were within noise. R1, that some
# change helps, is {glue:text}`f_R1_label`. More data buys about {glue:text}`proj_b:+.3f` offline $\tau$ per
# doubling of the training data.
# ```
#
# ## Why it matters
#
# The drafters of this study are weak: the EAGLE-3 default's drafter reaches an offline {term}`tau` of
# {glue:text}`ch6_tau:.2f` ({doc}`06_eagle3_speedup`), the study's strongest 135M drafter
# {glue:text}`bench_tau:.2f` on the same measure, and EAGLE-3's drafter for LLaMA-3.1-8B-Instruct 6.1 to 6.7 at
# $T = 0$ on a GPU {cite}`li2025eagle3`.
# A drafter pays only when its $\tau$ exceeds what a round costs ({doc}`11_cpu_payoff`). On a 2-core CPU,
# training time is the budget, so the useful question is which change to the training recipe buys the
# most $\tau$ per CPU-minute: a better start, another loss, another optimiser setting, a smaller draft
# vocabulary, or simply more data.
#
# ## Method
#
# One factor of the base recipe changes at a time, on the EAGLE-3 default layers: the head's
# initialisation, the number of unrolled training steps and their weights, hard or soft targets, an extra
# feature-regression loss, the draft vocabulary, the learning rate, the number of epochs, and one sampled
# response per train prompt beside the greedy ones. The training-time test and the draft vocabulary are
# explained on the {doc}`concepts page <../background>` ({ref}`sec-eagle3`). Every arm and the base train
# {glue:text}`n_seeds` seeds. The outcome is the offline $\tau$ of a depth-3 chain at $T = 0$ on each eval
# prompt, seeds averaged per prompt. The test (R1) is a paired bootstrap over prompts of each arm's
# difference from the base, Holm-corrected across the arms: an arm helps or hurts when its adjusted $p$ is
# below 0.05; otherwise this design cannot tell. The table's intervals are unadjusted 95% intervals, so an arm
# whose interval excludes 0 can still miss Holm's threshold: its word follows the adjusted $p$. The registration fixed all of this before any drafter trained;
# it is in the {doc}`lab record <../lab/drafter_recipe>`, with the arms dropped to fit the compute budget.
#
# ## Results

# %% tags=["hide-input"]
if doc is not None:
    display(format_table(pd.DataFrame(dr.arm_rows(doc))))
glue_figure("fig_recipe_forest", plot_recipe_forest(doc) if doc else dr.not_run_figure())
glue_figure("fig_recipe_curves", plot_recipe_curves(doc) if doc else dr.not_run_figure())

# %% [markdown]
# ```{glue:figure} fig_recipe_forest
# :name: fig-recipe-forest
#
# Each arm's paired difference in $\tau$ from the base recipe (seeds averaged per prompt; 95% paired
# bootstrap interval over the eval prompts); filled markers where the Holm-adjusted $p$ is below 0.05.
# ```
#
# The base recipe reaches $\tau$ {glue:text}`base_tau:.3f`; the arms that help: {glue:text}`helps_names`.
# Sampled responses (the arm `samples-1`) are more data, not a better use of the same data. Read at the
# base's training cost ({glue:text}`eq_minutes:.1f` CPU-minutes), the learning curve of the first arm that
# helps, {glue:text}`eq_arm`, stands at {glue:text}`eq_arm_tau:.3f`, {glue:text}`eq_word` the base's
# {glue:text}`eq_base_tau:.3f` ({numref}`fig-recipe-curves`); where it stands below, its gain is paid for with
# extra training. The cheapest arm not worse than the base, {glue:text}`eff_arm`, trains in
# {glue:text}`eff_share:.0%` of the base's CPU time. Stage 2, which combines the arms that help and compares
# them with today's recipe on the full data, {glue:text}`stage2_word`
# ({ref}`the lab record says why <lab-recipe-stage2>`).
#
# ```{glue:figure} fig_recipe_curves
# :name: fig-recipe-curves
#
# Offline $\tau$ on the eval split after each epoch against the training CPU-minutes spent so far, for the
# base and the best arm (pooled over eval records, a secondary measure).
# ```
#
# ### What more data would take

# %% tags=["hide-input"]
if proj is not None:
    display(format_table(pd.DataFrame(dr.projection_rows(proj))))
glue_figure("fig_recipe_projection", plot_recipe_projection(proj) if proj else dr.not_run_figure())

# %% [markdown]
# Today's recipe was trained on the greedy responses plus 0 to {glue:text}`proj_samples` sampled responses per
# train prompt ({doc}`09_performance`). Over those {glue:text}`proj_n` drafters, each doubling of the data adds
# {glue:text}`proj_b:+.3f` offline $\tau$ (95% interval {glue:text}`proj_b_lo:+.3f` to
# {glue:text}`proj_b_hi:+.3f`). Extended along that line, the table gives the data and training time at which
# the curve would reach each engine's break-even $\tau$ on the 135M target, at today's measured cost of
# {glue:text}`proj_cpu_min:.1f` CPU-minutes per drafter. A chain of depth 3 yields at most
# {glue:text}`proj_tau_max` tokens per round.
#
# ```{glue:figure} fig_recipe_projection
# :name: fig-recipe-projection
#
# Today's recipe with more data: offline $\tau$ on the eval split against training CPU-minutes at today's
# measured cost per position (log scale; $+k$ = sampled responses per train prompt), the fit dashed beyond
# the last drafter, and each engine's break-even put on the same offline scale. Crosses mark the
# extrapolated training time to each.
# ```
#
# The projection is a straight line on a log axis, and nothing measured says the gain per doubling holds that
# far: the sampled responses come from the same train prompts. Its intervals carry only the slope's
# uncertainty, and generating the responses is not counted.
#
# ### Can llama.cpp generate the training data?
#
# llama.cpp decodes SmolLM2 several times faster than the study's PyTorch loop, so it could write the
# sampled responses. Its greedy responses matched the PyTorch target's on {glue:text}`ag_identical` of
# {glue:text}`ag_compared` eval prompts (mean matching prefix {glue:text}`ag_prefix:.0%` of a response). Where
# they part, llama.cpp's token was the PyTorch target's second choice in {glue:text}`ag_second` of
# {glue:text}`ag_div_n` cases, with a median logit gap of {glue:text}`ag_gap_median:.2f`: near-ties that the
# 8-bit rounding of activations decides. On an all-F32 copy of the weights it matched
# {glue:text}`ag_f32_identical` of {glue:text}`ag_f32_compared` (prefix {glue:text}`ag_f32_prefix:.0%`), but no
# faster than PyTorch in batches. So the quantised engine's responses are a near-tie variant of the target's,
# not the same data, and the screen trains on the PyTorch target's responses only.
#
# ## How sure

# %% tags=["hide-input"]
power, seeds = dr.power_rows(doc), dr.seed_rows(doc)
if power:
    display(format_table(pd.DataFrame(power)))
if seeds:
    display(format_table(pd.DataFrame(seeds)))

# %% [markdown]
# - **Power.** The smallest difference the screen detects at 80% power and the strictest Holm level ranges
#   from {glue:text}`mde_lo:.3f` to {glue:text}`mde_hi:.3f` over the arms. The first table lists the arms found
#   within noise whose difference is at least half of that: not shown to be without effect.
# - **Seeds.** R1 resamples prompts with each arm's seeds averaged. Resampling the seeds as well (a
#   hierarchical bootstrap, {glue:text}`seed_n_boot:,d` resamples; a sensitivity analysis, not a test of its
#   own) changes {glue:text}`seed_changed` of {glue:text}`seed_n` verdicts, listed in the second table. With
#   {glue:text}`n_seeds` seeds per arm their spread is itself poorly known.
# - **Monte Carlo error.** Every p rests on {glue:text}`n_boot:,d` resamples; the largest Monte Carlo error of a
#   Holm-adjusted p is {glue:text}`p_mcse_max:.4f`, and a p within 0.01 of 0.05 reads "close to the line".
# - **Caveats.** Arms were dropped to fit the compute budget before any was scored, but after the first
#   learning curves were logged; an interim report was committed before the screen was complete. Both are
#   disclosed in the {doc}`lab record <../lab/drafter_recipe>`.
#
# ## Try it
#
# `wave study --profile smoke --only 10_drafter_recipe --no-build` re-executes this page in a minute from the
# committed results; the smoke profile has no screen of its own, so it shows the design and the data curve.
# Then, to run a screen (the line above made `scratch/`),
# `WAVE_RESULTS=scratch/results wave bench --profile smoke --only recipe --out scratch/bench-smoke.json`
# trains tiny drafters in a few minutes and writes each arm's delta tau against the base recipe, with its
# interval, to the recipe file it names (the two paths keep the committed results as they are); an arm
# whose interval lies right of 0 helps.
