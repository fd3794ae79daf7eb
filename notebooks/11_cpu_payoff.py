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
# # Does EAGLE-3 pay on a CPU?

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import display

from activation_wave.core.results import load_benchmarks
from activation_wave.core.tables import format_table
from activation_wave.plots import plot_ceiling, plot_decoding_costs, plot_where_it_pays
from activation_wave.study.chapters import cpu_payoff as cpu
from activation_wave.study.chapters import cross_drafters as cd
from activation_wave.study.chapters import performance as perf
from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study import findings
from activation_wave.study.steps import notebook_config

cfg = notebook_config(profile, model, overrides)
bench = load_benchmarks()
sizes, ceiling = bench.get(cpu.BENCH), bench.get(cpu.CEILING)
values = {**cpu.side_values(sizes), **cpu.ceiling_values(ceiling), **cpu.where_values(ceiling, sizes),
          **cpu.best_design_values(bench, ceiling), **perf.pytorch_values(bench.get("speculative_decoding")),
          **cpu.design_results(bench)}
values["best_floor_word"] = "below" if values["best_tau"] < values["floor_big"] else "above"
glue_values(**values)
F = findings.record(cfg, results_root or None)  # C1 and C2, quoted below
findings.glue(F, ["C1", "C2"])
# C2's first attempt (one-epoch drafters, no draft accepted by the default's): the lab record quotes it
first = cpu.load_drafters(cfg, results_root or None)
glue_values(**{k: v for k, v in cd.page_values(first, 1, prefix="c2first").items()
               if k.split("_", 1)[1] in ("tau_default", "tau_rule", "delta", "delta_lo", "delta_hi", "default_live",
                                         "eval_prompts", "records", "rule_set")})

# %% [markdown]
# ```{admonition} Answer
# On the 1.5B target at {glue:text}`side_threads` threads, EAGLE-3 in llama.cpp, with the drafter C1 names,
# ran at {glue:text}`f_C1_value` plain decoding ({glue:text}`f_C1_interval`, n = {glue:text}`f_C1_n`):
# C1, that it is faster, is {glue:text}`f_C1_label`. Its round costs
# {glue:text}`be_big_2:.2f` plain steps, so a drafter needs {term}`tau` {glue:text}`be_big_2:.2f` to break even;
# the best 1.5B drafter trained here reaches {glue:text}`best_tau:.2f` ({glue:text}`best_lo:.2f` to
# {glue:text}`best_hi:.2f`, n = {glue:text}`best_n` prompts). llama.cpp's model-free n-gram lookup ran at
# {glue:text}`ngd_speedup:.2f`x the plain server with default flags ({glue:text}`ngd_lo:.2f` to
# {glue:text}`ngd_hi:.2f`): {glue:text}`ngd_word`. In vLLM, whose plain decoding runs the fp32 weights,
# EAGLE-3 ran at {glue:text}`vbig_speedup:.2f`x plain vLLM ({glue:text}`vbig_lo:.2f` to
# {glue:text}`vbig_hi:.2f`, n = {glue:text}`vbig_n:d` prompts, a measurement), yet at
# {glue:text}`vbig_vs_llama:.2f`x the speed of plain llama.cpp ({ref}`vLLM on the 1.5B target <sec-vllm-1p5b>`).
# ```
#
# ## Why it matters
#
# Speculative decoding swaps one step of the target for a *round*: a small drafter proposes a few
# tokens, and the target checks them all in one forward pass, keeping the longest prefix it agrees
# with plus one token of its own. A round yields $\tau$ tokens and costs some number of plain steps,
# so the speedup is $\tau$ divided by that cost, and the cost of a round in plain steps is exactly the
# $\tau$ a drafter needs to break even.
#
# On a GPU, checking four tokens costs about as much as producing one: a decoding step is bound by
# reading the weights from memory, and the arithmetic for a few more tokens hides behind that read.
# That is why EAGLE-3 pays there. A CPU user runs a 4-bit model in llama.cpp on a few cores, where the
# arithmetic itself may be the bottleneck. If each extra token costs most of a step, the round grows
# with every token drafted, and no drafter can win it back. This page measures which case a CPU is in.
#
# ## Method
#
# Definitions of $\tau$, acceptance and speedup are on the {doc}`concepts page <../background>`
# ({ref}`sec-metrics`). Two engines and two targets were measured on one 2-core machine:
#
# - **llama.cpp**, the engine a CPU user would pick: the 4-bit SmolLM2-135M and
#   Qwen2.5-Coder-1.5B {cite}`hui2024qwen25coder` targets, plain decoding, EAGLE-3 with the study's
#   drafters converted by llama.cpp's own converter (draft depth 3), and llama.cpp's model-free
#   n-gram lookup, each as its own server. On {glue:text}`side_n` held-out prompts,
#   {glue:text}`side_new_tokens` new tokens at $T = 0$, the methods ran prompt by prompt in rotating
#   order, every server started with `--no-repack` so that a batch and a single token use the same
#   kernels.
# - **The study's own PyTorch decoder**, on the 135M target: {glue:text}`pt_n` prompts, each decoded
#   plainly and speculatively in {glue:text}`pt_rounds` interleaved rounds.
#
# Each speed is a pooled speedup (total tokens over total time, divided by the same for plain decoding)
# with a 95% paired bootstrap interval over prompts, and reads as faster, slower or within noise of
# plain decoding by whether that interval lies above 1, below it, or covers it.
#
# **The ceiling.** llama.cpp's benchmarking switch can accept every draft. With it, the round of a
# depth-$n$ drafter is measured term by term: the target's verify of $n+1$ tokens $V(n+1)$, the
# extraction of the hidden states the drafter reads $E$, and its $n+1$ calls $c$, each in plain steps,
# so that a round costs $V(n+1) + E + (n+1)\,c$. The round measured with every draft accepted is the
# ceiling: no drafter of that depth can do better.
#
# ## Results
#
# ### The round's terms

