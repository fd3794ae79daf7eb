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
# # Performance and scale
#
# How fast is the study on a 2-core CPU, does its memory stay flat as the token count
# grows, and what would the `paper` profile need on GPUs? Every figure on this page is
# read from `data/results/benchmarks.json`, written by `wave bench`. Each benchmark
# measures its subject and a baseline side by side in the same run (the machine is
# shared, so only ratios measured together mean anything) and records peak memory.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import display

from activation_wave.benchmarks import llamacpp_speed as llamacpp_bench
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import performance as perf
from activation_wave.study.chapters.eagle3_speedup import precision_text
from activation_wave.study.steps import load_results, notebook_config
from activation_wave.core.tables import format_table
from activation_wave.plots import (plot_data_scaling, plot_decoding_costs, plot_memory_curve, plot_metric_scaling,
                                   plot_ratios)

cfg = notebook_config(profile, model, overrides)
target = cfg.bench.speedup_target
bench = perf.load_benchmarks()
display(pd.DataFrame([{"benchmark": name, "measured on": perf.measured_on(entry)} for name, entry in bench.items()
                      if isinstance(entry, dict) and "measured" in entry]))

# %% [markdown]
# ## Each step against its baseline

# %%
table = pd.DataFrame(perf.ratio_rows(bench, target), columns=["benchmark", "ratio", "target", "figure", "baseline",
                                                               "peak MiB"])
display(table.round(3))
glue_figure("fig_ratios", plot_ratios(list(table.benchmark), list(table.ratio),
                                      [None if pd.isna(t) else t for t in table.target]))
values = perf.capture_values(bench.get("capture_throughput"))
values["precision_note"] = precision_text(bench.get("training_precision"))

# %% [markdown]
# ```{glue:figure} fig_ratios
# :name: fig-ratios
#
# Each benchmark's speed relative to the baseline measured in the same run (log scale;
# above 1 = faster than the baseline); black ticks mark the targets set for the study.
# ```
#
# Capturing every layer's hidden states, the next-token entropy and writing the shard
# runs at {glue:text}`capture_ratio:.2f` of a plain forward's throughput
# ({glue:text}`capture_tps:.0f` tokens/s), on records of the default profile whose
# responses are {glue:text}`capture_resp_share:.0f`% of the tokens. The capture costs
# little more than a plain forward (and can even beat it) because it runs the LM head
# (49k logits per token) only on the response positions whose statistics it keeps,
# while `model(...)` computes logits everywhere. Against the decoder alone, with no LM head at all, it runs at
# {glue:text}`capture_vs_decoder:.2f`: that is the whole cost of copying out every
# layer, the entropy and top-k, and writing the shard.
#
# **Why drafters train in fp32.** {glue:text}`precision_note`. The two
# "drafter training" rows of the figure are this benchmark (`training_precision`): fp32's
# training speed relative to bf16 autocast's, on the CPU as it is and limited to AVX2 kernels.
#
# ## Speculative decoding: what the speedup is made of

# %%
spec = bench.get("speculative_decoding")
values |= perf.decoding_values(spec, target) | {"spec_adopted": perf.adopted_text(spec)}
glue_figure("fig_cost_model", plot_decoding_costs(spec))
if spec:  # by prompt source: distinct prompts, and their runs (one per interleaved round)
    by_source = pd.DataFrame.from_dict(spec["by_source"], orient="index").rename_axis("prompt source")
    display(by_source.drop(columns="tokens_per_s", errors="ignore").round(3))
else:  # not measured yet: the page says so instead of failing the build
    print("speculative_decoding has not been measured: run `wave bench --only speculative_decoding`")
try:  # chapter 6's drafters, as its last execution recorded them (this profile's results)
    runs6 = load_results("06_eagle3_speedup", cfg, results_root or None)["runs"]
except FileNotFoundError:
    runs6 = []
values |= perf.study_drafter_values([r.get("train_s") for r in runs6], cfg.draft.workers)
values["study_epochs"] = cfg.draft.epochs

