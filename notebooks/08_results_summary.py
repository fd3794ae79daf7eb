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
# # Results at a glance
#
# Every test the study registered before its drafters were trained, with its primary
# statistic and its verdict. Each row is the test's one record (`findings.json`, from
# `data/findings/registry.yaml`), and every page that quotes the test shows the same
# number and word. One rule gives the word on every row:
#
# - **supported**: the 95% interval lies on the side of no effect the test predicted, and
#   the p its correction gives (Holm's, where several sets are compared) is below 0.05;
# - **not supported**: the interval lies on the other side (the side is named: "lower"
#   means the default drafts better);
# - **within noise**: the interval includes no effect, or the corrected p is 0.05 or
#   more, so this design cannot tell;
# - **not testable**: the test could not be applied (no drafters, or a drafter that
#   accepts nothing, which measures nothing).
#
# A test that compares several sets has one row per set ("H5/combined"). Each row's page
# states the finding; the {doc}`lab record <../lab/index>` keeps each registration.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["remove-input"]
from activation_wave.core.tables import format_table
from activation_wave.study import findings
from activation_wave.study.glue import glue_values
from activation_wave.study.steps import open_chapter

cfg, _ = open_chapter(profile, model, overrides, capture=False)
F = findings.record(cfg, results_root or None)  # one record per registered test (and per compared set)
glue_values(**{f"n_{w.replace(' ', '_')}": n for w, n in F.tally().items()}, n_hypotheses=len(F.records),
            n_tests=len({r.test for r in F.records}))
format_table(findings.table(F))

# %% [markdown]
# Of {glue:text}`n_hypotheses` rows ({glue:text}`n_tests` registered tests),
# {glue:text}`n_supported` are supported, {glue:text}`n_not_supported` not supported,
# {glue:text}`n_within_noise` within noise and {glue:text}`n_not_testable` not testable.
#
# Where to read each:
#
# - H1-H4: {doc}`06_eagle3_speedup`;
# - H5, H5c, H6 and H7 (stronger drafters, thousands of distinct prompts):
#   {doc}`06b_drafter_strength`;
# - G1-G3 (a second architecture): {doc}`07_gemma`;
# - R1 (the drafter's recipe): {doc}`10_drafter_recipe`;
# - C1 and C2 (a 1.5B target in llama.cpp): {doc}`11_cpu_payoff`.
#
# (sec-layer-tests)=
# ## The layer test on each model and budget
#
# The study's question, whether a selection rule's set drafts better than the default
# $[2, N/\!/2, N-3]$, was registered once per model and training budget. Each row is that
# test's record: "beaten" when some rule's set is supported, "not beaten" when none is, and
# "not testable" when no arm of the test could be tested (a drafter that accepts no draft).

# %% tags=["remove-input"]
format_table(findings.layer_tests(F))

# %% [markdown]
# (sec-drafters-by-name)=
# ## Drafters by name
#
# The pages quote several drafters of the same layers, each at its own $\tau$. Each has one
# name here, with its training budget and which $\tau$ the pages give for it: offline (scored
# on the cached greedy answers) or online (a real decoding run), and in which decoder.

# %% tags=["remove-input"]
import pandas as pd

format_table(pd.DataFrame(findings.drafters(cfg, results_root or None)).drop(columns=["page"]),
             {"tau": "{:.2f}"})

# %% [markdown]
# The offline and online values differ for the same drafter: an online run decodes fewer
# prompts, cuts answers at a token limit and, in an engine, drafts with its own threshold.
#
# ## Try it
#
# `wave study --profile smoke --only 08_results_summary --no-build` rebuilds this table from the
# smoke profile's results in a minute. A test gets a row once its page has run on the smoke profile
# (run the other pages' lines first); every verdict there rests on a few prompts, so expect
# "within noise" and "not testable" rows.
