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
# One table per question of the study, every entry read from the results files that
# the chapters wrote (`data/results/<profile>/<model>/`).

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["remove-input"]
import pandas as pd
from IPython.display import display

from activation_wave.study.glue import glue_values
from activation_wave.study.chapters import cross_model, results_summary as ch
from activation_wave.study.chapters.cross_drafters import triples_frame
from activation_wave.study.chapters.drafter_predictors import ranking_text
from activation_wave.study.steps import open_chapter
from activation_wave.core.tables import format_table

cfg, _ = open_chapter(profile, model, overrides, capture=False)
R = ch.load_chapters(cfg, results_root or None)  # every chapter's result object
s = ch.run(cfg, chapters=R)  # the lined-up numbers: activation_wave/study/chapters/results_summary.py

# %% [markdown]
# ## Data

# %% tags=["remove-input"]
c0 = R.data.summary
display(pd.Series({"model": cfg.model, "records (prompts)": c0.records, "tokens captured": c0.tokens,
                   "response positions": c0.response_positions, "cache on disk (MiB)": c0.disk_mib},
                  name="value").to_frame())

# %% [markdown]
# ## Information and similarity across depth

# %% tags=["remove-input"]
display(format_table(pd.DataFrame(s.findings, columns=["quantity", "value"])))

# %% [markdown]
# ## Which layers, and do drafters agree?
#
# Every named set of chapter 5 with its scores, its drafters' $\tau$ on chapter 6's
# pre-registered outcome (offline, at the online runs' depth and draft threshold, mean over
# the eval prompts of the seed-averaged per-prompt $\tau$, with a 95% interval over prompts),
# and on the same outcome the paired $\Delta\tau$ against the default with its 95% interval
# and Holm-adjusted p (rules among the rules, other sets among all sets). Rows are ordered by
# the outcome; {glue:text}`ranking`.

# %% tags=["remove-input"]
display(format_table(pd.DataFrame(s.selection), {"percentile of S2": "{:.1f}", "Holm p": "{:.3g}", "seeds": "{:.0f}"}))
glue_values(ranking=ranking_text(R.paired, 3))

# %% [markdown]
# ### The pre-registered hypotheses
#
# Chapter 6 fixed four hypotheses and their primary tests before its drafters were
# trained ({ref}`sec-prereg`), the page after it two more for the same layer sets at a
# stronger training budget ({ref}`sec-strength-prereg`: H5 per set, H6 per triple), and
# chapter 7 three more for the drafters of the second architecture ({ref}`sec-cross-prereg`,
# G1-G3), the recipe screen R1 for the drafter's training recipe ({ref}`sec-recipe-prereg`), and
# chapter 11 two for the 1.5B target in llama.cpp ({ref}`sec-cpu-prereg`, C1 and C2), and the
# data-scale design H7 for drafters trained on thousands of distinct prompts
# ({doc}`../data_scale_preregistration`; its rows, and H5's third budget, appear once its
# drafters have trained); here is each verdict, by the rule fixed then.

# %% tags=["remove-input"]
from activation_wave.core.results import load_benchmarks, load_optional, load_result
from activation_wave.study.chapters import cpu_payoff as cpu
from activation_wave.study.chapters import cross_drafters as cd
from activation_wave.study.chapters import drafter_data_scale, drafter_recipe

try:
    ch11 = load_result(cpu.NAME, cfg, results_root or None, cls=cd.CrossDrafterResult)
except FileNotFoundError:
    ch11 = None
scale_doc = load_optional(drafter_data_scale.NAME, cfg, results_root or None)
later = (drafter_recipe.hypotheses(load_optional("recipe", cfg, results_root or None))
         + cpu.evaluate_hypotheses(load_benchmarks().get(cpu.BENCH), ch11) + drafter_data_scale.hypotheses(scale_doc))
display(format_table(pd.DataFrame(list(s.hypotheses) + later)))

# %% tags=["remove-cell"]
from activation_wave.study.chapters import drafter_strength

glue_values(strength_answer=drafter_strength.answer_text(R.strength), scale_answer=drafter_data_scale.answer_text(scale_doc),
            strength_change=drafter_strength.change_text(R.strength))

# %% [markdown]
# **Stronger drafters** ({doc}`06b_drafter_strength`). {glue:text}`strength_answer`
# Against the one-epoch answer: {glue:text}`strength_change`.
#
# **Thousands of distinct prompts** ({doc}`06c_data_scale`, H7). {glue:text}`scale_answer`