# %% [markdown]
# ```{glue:figure} fig_cost_model
# :name: fig-cost-model
#
# Left: the speedup that the measured costs of one round predict for each $\tau$
# (verify the drafted tokens in one target forward, plus the drafter's steps), with
# the speedups measured side by side with plain decoding (the adopted drafter of
# {doc}`06c_data_scale` among them, where it ran); the dotted line is the
# ceiling where every draft is accepted. Right: the cost of one target forward as it
# verifies more tokens at once, relative to a one-token step, and the cost of one
# draft step.
# ```
#
# The benchmark's drafter (layers {glue:text}`spec_layers`) is trained longer than
# chapter 6's drafters ({glue:text}`spec_epochs:d` epochs instead of
# {glue:text}`study_epochs:d`) and on more data: the greedy responses
# plus {glue:text}`spec_samples:d` sampled responses per train prompt,
# {glue:text}`spec_positions:,d` response positions ({ref}`below <fig-data-scaling>`
# says why). It reached $\tau$ = {glue:text}`spec_tau:.2f` at $T=0$ on
# {glue:text}`spec_n_prompts:d` held-out prompts ({glue:text}`spec_lossless`). One
# plain step of the target costs {glue:text}`spec_step_ms:.0f` ms and one speculative
# round (verify + drafts, depth {glue:text}`spec_depth:d`)
# {glue:text}`spec_round_ms:.0f` ms, so speculation breaks even at
# $\tau$ = {glue:text}`spec_break_even:.2f`; the model predicts
# {glue:text}`spec_pred:.2f`x and the run measured {glue:text}`spec_speedup:.3f`x at
# $T=0$, pooled over {glue:text}`spec_rounds`; {glue:text}`spec_verdict`. At $T=1$ it
# measured {glue:text}`spec_speedup_t1:.2f`x, and {glue:text}`spec_vs_lookup:.2f`x
# relative to prompt-lookup decoding; by source, {glue:text}`spec_speedup_code:.2f`x on
# the HumanEval prompts and {glue:text}`spec_speedup_chat:.2f`x on the team's chat
# prompts. Verifying
# {glue:text}`spec_depth_plus:d` tokens in one forward costs
# {glue:text}`spec_verify_rel:.2f`x a one-token step on this machine: each extra token
# adds about {glue:text}`spec_marginal_ms:.1f` ms (one core multiplies a few rows by
# every fp32 weight matrix; the step itself is mostly reading those weights), and a
# draft step is small, so a perfect drafter could reach {glue:text}`spec_ceiling:.2f`x
# at this depth. The measured speedup differs from the prediction by what the model
# leaves out (the verify cost at the actual context lengths, bookkeeping in Python,
# rolling back the KV cache) and by the noise of a shared machine. In the timed run
# itself a plain token took {glue:text}`obs_step_ms:.0f` ms and a speculative round
# {glue:text}`obs_round_ms:.0f` ms on average, {glue:text}`obs_round_rel:.2f`x a token;
# the measured speedup is $\tau$ divided by that ratio, so 1.2x at this round cost
# needs $\tau$ = {glue:text}`obs_tau_needed:.2f`. Both halves hold the speedup down: a
# round that costs well over one step because the verify of several tokens is
# compute-bound on one fp32 core, and drafters that rarely get past the first draft
# token.
#
# **The drafter trained on thousands of distinct prompts** ({doc}`06c_data_scale`, issue 41).
# {glue:text}`spec_adopted`
#
# Training that drafter took {glue:text}`spec_train_min:.0f` minutes
# ({glue:text}`spec_train_cpu_min:.1f` CPU-minutes, the cost of today's recipe that every page
# quotes, from `activation_wave.study.training_costs`) at
# {glue:text}`spec_train_tps:.0f` response positions per second (all unrolled steps, in
# {glue:text}`spec_train_dtype` on {glue:text}`spec_train_threads:d` thread(s); the table at the top of
# this chapter names the CPU); each of chapter 6's {glue:text}`study_drafters_n:d` drafters took
# {glue:text}`study_drafter_s:.0f` s on average under this profile,
# {glue:text}`study_workers:d` trained at once: about {glue:text}`study_drafters_min:.0f`
# minutes of training when none is cached yet. {glue:text}`ch6_cold_cost` ({ref}`timings
# <sec-profile-timings>`).
#
# ## How $\tau$ grows with training data