# %% tags=["hide-input"]
for table in cpu.ceiling_tables(ceiling): display(table)  # noqa: E701

# %% [markdown]
# Each extra verified token costs {glue:text}`slope_min:.2f` to {glue:text}`slope_max:.2f` of a plain step
# (the first table's slope). A slope near 1 means a batch of tokens is paid token by token, as when the
# 4-bit matrix products are bound by arithmetic; near 0, the verify is nearly free, as on a memory-bound GPU.
# At depth 3 the verify's extra tokens make up
# {glue:text}`share_min:.0%` to {glue:text}`share_max:.0%` of what a round costs beyond the step it replaces;
# the drafter's four calls cost {glue:text}`calls_min:.2f` to {glue:text}`calls_max:.2f` steps and the
# extraction at most {glue:text}`extraction_max:.2f`. The model $V(n+1) + E + (n+1)\,c$ predicts the measured
# rounds within {glue:text}`agree_worst:.0%` in all {glue:text}`agree_settings` settings of the second table,
# and within {glue:text}`agree_real:.0%` for rounds with real drafts.
#
# ### The ceiling

# %% tags=["hide-input"]
glue_figure("fig_ceiling", plot_ceiling(cpu.ceiling_frame(ceiling).to_dict("records"), cpu.measured_points(sizes)))

# %% [markdown]
# ```{glue:figure} fig_ceiling
# :name: fig-ceiling
#
# The ceiling: speedup over plain llama.cpp against $\tau$ for each draft depth (colour) and drafter
# file (solid f16, dashed 8-bit), one panel per target and thread count, measured with every draft
# accepted; the dot at $\tau$ = depth + 1 is the best any drafter of that depth can reach. Above the
# dotted line at 1 a drafter pays. Crosses: the drafters' real runs at the $\tau$ they reached.
# ```
#
# With every draft accepted, the 1.5B target reaches at most {glue:text}`ceil_big_2:.2f`x at
# {glue:text}`side_threads` threads (depth {glue:text}`ceil_big_2_depth`) and {glue:text}`ceil_big_1:.2f`x
# at 1 thread; the 135M target {glue:text}`ceil_small_2:.2f`x and {glue:text}`ceil_small_1:.2f`x. Break-even
# at depth 3, read from this run's measured round with the f16 drafter, needs $\tau$
# {glue:text}`be_big_2:.2f` at 2 threads and {glue:text}`be_big_1:.2f` at 1 thread on the 1.5B target, and
# {glue:text}`be_small_2:.2f` and {glue:text}`be_small_1:.2f` on the 135M target, against at most four tokens
# that a depth-3 round can yield. At depth 1 the 1.5B ceiling at 2 threads is {glue:text}`ceil1_big_2:.2f`x;
# below 1, no drafter of that depth can pay.
#
# ### The best 1.5B drafters, placed under the ceiling

