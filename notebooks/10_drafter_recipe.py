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
#
# Every drafter in this study is far weaker than one that serves: chapter 6's one-epoch
# drafters reach an offline $\tau$ of {glue:text}`ch6_tau:.2f` on the pre-registered outcome, the
# benchmark drafter of chapter 9 {glue:text}`bench_tau:.2f` (its training-time evaluation:
# depth 3, no draft threshold), and released EAGLE-3 drafters for 8B targets
# 2.5 to 6 {cite}`li2025eagle3`. Chapter 9's data-scaling curve gains about +0.09 $\tau$ per
# doubling of the training positions, so data alone is a slow lever on this 2-core
# machine. This page measures the other levers (initialisation, loss, optimiser, draft
# vocabulary, epochs) one at a time on the default triple, then combines the ones that
# help. The study runs as a benchmark (`wave bench --only recipe`, resumable from its
# cache), not inside the book's own command; this page reads its results file.

# %% [markdown]
# (sec-recipe-prereg)=
# ## Pre-registration
#
# Fixed on 2026-12-02, before any drafter of this study was trained; the commit that adds
# this section is named in the results file. Nothing measured before it (chapter 9's
# data-scaling points, chapter 6's drafters) counts as a test of what follows.
#
# **Outcome.** As in chapter 6 ({ref}`sec-prereg`): the offline mean accepted length
# $\tau$ of a chain draft at $T=0$ on each of the 96 eval-split prompts, at the depth and
# draft-probability threshold of the decoding benchmark's online runs (`bench.depth` = 3,
# `bench.draft_threshold` = 0.15), one value per prompt and drafter; the seeds of an arm
# are averaged per prompt before any comparison. Every drafter reads the EAGLE-3 default
# triple $[2, N/\!/2, N-3]$ = [2, 15, 27].
#
# **Stage 1, the screen.** The *base* recipe is today's benchmark recipe (10 epochs,
# training-time test with 3 steps and step decay 0.8, AdamW at learning rate 3e-3 with a
# 5% linear warm-up and cosine decay to 10%, batches of about 2048 tokens, soft targets
# from the target's top-8, a 4096-token draft vocabulary, a randomly initialised head,
# bf16 matmuls; fp32 since the amendment below) trained on the greedy train responses only (324 records, 39,361 response
# positions). Each *arm* changes one factor of the base:
#
# | family | arm | change |
# |---|---|---|
# | initialisation | head-target | `lm_head` starts from the target's head rows of the draft vocabulary, trainable |
# | initialisation | head-frozen | as head-target, frozen |
# | initialisation | norm-target | the final norm starts from the target's |
# | initialisation | block-target | the drafter's block starts from the target's last block |
# | loss | ttt-1 | 1 training-time-test step |
# | loss | ttt-5 | 5 steps |
# | loss | decay-1 | step decay 1.0 (every step weighs the same) |
# | loss | hard | the target's argmax as a hard label instead of soft top-8 targets |
# | loss | feature-reg | adds 0.1 x SmoothL1 between each step's output and the target's last hidden state (EAGLE-1/2's regression term {cite}`li2024eagle`) |
# | vocabulary | vocab-1k, vocab-16k, vocab-full | draft vocabulary of 1024, 16384 tokens, all 49,152 |
# | optimiser | lr-high, lr-low | learning rate x3, /3 |
# | optimiser | lr-constant | no warm-up, no decay |
# | optimiser | batch-1k, batch-4k | about 1024, 4096 tokens per batch |
# | budget | epochs-5, epochs-20 | 5, 20 epochs at fixed data |
# | data | samples-1 | plus one sampled response ($T$ = 0.7) per train prompt |
#
# Each arm and the base train 2 seeds. **Primary test (R1)**, per arm: paired bootstrap
# over the 96 eval prompts (10,000 resamples) of $\Delta\tau$ = arm $-$ base, two-sided
# $p$, Holm-corrected across the arms of the screen. An arm *helps* when $\Delta\tau > 0$
# with Holm-adjusted $p < 0.05$, *hurts* when $\Delta\tau < 0$ with Holm-adjusted
# $p < 0.05$, and is *within noise* otherwise. Reported beside each arm and labelled as
# secondary: its training CPU-seconds (and data-generation CPU-seconds for the data arm),
# $\Delta\tau$ per CPU-minute, and its learning curve (offline $\tau$ after every epoch).
#
# **Stage 2, the combination.** The *combined* recipe applies every arm that helps; of
# two arms that exclude each other (two vocabulary sizes, head-target and head-frozen, two
# learning rates, two batch sizes, two epoch counts, ttt-1 and ttt-5) it takes the one with
# the larger $\Delta\tau$. It trains on today's benchmark data (the greedy responses plus 6
# sampled responses per train prompt), 2 seeds, beside today's benchmark recipe on the same
# data, 2 seeds. **Primary test (R2)**: paired bootstrap of $\Delta\tau$ = combined $-$
# today, one test at $\alpha$ = 0.05. **Efficiency (R3, descriptive):** the CPU-minutes each
# learning curve needs to reach today's offline 1.74 (depth 3, no threshold, chapter 9),
# against the target of at most half of today's 58 CPU-minutes.
#
# **Stage 3, adoption.** If R2 is supported, the combined recipe becomes the benchmark
# drafter's recipe, and the decoding benchmark (at least 5 interleaved rounds) and the
# llama.cpp benchmark run again with it. If not, today's recipe stays and this page says
# so. Each learning curve is fitted as $\tau = a + b \log_2(\text{CPU-minutes})$ and
# extrapolated to the $\tau$ at which each engine breaks even (our PyTorch loop, llama.cpp);
# the extrapolation is labelled as such.
#
# **Power.** Chapter 6's paired per-prompt differences between triples had standard
# deviations of 0.031 to 0.040 (seeds averaged, $n$ = 96; `06_predictors.json`). At 0.035
# the minimum detectable $\Delta\tau$ at 80% power is about 0.010 unadjusted and about
# 0.014 at the strictest Holm level of 20 arms. With two seeds, and arms that move the recipe more than a layer set
# does, the spread may be larger; the results file reports each arm's realised MDE, and a
# comparison whose interval covers 0 is reported as within noise.
#
# **Deviation from the issue, decided before training.** The issue asks for each arm
# against today's benchmark recipe. That recipe costs 58 CPU-minutes per drafter
# (`train_wall_s` 3483 in chapter 9's benchmark), so 20 arms at 2 seeds would take about
# 39 CPU-hours on a machine with 2 cores. The screen therefore runs at greedy-only data
# (about 8 CPU-minutes per base drafter, offline $\tau$ 1.52 in chapter 9), and only the
# combination is compared with today's recipe at full data.
#
# **Amendment, 2026-12-02, still before any drafter of this study trained.** The base
# trains in fp32, not bf16: this machine's CPU has no bf16 units, and bf16 autocast trained
# 13x slower than fp32 on it (0.42 vs 6.0 s per step, measured side by side), so every
# profile's drafters now train in fp32. At fp32 speed here (about 380 response positions
# per second per core) a base drafter costs about 17 CPU-minutes, not 8, and the screen
# (42 drafters) about 12 CPU-hours: it runs over several sessions from its cache, and is
# reported only when complete or shrunk by the order below.
#
# **If the design does not fit the compute budget**, the screen shrinks in this order
# (the first named is dropped first): vocab-full, epochs-20, block-target, batch-4k,
# batch-1k, lr-constant, lr-low, decay-1, ttt-5; never fewer than 2 seeds, never fewer
# eval prompts. More prompts than the study's 256 would need a prompt set that a package
# ships offline; none was found before registration, so that arm is not part of the
# screen.
#
# **Amendment, 2026-12-03: the screen is shrunk by the whole order.** Decided from
# training times alone, when 9 of the 42 drafters had trained and none had been scored
# (their ledger entries hold no score). A drafter of the base recipe took 620 to 840
# seconds at one thread on the AMD EPYC of the later sessions (two at a time on its 2
# cores), so the 33 left would need about 3.5 hours, and stage 2 (four drafters on seven
# times the data) about 2.5 more, while each session lasts 3 hours and may start on a
# fresh machine. All nine arms of the order are dropped: vocab-full, epochs-20,
# block-target, batch-4k, batch-1k, lr-constant, lr-low, decay-1 and ttt-5. The screen
# keeps 11 arms (head-target, head-frozen, norm-target, vocab-1k, vocab-16k, ttt-1, hard,
# feature-reg, lr-high, epochs-5, samples-1) and the base, 2 seeds each: 24 drafters.
# The Holm family is these 11 arms; every other rule above is unchanged. The results file
# lists the dropped arms under `shrunk`, and `--set bench.recipe_arms=...` runs any of
# them later.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import Markdown, display