# %%
scaling = bench.get("drafter_data_scaling")
glue_figure("fig_data_scaling", plot_data_scaling(scaling["points"] if scaling else [],
                                                  scaling["fit"] if scaling else None))
if scaling:
    display(pd.DataFrame(scaling["points"]).reindex(columns=[
        "samples_per_prompt", "fraction", "records", "loss_tokens", "tau_offline", "tau_predicted",
        "train_acc_last_epoch", "train_wall_s"]).round(3))
values |= perf.data_scaling_values(scaling, spec, values["obs_tau_needed"], target)

# %% [markdown]
# ```{glue:figure} fig_data_scaling
# :name: fig-data-scaling
#
# Offline {term}`tau` on the whole eval split of the benchmark's drafter recipe, against
# the response positions it was trained on: seeded shares of the greedy responses
# (circles) with their log-linear fit (dashed; dotted where it extrapolates), and all
# greedy responses plus k sampled responses per train prompt (squares).
# ```
#
# Trained on all {glue:text}`ds_full_tokens:,d` greedy response positions, the drafter
# reaches an offline $\tau$ of {glue:text}`ds_full_tau:.3f` while it gets
# {glue:text}`ds_train_acc:.2f` of its own training positions right in the last epoch:
# it memorises rather than generalises. Over the {glue:text}`ds_n:d` shares, each
# doubling of the data adds about {glue:text}`ds_per_doubling:.3f` to $\tau$ (the last
# step, the second half of the data, added {glue:text}`ds_last_gain:.3f`).
#
# More data does not need more prompts: the target can answer the same train prompts
# again, sampling at temperature {glue:text}`ds_temperature:.1f` instead of greedily
# (`--set data.samples_per_prompt=k` gives each of the {glue:text}`spec_train_prompts:d`
# train prompts k more responses; the benchmark's drafter uses k =
# {glue:text}`spec_samples:d`). The drafter still learns the target's own distribution at every
# position, now along paths the greedy response does not take, and the held-out
# evaluation stays on greedy responses to other prompts. {glue:text}`ds_sampled`. The
# speedup grows about in proportion to $\tau$ (a round costs about the same whatever is
# accepted), so {glue:text}`ds_need`.

# %% tags=["remove-cell"]
from activation_wave.study.chapters import drafter_recipe as recipe_page

glue_values(recipe_headline=recipe_page.screen_headline(cfg, results_root or None))

# %% [markdown]
# Is there a cheaper lever than data? The pre-registered recipe screen of
# {doc}`10_drafter_recipe` changed one factor of this recipe at a time, on the greedy
# responses only: {glue:text}`recipe_headline`. Its "What it would take" section projects
# this data curve to the targets and break-even points.
#
# ## Lower-precision weights: a cheaper round, but not token for token

# %%
low = bench.get("speculative_decoding_bf16")
if low:
    display(pd.DataFrame({"tokens/s": low["tokens_per_s"]}).T.round(2))
    display(pd.DataFrame({"verify ms (tokens)": {f"{tag}, {k}": v for tag, vs in low["verify_ms"].items()
                                                 for k, v in vs.items()}}).T.round(2))
values |= perf.low_precision_values(low)

# %% [markdown]
# The issue that set up chapter 6 listed lower-precision weights as a lever for a
# cheaper round; the CPU this benchmark ran on (2026-12-01) has bf16 matrix units, and so
# has the AMD EPYC of the 2026-12-02 decoding benchmark (its machine record in the table
# above); a CPU with AVX2 only has none and emulates bf16 slowly (`training_precision`). The benchmark casts the same target to
# {glue:text}`low_dtype` in memory and decodes {glue:text}`low_n:d` held-out prompts
# with the same drafter, interleaved with the fp32 runs. A verify of four tokens then
# costs {glue:text}`low_v4:.2f`x a one-token step instead of
# {glue:text}`low_v4_fp32:.2f`x, and speculative decoding runs
# {glue:text}`low_speedup:.2f`x faster than plain decoding in the same precision
# ({glue:text}`low_speedup_fp32:.2f`x in fp32 in the same run; $\tau$ =
# {glue:text}`low_tau:.2f`; plain {glue:text}`low_dtype` decoding itself runs at
# {glue:text}`low_plain_rel:.2f`x of fp32). But the output is no longer the plain
# greedy output: speculative and plain {glue:text}`low_dtype` decoding produce the same
# tokens on {glue:text}`low_identical` prompts (fp32: {glue:text}`low_identical_fp32`),
# and plain {glue:text}`low_dtype` matches plain fp32 on {glue:text}`low_identical_plain`.
# The rule is exact in exact arithmetic; in bf16 a forward of four tokens rounds
# differently from four one-token forwards, and once one near-tied argmax flips, the
# two continuations part. The study keeps fp32, where the same check passes on every
# prompt.