# %% tags=["hide-input"]
display(format_table(cpu.designs_frame(bench), {"CPU-minutes": "{:.0f}", "outcome tau (mean over prompts)": "{:.2f}"}))

# %% [markdown]
# The study tried {glue:text}`n_designs` designs of a 1.5B drafter on the default layers $[2, 14, 25]$, each
# registered before it trained (table). The best reaches an offline $\tau$ of {glue:text}`best_tau:.2f`
# ({glue:text}`best_lo:.2f` to {glue:text}`best_hi:.2f`, mean over {glue:text}`best_n` eval prompts), trained
# on {glue:text}`best_what`. Break-even at depth 3 needs {glue:text}`be_big_2:.2f`, about
# {glue:text}`best_gap:.1f` times as many tokens per round. In llama.cpp the corpus drafter reached $\tau$
# {glue:text}`corp_tau:.2f`, with {glue:text}`corp_acceptance:.0%` of its drafts accepted, and ran at
# {glue:text}`f_C1_value` plain decoding (C1); a two-epoch drafter that barely drafts ($\tau$
# {glue:text}`toy_tau:.2f`) ran at {glue:text}`toy_speedup:.2f`x ({glue:text}`toy_lo:.2f` to
# {glue:text}`toy_hi:.2f`): {glue:text}`toy_word`. These designs are closed: each of them, its registered
# prediction and its result is in the {doc}`lab record <../lab/cpu_payoff>`.
#
# ### n-gram lookup against EAGLE-3

# %% tags=["hide-input"]
if sizes:
    display(format_table(cpu.speed_frame(sizes), {"tokens/s": "{:.2f}", "speedup": "{:.3f}", "tau": "{:.2f}"}))

# %% [markdown]
# On the 1.5B target at {glue:text}`side_threads` threads, n-gram lookup ran at {glue:text}`ng_speedup:.2f`x
# plain decoding with the same flags ({glue:text}`ng_lo:.2f` to {glue:text}`ng_hi:.2f`, $\tau$
# {glue:text}`ng_tau:.2f`, {glue:text}`ng_identical` outputs identical to plain): {glue:text}`ng_word`.
# Every server in that run skipped weight repacking (`--no-repack`, for identical outputs); against a
# plain server with llama.cpp's default flags, n-gram ran at {glue:text}`ngd_speedup:.2f`x
# ({glue:text}`ngd_lo:.2f` to {glue:text}`ngd_hi:.2f`): {glue:text}`ngd_word`. It drafts by copying what
# followed an earlier occurrence of the last few tokens, so a draft costs nothing to make, and it drafts
# only where the text repeats, where most of a draft is accepted. EAGLE-3 pays for every draft with
# drafter calls and a verify that grows with the draft. On the 135M target, EAGLE-3 with the recipe screen's
# base drafter ran at {glue:text}`small_speedup:.2f`x ({glue:text}`small_lo:.2f` to {glue:text}`small_hi:.2f`,
# $\tau$ {glue:text}`small_tau:.2f`): {glue:text}`small_word`.
#
# ### The study's own decoder on the 135M target

# %% tags=["hide-input"]
glue_figure("fig_cost_model", plot_decoding_costs(bench.get("speculative_decoding")))