from activation_wave.core.results import load_benchmarks, load_optional
from activation_wave.core.tables import format_table
from activation_wave.plots import (plot_recipe_confirm, plot_recipe_curves, plot_recipe_forest,
                                   plot_recipe_projection)
from activation_wave.study.chapters import drafter_recipe as dr
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.steps import notebook_config

cfg = notebook_config(profile, model, overrides)
doc = load_optional("recipe", cfg, results_root or None)
planned = dr.planned_arms(cfg)
glue_values(recipe_status=dr.status_text(doc, planned), recipe_equal_cost=dr.equal_cost_text(doc),
            recipe_seeds=dr.seed_sensitivity_text(doc), recipe_power=dr.power_text(doc),
            recipe_p_error=dr.p_error_text(doc),
            **dr.agreement_values(load_optional("llamacpp_agreement", cfg, results_root or None)),
            **dr.strength_values(load_optional("06_predictors", cfg, results_root or None), load_benchmarks()))

# %% [markdown]
# ## Where the study stands
#
# {glue:text}`recipe_status`
#
# {glue:text}`recipe_p_error` {glue:text}`recipe_power`
#
# **Seeds.** R1 resamples prompts only, with each arm's two seeds averaged per prompt.
# {glue:text}`recipe_seeds`. The analysis is stored in the results file under
# `seed_sensitivity` (per arm: delta, interval, p, Holm p, verdict).
#
# **What the registration did not foresee, disclosed.** (i) An interim report: with 10 of the
# 11 arms scored (samples-1 still training), the results file was written and this page,
# chapter 8 and the landing page were executed and committed with those verdicts (commits
# `b63fde1` and `ce5dec4`, 2026-12-03), before the screen was complete; the page then said
# the verdicts were interim, and the final file replaced them with every arm in. (ii) The
# shrink of 2026-12-03 (amendment above) was decided when no drafter had been scored on the
# outcome, but each trained drafter's training log already held its pooled eval $	au$ after
# every epoch (the learning curves), so the shrink was not made blind to how the first arms
# were doing. It dropped the arms by the pre-registered order, which leaves little room for
# choice, but the order of events is what it was.