# %% [markdown]
# ## llama.cpp: the engine a CPU user would pick
#
# The PyTorch path above is this study's own decoder. On a CPU, people serve a GGUF model
# with llama.cpp, which runs the same 4-bit SmolLM2 file with its own kernels and, since
# recently, EAGLE-3 drafters (`--spec-type draft-eagle3`). The `llamacpp` benchmark
# (`wave bench --only llamacpp`, after `bash scripts/setup_llamacpp.sh`) converts a drafter
# with llama.cpp's own converter (`wave export --engine llamacpp`) and times plain and
# EAGLE-3 `llama-server` prompt by prompt, interleaved, on held-out prompts at $T=0$.

# %%
display(format_table(pd.DataFrame(llamacpp_bench.engine_comparison(bench))))
values |= perf.llamacpp_values(bench.get("llamacpp"), adopted=(spec or {}).get("adopted"))
sweep = perf.sweep_rows(bench.get("llamacpp"))
if sweep:  # one row per setting, each on its own servers; depth and p_min as the server reported them
    display(format_table(pd.DataFrame(sweep)))

# %% [markdown]
# With {glue:text}`lc_threads` thread, plain llama.cpp decodes at
# {glue:text}`lc_plain_tps:.1f` tokens/s and EAGLE-3 llama.cpp, drafting up to
# {glue:text}`lc_depth:d` tokens a round (set on its command line and reported back by
# the server), at {glue:text}`lc_eagle_tps:.1f` tokens/s
# ({glue:text}`lc_speedup:.2f`x; identical to plain greedy on {glue:text}`lc_identical`
# prompts{glue:text}`lc_identical_other`; chapter 11 traced the same effect at 1.5B to the
# batched kernels of llama.cpp's repacked 4-bit weights and runs that comparison with
# `--no-repack`, identical on every prompt there, while this 135M GGUF (Q4_1) still parted on
# one prompt of 12 with the flag; see the amendment to {ref}`chapter 11's pre-registration <sec-cpu-prereg>`). The drafter is {glue:text}`lc_drafter_note`; in llama.cpp it reaches $\tau$ =
# {glue:text}`lc_tau:.2f`. From llama.cpp's own timings, a round (draft, then verify)
# costs {glue:text}`lc_round_steps:.2f` plain steps of {glue:text}`lc_step_ms:.1f` ms:
# drafting {glue:text}`lc_draft_ms:.1f` ms, verifying and the rest
# {glue:text}`lc_verify_ms:.1f` ms. At that round cost a drafter would need $\tau$ =
# {glue:text}`lc_tau_1x:.2f` to break even and {glue:text}`lc_tau_15x:.2f` for 1.5x; but
# {glue:text}`lc_reach`. The benchmark drafter of the PyTorch path reaches $\tau$ =
# {glue:text}`spec_tau:.2f` online.
#
# The draft depth and `p_min` are settings of the server, not of a request: this
# llama-server build compiles the per-request speculative fields out of its request
# schema, so the benchmark starts a server per setting with `--spec-draft-n-max` and
# `--spec-draft-p-min`, and stops unless the server reports back the settings it was
# given and its own counters never draft more tokens a round than the depth allows (the
# `drafted_per_round` column). In the sweep (second table, one thread, fewer and
# shorter prompts than above), {glue:text}`lc_sweep`. The fastest setting reached
# {glue:text}`lc_best_setting`. Whether speculation pays off in llama.cpp at this model
# size is decided by that fixed cost per round as much as by the drafter; the first
# table puts plain llama.cpp beside this study's lossless
# PyTorch path (the two paths were timed in separate runs, each against its own plain
# decoding in the same run). {glue:text}`lc_note` Whether a larger target changes that
# balance, measured with the third architecture's 1.5B target and its own drafters on one
# machine, is the question of {doc}`11_cpu_payoff`.
#
# ## Memory as the token count grows


