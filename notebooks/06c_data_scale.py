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
# # Does the layer answer hold for drafters trained on thousands of prompts?
#
# Every drafter of the earlier pages trained on the same few hundred distinct train prompts.
# Deployed EAGLE-3 drafters train on tens of thousands of distinct conversations answered by
# the target. This page trains the default triple on 4 and 16 times as many distinct prompts
# (a corpus of ShareGPT first turns, `data/prompts/README.md`) at fixed budgets of training
# tokens, and repeats chapter 6's comparison of layer sets (H7) at the largest data size.
# The design, its tests and its order of training were registered before any of its drafters
# trained: {doc}`../data_scale_preregistration`.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from activation_wave.benchmarks import data_scale
from activation_wave.core.results import load_benchmarks, load_optional
from activation_wave.plots.data_scale_figures import plot_data_scale_curve, plot_data_scale_sets, plot_not_run
from activation_wave.study.chapters import drafter_data_scale as ds, performance as perf
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.steps import notebook_config, save_results

cfg = notebook_config(profile, model, overrides)
# re-scores the design's drafters from the ledger; trains nothing (None until the design has run:
# `wave bench --only data_scale` trains it)
doc = data_scale.evaluate(cfg, train=False)
if doc is not None:
    save_results(ds.NAME, doc, cfg, results_root or None)
recipe = load_optional("recipe", cfg, results_root or None)
progress = data_scale.status(cfg) if doc is None else None  # how far the design has run (no tau before its end)
bench = load_benchmarks()
glue_values(scale_status=ds.status_text(doc, progress), scale_answer=ds.answer_text(doc),
            scale_curve=ds.curve_text(doc), scale_cost=ds.cost_text(doc, bench.get("data_scale")),
            scale_adopted=perf.adopted_text(bench.get("speculative_decoding"), "today's recipe drafter"))

# %% [markdown]
# ## The answer
#
# {glue:text}`scale_status`
#
# **H7.** {glue:text}`scale_answer`
#
# **The data curve.** {glue:text}`scale_curve`
#
# **Where the time goes.** {glue:text}`scale_cost`
#
# **Decoding with it** (measured in {doc}`09_performance`'s speculative-decoding benchmark).
# {glue:text}`scale_adopted`

# %% tags=["hide-input"]
glue_figure("fig_scale_curve", plot_data_scale_curve(doc, recipe) if doc else plot_not_run(ds.NOT_RUN))

# %% [markdown]
# ```{glue:figure} fig_scale_curve
# :name: fig-scale-curve
#
# The default triple's outcome $\tau$ (offline, chain depth 3, draft threshold 0.15, on the 96
# eval prompts; 95% bootstrap interval over prompts) against the distinct train prompts it
# saw (left) and against its training CPU-minutes (right), one colour per budget of training
# tokens (B1 = the recipe screen's base budget). Grey squares: the recipe screen's base and
# its samples-1 arm, which add data by resampling the same prompts (secondary, not a test;
# the samples-1 point includes its extra capture). Dashed red: the target $\tau$ 2.0; dotted
# (right): the fit over the largest data size's budgets on which the projection in the text
# rests (an extrapolation's basis, not a test).
# ```

# %% tags=["hide-input"]
glue_figure("fig_scale_sets", plot_data_scale_sets(doc) if doc and doc["sets"] else plot_not_run(ds.NOT_RUN))

# %% [markdown]
# ```{glue:figure} fig_scale_sets
# :name: fig-scale-sets
#
# H7: each selection rule's set against the default at the largest data size, paired over
# the eval prompts (seeds averaged per prompt; 95% paired-bootstrap interval; Holm across the
# sets). The grey band is the smallest effect the design detects with 80% power.
# ```

# %% tags=["hide-input"]
ds.h7_table(doc)