# %% tags=["hide-input"]
if doc is not None:
    display(format_table(pd.DataFrame(dr.arm_rows(doc))))
glue_figure("fig_recipe_forest", plot_recipe_forest(doc) if doc else dr.not_run_figure())
glue_figure("fig_recipe_curves", plot_recipe_curves(doc) if doc else dr.not_run_figure())

# %% [markdown]
# ```{glue:figure} fig_recipe_forest
# :name: fig-recipe-forest
#
# R1: each arm's paired $\Delta\tau$ against the base (seed-averaged per prompt, 95% paired
# bootstrap interval over the eval prompts); filled markers where the Holm-adjusted $p$ is
# below 0.05, a square for the post-hoc combined arm. Empty until the screen has run.
# ```
#
# ```{glue:figure} fig_recipe_curves
# :name: fig-recipe-curves
#
# Offline $\tau$ on the eval split after each epoch against the training CPU-minutes spent
# so far, for the base and the best arm (a secondary measure: pooled over eval records).
# Empty until the screen has run.
# ```

# %% [markdown]
# {glue:text}`recipe_equal_cost`
#
# When the screen has run, the table above the figures lists each arm's outcome ($\tau$, the mean over
# eval prompts of the seed-averaged per-prompt $\tau$, with its 95% bootstrap interval), its
# paired $\Delta\tau$ against the base with the 95% paired bootstrap interval, the
# Holm-adjusted $p$ and R1's verdict; the CPU columns are secondary measures.

# %% [markdown]
# (sec-recipe-confirm)=
# ## Stage 2: the combined recipe against today's, on the full data
#
# {glue:text}`recipe_confirm`
#
# *A case the registration did not foresee, settled after R1 was known (2026-12-03).* Stage
# 2 fixes its data at today's (the greedy responses plus 6 sampled responses per train
# prompt) and so drops a data arm's change. When the data arm is the only arm that helps,
# nothing of the combination is left: the "combined" recipe is today's recipe, and R2 would
# compare it with itself. Stage 2 then does not run and today's recipe stays; the data arm's
# gain is the lever today's recipe already pulls, six times over (chapter 9's data curve, and
# "What it would take" below).

# %% tags=["hide-input"]
confirm = (doc or {}).get("confirm") or {}
glue_values(recipe_confirm=dr.confirm_text(doc))
glue_figure("fig_recipe_confirm", plot_recipe_confirm(confirm, break_even=dr.break_even_taus())
            if confirm.get("run") else dr.not_run_figure())