# %% tags=["remove-input"]
ne = R.paired.norm_effects
nan = float("nan")
depth1 = next((p for p in s.predictors if p["units"] == "single layers" and p["name"] == "deepest"), None)
glue_values(norm_delta_min=min((e.delta for e in ne), default=nan), norm_delta_max=max((e.delta for e in ne), default=nan),
            norm_hi_max=max((e.hi for e in ne), default=nan), n_norm=len(ne),
            n_prompts_norm=min((e.n for e in ne), default=0),
            rho_single_depth=depth1["rho"] if depth1 else nan, rho_single_lo=depth1["lo"] if depth1 else nan,
            rho_single_hi=depth1["hi"] if depth1 else nan, n_single=depth1["n"] if depth1 else 0)

# %% [markdown]
# Read together: on SmolLM2 the selection scores do not point to better drafters, and the
# default triple is the one to beat. A drafter reading *one* layer gets better with depth
# (Spearman's $\rho$ = {glue:text}`rho_single_depth:.2f`, 95% interval
# {glue:text}`rho_single_lo:.2f` to {glue:text}`rho_single_hi:.2f`, over
# {glue:text}`n_single:d` single layers, chapter 6's sweep), yet among triples those
# reaching into the last blocks are worse, and the entropy rules pick exactly those.
# Normalising each layer before `fc` did not rescue the deep triples at this budget: it
# lowered $\tau$ for each of the {glue:text}`n_norm:d` triples (paired over
# {glue:text}`n_prompts_norm:d` prompts, by {glue:text}`norm_delta_max:.3f` to
# {glue:text}`norm_delta_min:.3f`; the highest upper interval end is
# {glue:text}`norm_hi_max:.3f`), so the arm that was
# to test the depth effect may have mostly shown that one epoch is too little for the normalised
# input. The page after chapter 6 tested that reading with 10 epochs (H6 in the table above):
# there the norm still lowers $\tau$ on the default triple, so one epoch was not the whole
# story; read H6 with that page's CPU confound and seed-sensitivity sentence.

# %% [markdown]
# ### What orders the drafters
# Spearman's $\rho$ of each cheap score against $\tau$, with the number of units and a
# 95% bootstrap interval (chapter 6's paired analysis).

# %% tags=["remove-input"]
display(format_table(pd.DataFrame(s.predictors)))
glue_values(tau_spread=s.tau_spread, tau_half_ci=s.tau_half_ci, **{f"depth_{k}": nan if v is None else v
                                                                   for k, v in vars(s.depth).items()})

# %% [markdown]
# On the outcome, the {glue:text}`depth_n_late:d` triples that read a layer at or above
# {glue:text}`depth_late_from:d` (the last three blocks) average $\tau$ =
# {glue:text}`depth_tau_late:.3f`, the other {glue:text}`depth_n_early:d`
# {glue:text}`depth_tau_early:.3f`: a difference of {glue:text}`depth_delta:+.3f`
# (95% interval {glue:text}`depth_lo:+.3f` to {glue:text}`depth_hi:+.3f`, resampling the
# triples within each group and the {glue:text}`depth_n_prompts:d` eval prompts; a
# comparison made after seeing the results, not a pre-registered test). All triples lie
# within {glue:text}`tau_spread:.3f` of each other; the mean half-width of one set's
# marginal 95% interval is {glue:text}`tau_half_ci:.3f`, so only the paired comparisons
# above can separate them.

# %% [markdown]
# ## Speculative decoding on this machine

# %% tags=["remove-input"]
display(format_table(ch.online_table(R.drafters).reset_index(names="drafter")))

# %% tags=["remove-cell"]
from activation_wave.study.chapters import drafter_recipe as recipe_page

from activation_wave.core.results import load_benchmarks, load_optional

recipe_doc = load_optional("recipe", cfg, results_root or None)
glue_values(recipe_headline=recipe_page.screen_headline(cfg, results_root or None),
            recipe_reach=recipe_page.reach_text(load_benchmarks(), recipe_doc))

# %% [markdown]
# ## Stronger drafters
#
# The recipe screen of {doc}`10_drafter_recipe` changes one factor of the benchmark
# drafter's recipe at a time (pre-registered, primary test R1): {glue:text}`recipe_headline`.
# So far {glue:text}`recipe_reach`.

# %% [markdown]
# ## Two architectures

# %% tags=["remove-input"]
display(format_table(cross_model.overview_table(R.cross), {"default's S2 percentile": "{:.1f}"}))
display(format_table(triples_frame(R.cross_drafters)))

# %% [markdown]
# The second table: the two triples chapter 7 trained drafters on for the second
# architecture (offline $\tau$ per eval prompt at the online settings, seeds averaged; its
# single-layer sweep is {numref}`fig-cross-sweep`); rows G1-G3 of the hypotheses table test
# them.