# %% tags=["hide-input"]
mem = bench.get("memory_scaling")
glue_figure("fig_memory", plot_memory_curve(mem["figure"] if mem else {}, mem["baseline"] if mem else {}))
values |= perf.memory_values(mem)

# %% [markdown]
# ```{glue:figure} fig_memory
# :name: fig-memory
#
# Resident memory while streaming tokens of every layer through the entropy and
# minibatch-CKA accumulators (measured), against the memory that holding the same
# tokens at once would take (computed).
# ```
#
# Streaming {glue:text}`mem_tokens:d` tokens, resident memory ends at
# {glue:text}`mem_last:.0f` MiB, {glue:text}`mem_change` its level after the first
# checkpoint.
#
# ## How the metric code scales

# %% tags=["hide-input"]
scal = bench.get("metrics", {}).get("entries", {}).get("scaling", {})
glue_figure("fig_scaling", plot_metric_scaling(scal))
if scal:
    display(pd.DataFrame({k: {"exponent": v["exponent"]} for k, v in scal.items()}).T)

# %% [markdown]
# ```{glue:figure} fig_scaling
# :name: fig-scaling
#
# Time of the pairwise products (entropy $S_2$ closed form and CKA) and of all layer
# entropies as tokens, layers or width grow, on random data of the study's shape; the
# table gives each log-log slope.
# ```
#
# (sec-profile-timings)=
# ## How long each profile takes here


# %%
rows = perf.profile_timings()
timings = pd.DataFrame(rows, columns=["profile", "notebook", "seconds", "longest seconds"])
display(timings.pivot(index="notebook", columns="profile", values=["seconds", "longest seconds"]).round(1))
values |= perf.timing_values(rows)
from activation_wave.study import training_costs as costs

values["spec_train_cpu_min"] = costs.budget_cpu_min(bench, None).get(costs.TODAY, {}).get("cpu_min", float("nan"))
values["ch6_cold_cost"] = perf.cold_cost_text(values["study_drafters_min"], values["ch6_longest_min"])
glue_values(**values)

# %% [markdown]
# Summed over the notebooks' last executions: {glue:text}`total_smoke_min:.0f` minutes for
# `smoke` and {glue:text}`total_default_min:.0f` minutes for `default`. A chapter's last
# execution reuses whatever its caches held: when chapter 6 or 7 found its drafters
# already trained, its time is mostly scoring them. The `longest seconds` columns keep each
# notebook's longest recorded execution, the one that filled its caches (captures,
# drafters) and so the cost of a fresh clone: summed, {glue:text}`longest_default_min:.0f`
# minutes for `default` (runs on different days and loads of this shared machine, so an
# estimate, not one timed run). Neither figure includes the one-time generation of the
# responses, which fresh clones skip because they are committed.
#
# ## The paper profile on GPUs
#
# No GPU machine was lent to the sessions that built and measured this study, so the GPU
# path (bf16 weights, `device_map="auto"` through `accelerate`, drafter training and
# decoding on `cuda`) has not been run here: the code selects the device from the
# model's parameters and is tested on CPU only. What can be checked without weights is
# the plan.
#
# `wave dry-run` validates a config and estimates each step without loading weights,
# from the model's shape and stated hardware assumptions:

# %%
display(pd.DataFrame(perf.paper_estimates(["meta-llama/Llama-3.1-8B-Instruct",
                                           "meta-llama/Llama-3.1-70B-Instruct"])).set_index("model").T)

# %% [markdown]
# These are planning estimates (bandwidth-bound decoding, FLOP-bound capture at an
# assumed efficiency), not measurements. They show why the `paper` profile captures
# every layer for a subset of records only: all layers of every token of 40,000
# conversations would take petabytes. At that scale the statistics come from the
# subset, and the drafter is trained by SpecForge or the EAGLE scripts, which compute
# the target's hidden states on the fly, with the layer ids this study selects
# ({doc}`../rerun`).
