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
# Every hypothesis the study fixed before its drafters were trained, with its primary
# test and its verdict. The verdict column has one vocabulary, the same on every row:
#
# - **supported**: the registered rule held (the effect went the predicted way, beyond
#   its Holm-corrected threshold);
# - **not supported**: the interval excludes no effect, on the other side or not far
#   enough;
# - **within noise**: the 95% interval covers no effect, so this design cannot tell;
# - **not testable**: the test could not be applied (no drafters, or a drafter that
#   accepts nothing, which measures nothing).
#
# Each row's page states the finding; the {doc}`lab record <../lab/index>` keeps each
# registration.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["remove-input"]
from activation_wave.core.tables import format_table
from activation_wave.study.chapters import results_summary as ch
from activation_wave.study.glue import glue_values
from activation_wave.study.steps import open_chapter

cfg, _ = open_chapter(profile, model, overrides, capture=False)
R = ch.load_chapters(cfg, results_root or None)  # every chapter's result object
table = ch.glance_rows(ch.every_hypothesis(cfg, results_root or None, R))
glue_values(**{f"n_{w.replace(' ', '_')}": int((table["verdict"] == w).sum()) for w in
               ("supported", "not supported", "within noise", "not testable")}, n_hypotheses=len(table))
format_table(table)

# %% [markdown]
# Of {glue:text}`n_hypotheses` registered tests, {glue:text}`n_supported` are supported,
# {glue:text}`n_not_supported` not supported, {glue:text}`n_within_noise` within noise and
# {glue:text}`n_not_testable` not testable.
#
# Where to read each: H1-H4 in {doc}`06_eagle3_speedup`; H5, H6 and H7 (stronger
# drafters, thousands of distinct prompts) in {doc}`06b_drafter_strength`; G1-G3 (a second
# architecture) in {doc}`07_gemma`; R1 (the drafter's recipe) in
# {doc}`10_drafter_recipe`; C1 and C2 (a 1.5B target in llama.cpp) in {doc}`11_cpu_payoff`.
#
# ## Try it
#
# `wave study --profile smoke --only 08` rebuilds this table from the smoke profile's
# results; every verdict there rests on a few prompts, so expect "within noise" and
# "not testable" rows.