# %% [markdown]
# ```{glue:figure} fig_cost_model
# :name: fig-cost-model
#
# The study's PyTorch decoder, 135M target. Left: the speedup that the measured cost of one round
# predicts for each $\tau$ (solid), the measured speedups (markers), and the ceiling where every draft is
# accepted (dotted). Right: the cost of one target forward as it verifies more tokens at once, relative
# to a one-token step, and the cost of one draft step.
# ```
#
# In the timed PyTorch run, a plain step of the 135M target took {glue:text}`pt_step_ms:.0f` ms and a
# depth-{glue:text}`pt_depth` round {glue:text}`pt_round_ms:.0f` ms, so break-even in this decoder is $\tau$
# {glue:text}`pt_break_even:.2f`. Its verify of four tokens costs {glue:text}`pt_verify_rel:.2f` plain steps, and
# by the cost model of the round's parts a perfect drafter would reach {glue:text}`pt_ceiling:.2f`x. The drafter of the
# {doc}`recipe screen <10_drafter_recipe>` ($\tau$ {glue:text}`pt_tau:.2f` online) ran at
# {glue:text}`pt_speedup:.3f`x plain decoding ({glue:text}`pt_lo:.3f` to {glue:text}`pt_hi:.3f`, n =
# {glue:text}`pt_n` prompts): {glue:text}`pt_word`. The drafter trained on thousands of distinct prompts
# ({doc}`06b_drafter_strength`, $\tau$ {glue:text}`pta_tau:.2f` online) ran at {glue:text}`pta_speedup:.3f`x
# ({glue:text}`pta_lo:.3f` to {glue:text}`pta_hi:.3f`): {glue:text}`pta_word`. Every speculative output
# equalled plain greedy decoding ({glue:text}`pt_lossless` prompt runs).
#
# ### vLLM beside the study's decoder

# %% tags=["remove-input"]
from activation_wave.benchmarks.vllm_speed import cost_model_rows, plain_drift

# llama.cpp's 135M figures on this page are the side-by-side and ceiling runs above, so its
# third run (the `llamacpp` entry) stays out of this table: one figure per quantity
rows = pd.DataFrame(cost_model_rows(bench, threads="1", paths=("speculative_decoding", "vllm")))
v = rows.iloc[-1]
glue_values(vllm_round=float(v["round_in_plain_steps"]), vllm_depth=int(v["depth"]), vllm_tau=float(v["tau"]),
            vllm_speedup=float(v["speedup"]), vllm_lo=float(v["speedup_lo"]), vllm_hi=float(v["speedup_hi"]),
            vllm_identical=v["identical"], vllm_word=cpu.speed_word(v["speedup_lo"], v["speedup_hi"]),
            vllm_drafter=v["drafter"], **{f"drift_{k}": x for k, x in (plain_drift(bench) or {}).items()})
format_table(rows[["path", "drafter", "cpu", "depth", "tau", "round_in_plain_steps", "speedup", "speedup_lo",
                   "speedup_hi", "identical"]].rename(columns={"round_in_plain_steps": "round (plain steps)",
                                                               "speedup_lo": "low", "speedup_hi": "high"}),
             {"tau": "{:.2f}", "round (plain steps)": "{:.2f}", "speedup": "{:.2f}x", "low": "{:.2f}", "high": "{:.2f}"})

# %% [markdown]
# vLLM, the engine most EAGLE-3 drafters are served with, runs a study drafter on its CPU
# backend too: the {glue:text}`vllm_drafter` (each row names its drafter; the
# {doc}`glance page <08_results_summary>` lists every named drafter and which $\tau$ it
# reports). There a depth-{glue:text}`vllm_depth:d` round costs {glue:text}`vllm_round:.2f`
# plain steps, so a drafter breaks even near $\tau$ {glue:text}`vllm_round:.2f`. It reached $\tau$
# {glue:text}`vllm_tau:.2f` (vLLM's own counters) and ran at {glue:text}`vllm_speedup:.2f`x
# plain decoding ({glue:text}`vllm_lo:.2f` to {glue:text}`vllm_hi:.2f` over the prompts, one
# thread; outputs identical to plain: {glue:text}`vllm_identical`): {glue:text}`vllm_word`. The
# rows come from different machines (column cpu), so compare each with its own plain
# decoding, not with each other. vLLM's benchmark ran plain decoding twice on the same prompts,
# once per phase of methods, and the second run was {glue:text}`drift_ratio:.2f`x the first
# ({glue:text}`drift_lo:.2f` to {glue:text}`drift_hi:.2f`). Each method is compared with its own
# phase's plain run, but a drift of that size within a phase would go unseen, so a speedup
# within about that margin of 1 says nothing.
#
# (sec-vllm-1p5b)=
# ### vLLM on the 1.5B target

# %% tags=["remove-input"]
from activation_wave.benchmarks.vllm_speed import large_rows, large_values