# %% [markdown]
# ```{glue:figure} fig_recipe_confirm
# :name: fig-recipe-confirm
#
# Stage 2's learning curves: offline $\tau$ on the eval split (online depth, no draft
# threshold, as chapter 9's 1.74; pooled over records, seeds averaged, a secondary measure)
# against the training CPU-minutes per drafter, log scale. Dashed: each curve's fit
# $\tau = a + b \log_2(\text{minutes})$, an extrapolation beyond the last measured epoch,
# out to the break-even lines of our PyTorch loop and of llama.cpp (chapter 9). Empty until
# stage 2 has run.
# ```

# %% [markdown]
# (sec-recipe-what-it-takes)=
# ## What it would take
#
# {glue:text}`recipe_best`. On the screen, {glue:text}`recipe_efficiency`. The one lever
# that helped is data, the lever today's recipe already pulls: chapter 9 trained today's
# recipe on the greedy train responses plus 0 to 6 sampled responses per train prompt. The
# pre-registered curve form, fitted to those drafters and extended (an extrapolation, not a
# measurement), says how much training each mark would need:

# %% tags=["hide-input"]
bench = load_benchmarks()
proj = dr.data_projection(bench, dr.projection_marks(bench))
glue_values(recipe_best=dr.best_reached(bench), recipe_projection=dr.projection_text(proj),
            recipe_efficiency=dr.efficiency_text(doc))
if proj is not None:
    display(format_table(pd.DataFrame(dr.projection_rows(proj))))
glue_figure("fig_recipe_projection", plot_recipe_projection(proj) if proj else dr.not_run_figure())

# %% [markdown]
# {glue:text}`recipe_projection`
#
# ```{glue:figure} fig_recipe_projection
# :name: fig-recipe-projection
#
# Today's recipe with more data: offline $\tau$ on the eval split (depth 3, no threshold)
# of chapter 9's drafters against their training CPU-minutes at today's measured cost per
# position (log scale; $+k$ = sampled responses per train prompt), the fit
# $\tau = a + b \log_2(\text{minutes})$ dashed beyond the last drafter, and the marks put on
# the same offline scale: the target and goal, and the $\tau$ at which our PyTorch loop
# breaks even (its measured round, chapter 9). llama.cpp's break-even (chapter 11's round) lies
# above what a depth-3 chain can yield and is not drawn. Crosses mark the extrapolated
# training time to each.
# ```
#
# The projection is a straight line on a log axis, and nothing measured says the gain per
# doubling holds that far: the sampled responses come from the same 324 train prompts, and
# their gain per doubling already ran below the greedy-share fit (chapter 9). The intervals in
# the table carry only the slope's uncertainty over the five drafters, not whether the line
# holds; generation is not counted. Reaching a mark is also not the same as paying: our
# PyTorch loop breaks even at today's $\tau$, and llama.cpp's round on this target costs more
# plain steps than a depth-3 chain can return in tokens. A larger target does not by itself
# change that on this CPU: chapter 11 found the 1.5B target's verify, not the drafting, to
# dominate the round ({doc}`11_cpu_payoff`).

# %% [markdown]
# (sec-recipe-llamacpp-data)=
# ## Can llama.cpp generate the training data?
#
# Sampled responses are the data lever of chapter 9's scaling curve, and llama.cpp decodes
# SmolLM2 several times faster than our PyTorch loop. Before any llama.cpp response trains a
# drafter, its greedy responses were compared with the PyTorch target's on the eval prompts
# (`wave generate --engine llamacpp --check-against ...`; `scripts/llamacpp_agreement.py`
# reruns the check). Running the GGUF as shipped (Q4_1 weights, quantised activations),
# llama.cpp produced {glue:text}`ag_identical:d` of {glue:text}`ag_compared:d` responses
# identical to the PyTorch target's, with a mean matching prefix of
# {glue:text}`ag_prefix:.0%` of a response. The prompts' tokens agree everywhere; at the
# first differing token, llama.cpp's choice was the PyTorch target's second choice in
# {glue:text}`ag_second:d` of {glue:text}`ag_div_n:d` cases, with a median logit gap of
# {glue:text}`ag_gap_median:.2f`: near ties that the 8-bit rounding of activations decides.
# On an all-F32 copy of the same weights, llama.cpp matched {glue:text}`ag_f32_identical:d`
# of {glue:text}`ag_f32_compared:d` (mean matching prefix {glue:text}`ag_f32_prefix:.0%`),
# but at about 11 tokens/s, no faster than PyTorch generating in batches. These speeds were
# measured on a busy machine and are lower bounds.
#
# So the quantised engine's responses are a near-tie variant of the target's own, not the
# same data: the recipe screen trains on the PyTorch target's responses only, and any
# llama.cpp-generated data would carry its engine in its provenance (every response record
# now names the engine that produced it).
