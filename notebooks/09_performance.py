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
# # Benchmark details: how fast is the study's own code?
#
# Every figure on this page is read from `data/results/benchmarks.json`, written by `wave bench`. Each
# benchmark measures its subject and a baseline side by side in the same run (the machine is shared, so
# only ratios measured together mean anything) and records peak memory. Whether speculative decoding pays
# is the subject of {doc}`11_cpu_payoff`; this appendix covers the study's pipeline: capture, metrics,
# drafter training, memory, run times and the paper profile's plan.

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import display

from activation_wave.core.tables import format_table
from activation_wave.plots import plot_data_scaling, plot_memory_curve, plot_metric_scaling, plot_ratios
from activation_wave.study import training_costs as costs
from activation_wave.study.chapters import performance as perf
from activation_wave.study.chapters.eagle3_speedup import precision_values
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.steps import notebook_config

cfg = notebook_config(profile, model, overrides)
bench = perf.load_benchmarks()
display(pd.DataFrame([{"benchmark": name, "measured on": perf.measured_on(entry)} for name, entry in bench.items()
                      if isinstance(entry, dict) and "measured" in entry]))

# %% [markdown]
# ## Each step against its baseline

# %% tags=["hide-input"]
table = pd.DataFrame(perf.ratio_rows(bench), columns=["benchmark", "ratio", "figure", "baseline", "peak MiB"])
display(format_table(table, {"ratio": "{:.3g}", "figure": "{:.3g}", "baseline": "{:.3g}", "peak MiB": "{:.0f}"}))
shown = pd.DataFrame(perf.figure_rows(table.to_dict("records")))
glue_figure("fig_ratios", plot_ratios(list(shown.benchmark), list(shown.ratio)))
values = {**perf.capture_values(bench.get("capture_throughput")), **precision_values(bench.get("training_precision"))}

# %% [markdown]
# ```{glue:figure} fig_ratios
# :name: fig-ratios
#
# Each benchmark's speed relative to the baseline measured in the same run (log scale; above 1 = faster
# than the baseline). The order-2 closed form against eigendecompositions is in the table only: its ratio
# is orders of magnitude beyond the others.
# ```
#
# Capturing every layer's hidden states, the next-token entropy and writing the shard runs at
# {glue:text}`capture_ratio:.2f` of a plain forward's throughput ({glue:text}`capture_tps:.0f` tokens/s), on
# records whose responses are {glue:text}`capture_resp_share:.0f`% of the tokens. The capture runs the LM head
# only on the response positions whose statistics it keeps, while a plain forward computes logits
# everywhere. Against the decoder alone, with no LM head at all, it runs at
# {glue:text}`capture_vs_decoder:.2f`: that is the whole cost of copying out every layer, the entropy and
# top-k, and writing the shard.
#
# **Why drafters train in fp32.** On an {glue:text}`prec_cpu` ({glue:text}`prec_bf16_units` bf16 units,
# {glue:text}`prec_date`), bf16 autocast trained at {glue:text}`prec_bf16:.0f` loss positions per second and
# fp32 at {glue:text}`prec_fp32:.0f`. Limited to AVX2 kernels, as on a CPU without bf16 units, bf16 fell to
# {glue:text}`prec_avx2_bf16:.0f` against fp32's {glue:text}`prec_avx2_fp32:.0f`, {glue:text}`prec_avx2_ratio:.0f`
# times slower, so the profiles train in fp32 on every CPU.
#
# ## How $\tau$ grows with training data

# %% tags=["hide-input"]
scaling = bench.get("drafter_data_scaling")
glue_figure("fig_data_scaling", plot_data_scaling(scaling["points"] if scaling else [],
                                                  scaling["fit"] if scaling else None))
if scaling:
    display(format_table(pd.DataFrame(scaling["points"]).reindex(columns=[
        "samples_per_prompt", "fraction", "records", "loss_tokens", "tau_offline", "tau_predicted",
        "train_acc_last_epoch", "train_wall_s"])))
values |= perf.data_scaling_values(scaling)

# %% [markdown]
# ```{glue:figure} fig_data_scaling
# :name: fig-data-scaling
#
# Offline {term}`tau` on the whole eval split of today's drafter recipe against the response positions it
# was trained on: seeded shares of the greedy responses (circles) with their log-linear fit (dashed; dotted
# where it extrapolates), and all greedy responses plus k sampled responses per train prompt (squares).
# ```
#
# Trained on all {glue:text}`ds_full_tokens:,d` greedy response positions, the drafter reaches an offline
# $\tau$ of {glue:text}`ds_full_tau:.3f` while it gets {glue:text}`ds_train_acc:.2f` of its own training
# positions right in the last epoch: it memorises rather than generalises. Over the {glue:text}`ds_n`
# shares, each doubling of the data adds about {glue:text}`ds_per_doubling:.3f` to $\tau$. More data does not
# need more prompts: the target can answer the same train prompts again, sampling at temperature
# {glue:text}`ds_temperature:.1f` (`--set data.samples_per_prompt=k`); the held-out evaluation stays on greedy
# responses to other prompts. The squares show what those sampled responses bought; {doc}`10_drafter_recipe`
# fits and extends that curve.
#
# ## Lower-precision weights: a cheaper round, but not token for token