big = pd.DataFrame([r for t in ("2", "1") for r in large_rows(bench, t)])
values = large_values(bench, "2")
glue_values(**values, vbig_word=cpu.speed_word(values["vbig_lo"], values["vbig_hi"]))
shown = pd.DataFrame({
    "engine": [f"{r.engine}, {r.precision}, {r.threads} thread(s)" for r in big.itertuples()],
    "drafter": big["drafter"], "verify (plain steps)": big["verify_in_plain_steps"],
    "round (plain steps)": big["round_in_plain_steps"], "tau": big["tau"],
    "speedup [95% interval]": [f"{r.speedup:.2f}x [{r.speedup_lo:.2f}, {r.speedup_hi:.2f}]" for r in big.itertuples()],
    "plain tok/s": big["plain_tokens_per_s"], "EAGLE-3 tok/s": big["tokens_per_s"], "n-gram tau": big["ngram_tau"],
    "n-gram speedup": big["ngram_speedup"]})
format_table(shown, {"verify (plain steps)": "{:.2f}", "round (plain steps)": "{:.2f}", "tau": "{:.2f}",
                     "plain tok/s": "{:.1f}", "EAGLE-3 tok/s": "{:.1f}", "n-gram tau": "{:.2f}", "n-gram speedup": "{:.2f}x"})

# %% [markdown]
# This page's question is asked on the 1.5B target, so vLLM was measured there too, on the
# same CPU as llama.cpp ({glue:text}`vbig_cpus`). It ran the target's weights in fp32 and the
# layer test's default drafter, a drafter of the design that drafts on this target (the
# Qwen2.5-Coder-1.5B page of Part II). EAGLE-3 at depths 1 to 3 and n-gram lookup each ran
# beside plain vLLM with the prompts' order rotated, on {glue:text}`vbig_n:d` of llama.cpp's prompts and
# {glue:text}`vbig_tokens:d` new tokens. At 2 threads a plain step takes
# {glue:text}`vbig_step:.0f` ms, and a depth-3 round costs {glue:text}`vbig_round:.2f` plain
# steps (llama.cpp on its 4-bit file: {glue:text}`lbig_step:.0f` ms and
# {glue:text}`lbig_round:.2f`), so in vLLM a drafter breaks even near $\tau$
# {glue:text}`vbig_round:.2f`. The drafter reached $\tau$ {glue:text}`vbig_tau:.2f` (vLLM's
# counters) and ran at {glue:text}`vbig_speedup:.2f`x plain vLLM ({glue:text}`vbig_lo:.2f` to
# {glue:text}`vbig_hi:.2f` over the prompts): {glue:text}`vbig_word`; outputs identical to plain:
# {glue:text}`vbig_identical`. n-gram lookup reached $\tau$ {glue:text}`vbig_ngram_tau:.2f` per
# target pass, at {glue:text}`vbig_ngram_speedup:.2f`x (llama.cpp's n-gram $\tau$ counts 96
# tokens of all 12 prompts, vLLM's the first {glue:text}`vbig_tokens:d` of
# {glue:text}`vbig_n:d`: not the same text).
#
# A speedup here is over vLLM's own plain decoding, which reads 6.6 GB of fp32 weights per
# step: {glue:text}`vbig_plain_tps:.1f` tokens/s, against {glue:text}`lbig_plain_tps:.1f` for
# plain llama.cpp on the 4-bit file. With EAGLE-3, vLLM decodes {glue:text}`vbig_tps:.1f`
# tokens/s, {glue:text}`vbig_vs_llama:.2f`x the speed of plain llama.cpp. The round costs less
# than a plain step because vLLM's forward of the four tokens a depth-3 round verifies took
# {glue:text}`vbig_verify:.2f` of its one-token step here (llama.cpp's:
# {glue:text}`lbig_verify:.2f`). So in vLLM's CPU backend the one-token step itself is slow, not
# the weights it reads; why, this benchmark cannot say. This is a measurement, not a registered
# test, on {glue:text}`vbig_n:d` prompts: an interval over so few prompts is rough.
#
# ### Where it would pay

# %% tags=["hide-input"]
glue_figure("fig_where_it_pays", plot_where_it_pays(cpu.where_points(ceiling), cpu.today_taus(sizes)))