# %% tags=["hide-input"]
low = bench.get("speculative_decoding_bf16")
if low:
    display(pd.DataFrame({"tokens/s": low["tokens_per_s"]}).T.round(2))
values |= perf.low_precision_values(low)

# %% [markdown]
# Cast to {glue:text}`low_dtype` in memory, the same target and drafter decode {glue:text}`low_n` held-out
# prompts with a verify of four tokens at {glue:text}`low_v4:.2f`x a one-token step instead of
# {glue:text}`low_v4_fp32:.2f`x, and speculative decoding runs {glue:text}`low_speedup:.2f`x plain decoding in
# the same precision ({glue:text}`low_speedup_fp32:.2f`x in fp32 in the same run). But the output is no longer
# the plain greedy output: speculative and plain {glue:text}`low_dtype` decoding produce the same tokens on
# {glue:text}`low_identical` prompts (fp32: {glue:text}`low_identical_fp32`). In bf16 a forward of four tokens
# rounds differently from four one-token forwards, and once one near-tied argmax flips, the continuations
# part. The study keeps fp32.
#
# ## llama.cpp settings on the 135M target

# %% tags=["hide-input"]
sweep = perf.sweep_rows(bench.get("llamacpp"))
if sweep:  # one row per setting, each on its own servers; depth and p_min as the server reported them
    display(format_table(pd.DataFrame(sweep)))

# %% [markdown]
# The draft depth and the probability cut-off are settings of llama-server, not of a request: the
# benchmark starts a server per setting and checks that the server reports back what it was given. The
# table gives, per setting, $\tau$, the tokens drafted per round, the round's cost in plain steps and the
# speedup over plain llama.cpp (one thread, fewer and shorter prompts than {doc}`11_cpu_payoff`).
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
# Resident memory while streaming tokens of every layer through the entropy and minibatch-CKA accumulators
# (measured), against the memory that holding the same tokens at once would take (computed).
# ```
#
# Streaming {glue:text}`mem_tokens:,d` tokens, resident memory ends at {glue:text}`mem_last:.0f` MiB, a change
# of {glue:text}`mem_growth:+.0f` MiB from the first checkpoint.
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
# Time of the pairwise products (entropy $S_2$ closed form and CKA) and of all layer entropies as tokens,
# layers or width grow, on random data of the study's shape; the table gives each log-log slope.
# ```
#
# (sec-profile-timings)=
# ## How long each profile takes here

# %% tags=["hide-input"]
rows = perf.profile_timings()
timings = pd.DataFrame(rows, columns=["profile", "notebook", "seconds", "longest seconds"])
display(timings.pivot(index="notebook", columns="profile", values=["seconds", "longest seconds"]).round(1))
values |= perf.timing_values(rows)
values["spec_train_cpu_min"] = costs.budget_cpu_min(bench, None).get(costs.TODAY, {}).get("cpu_min", float("nan"))
glue_values(**values)

# %% [markdown]
# Summed over the notebooks' last executions: {glue:text}`total_smoke_min:.0f` minutes for `smoke` and
# {glue:text}`total_default_min:.0f` minutes for `default`. A last execution reuses whatever its caches held.
# The `longest seconds` columns keep each notebook's longest recorded execution, the one that filled its
# caches, and so the cost of a fresh clone: summed, {glue:text}`longest_default_min:.0f` minutes for `default`
# (runs on different days and loads of this shared machine, so an estimate). Neither includes generating the
# responses, which a clone skips because they are committed. Training today's strongest 135M drafter costs
# {glue:text}`spec_train_cpu_min:.0f` CPU-minutes.
#
# ## The paper profile on GPUs
#
# No GPU machine was lent to the sessions that built this study, so the GPU path (bf16 weights,
# `device_map="auto"`, drafter training and decoding on `cuda`) has not been run here. The code selects the
# device from the model's parameters and is tested on CPU only. `wave dry-run` validates a config and
# estimates each step without loading weights, from the model's shape and stated hardware assumptions:

# %% tags=["hide-input"]
display(pd.DataFrame(perf.paper_estimates(["meta-llama/Llama-3.1-8B-Instruct",
                                           "meta-llama/Llama-3.1-70B-Instruct"])).set_index("model").T)

# %% [markdown]
# These are planning estimates (bandwidth-bound decoding, FLOP-bound capture at an assumed efficiency), not
# measurements. They show why the `paper` profile captures every layer for a subset of records only: all
# layers of every token of 40,000 conversations would take petabytes. At that scale the drafter is trained by
# SpecForge or the EAGLE scripts, with the layer ids this study selects ({doc}`../rerun`).