# %% [markdown]
# ```{glue:figure} fig_where_it_pays
# :name: fig-where-it-pays
#
# Break-even $\tau$ of a depth-3 round in llama.cpp (its cost in plain steps, f16 drafter) against the
# thread count: measured (filled dots) and a simple model fitted to them (open circles, dashed; beyond two
# threads an extrapolation), with the $\tau$ today's drafters reach in llama.cpp (dotted lines). A drafter
# pays where a target's curve falls below its line.
# ```
#
# The model: a step reads the weights once and then computes per token; more threads divide the
# arithmetic but not the read. Fitted to the two measured thread counts (within
# {glue:text}`model_err_small:.0%` at 135M and {glue:text}`model_err_big:.0%` at 1.5B), it puts break-even at
# 16 threads at {glue:text}`model16_small:.2f` and {glue:text}`model16_big:.2f`. The 135M drafter's $\tau$ in
# llama.cpp, {glue:text}`small_llama_tau:.2f`, would break even at about {glue:text}`threads_for_small:.0f`
# threads on its target and {glue:text}`threads_for_big:.0f` on the 1.5B one, far beyond what two measured
# points support. A larger target of the same kind shrinks the drafter's share of a round but not the
# verify's: at 2 threads, no target size brings break-even at depth 1 below {glue:text}`floor_small:.2f`
# (135M's measured slope) or {glue:text}`floor_big:.2f` (1.5B's). The best 1.5B drafter's $\tau$,
# {glue:text}`best_tau:.2f`, lies {glue:text}`best_floor_word` the second floor.
#
# ## How sure

# %% tags=["hide-input"]
display(format_table(findings.table(F, ["C1", "C2"])))

# %% [markdown]
# - **Tests.** The registered tests are in the table: C1, EAGLE-3 faster than plain llama.cpp on the 1.5B
#   target at 2 threads, is {glue:text}`f_C1_label`; C2, the best selection rule's layers beating the default's
#   with 1.5B drafters that draft (three seeds per set, re-stated before they trained), is {glue:text}`f_C2_label`;
#   its drafters are on the Qwen2.5-Coder-1.5B page of Part II.
# - **Intervals and n.** Speeds are pooled over {glue:text}`side_n` prompts in llama.cpp and
#   {glue:text}`pt_n` in PyTorch, with 95% paired bootstrap intervals over prompts (10,000 resamples). The
#   PyTorch rounds repeat the same prompts, so they narrow nothing. Offline $\tau$ is the mean over eval
#   prompts with its bootstrap interval.
# - **Lossless.** With llama.cpp's default flags EAGLE-3 equalled plain decoding on
#   {glue:text}`default_identical` prompts, and a server that never drafts on {glue:text}`never_identical`:
#   the batched verify, computed with other kernels than single tokens, breaks near-ties the other way.
#   With `--no-repack` on every server the 1.5B outputs were identical (table above), at a cost: plain
#   decoding runs at {glue:text}`repack_cost:.2f`x its speed with llama.cpp's default weights. On the 135M
#   target the outputs were identical on {glue:text}`small_identical` prompts.
# - **Caveats.** The ceiling is one run of {glue:text}`ceil_n` prompts of {glue:text}`ceil_tokens` new tokens
#   per server, without an interval. The thread model is fitted to two points. Offline $\tau$ scores a
#   chain draft on the target's own greedy responses; online $\tau$ in llama.cpp differs from it.
# - **Lab record.** Registrations, the changes made to them and every drafter design are in the
#   {doc}`lab record <../lab/cpu_payoff>`.
#
# ## Try it
#
# `wave study --profile smoke --only 11_cpu_payoff --no-build` re-executes this page in a minute from the
# committed benchmark file; open `scratch/smoke/book/chapters/11_cpu_payoff.ipynb` and look at the ceiling
# figure: where the dot at depth + 1 sits below the dotted line at 1, no drafter of that depth can pay.
# With llama.cpp set up (`bash scripts/setup_llamacpp.sh`), `wave bench --only llamacpp_ceiling` measures the
# terms on your own CPU in about half an hour: compare the first table's slope with 1.
# With vLLM set up (`bash scripts/setup_vllm.sh`), `wave bench --only vllm_1.5b` with `WAVE_VLLM_LARGE_PROMPTS` and
# `WAVE_VLLM_LARGE_TOKENS` set to the prompts and tokens above measures vLLM on the 1.5B target in about half an
# hour on two cores and 20 GB of memory (all 12 prompts at 96 tokens: several times longer).
