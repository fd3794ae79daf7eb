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
# # Drafters on selected layers, and lossless speculative decoding
#
# The test of the whole study: do EAGLE-3-style drafters that read the layers chosen in
# chapter 5 draft better than drafters that read the default $[2, N/\!/2, N-3]$? Every
# drafter here has the same architecture ({ref}`sec-eagle3`), the same training data
# (the train split of the cached greedy responses), the same budget and the same
# seeds; only the layers it reads differ. Quality is the mean accepted length
# {term}`tau` on held-out prompts, computed offline from the cached greedy responses
# (chain drafts at $T=0$; {ref}`sec-metrics`). For the default and the best set, the
# drafters then decode online, where the output must equal plain greedy decoding token
# for token, and wall time is measured against plain decoding and prompt-lookup
# decoding in the same run.

# %% [markdown]
# (sec-prereg)=
# ## Pre-registered hypotheses and tests
#
# Fixed on 2026-12-01, before the rerun of this chapter with more data, seeds and sets
# (issue 17); the commit that added this section is named in the chapter's evaluation. The
# drafters of the earlier run (2 epochs on the greedy responses, offline
# $\tau \approx 1.39$) were already known, so nothing computed from *them* counts as a test
# of these hypotheses: only the rerun does.
#
# **Outcome.** Offline mean accepted length $\tau$ of a chain draft at $T=0$ on every
# eval-split prompt, with the depth and draft-probability threshold of the profile's online
# runs (`spec.depth`, `spec.draft_threshold`), one value per prompt and drafter; seeds of a
# layer set are averaged per prompt before any comparison.
#
# **Layer sets.** The EAGLE-3 default $[2, N/\!/2, N-3]$; the set each chapter 5 selection
# rule picks (as chapter 5 computes it, not chosen by hand); the last three block outputs;
# at least four seeded random triples; one drafter per single block output $1..N$ (the last
# is the pre-norm output of the last block). Seeds: at least 3 for the default and each
# rule's set, 2 for the random sets and for a third of the single layers.
#
# | | hypothesis | primary test | supported when |
# |---|---|---|---|
# | H1 | the best selection rule's set beats the default | per-prompt paired bootstrap (10,000 resamples of eval prompts) of $\Delta\tau$ = rule set $-$ default, one test per rule, Holm-corrected across the rules | some rule has $\Delta\tau > 0$ with Holm-adjusted two-sided $p < 0.05$ |
# | H2 | concatenation entropy $S_2$ correlates positively with $\tau$ | Spearman $\rho(S_2, \tau)$ over the triples, 95% bootstrap interval (resampling prompts and sets) | the interval lies above 0 |
# | H3 | token-filtered statistics predict $\tau$ better than unfiltered ones | $\rho(S_2^{q}, \tau) - \rho(S_2^{0}, \tau)$ for filter quantiles $q \in \{0.25, 0.5, 0.75\}$ at an equal token budget, paired bootstrap | the interval for $q = 0.5$ lies above 0 |
# | H4 | the depth effect survives per-layer normalisation of the fused features | default and best-rule triples trained with and without a per-layer RMSNorm before `fc`; $\rho$(deepest layer, $\tau$) over the triples in both arms | $\rho$ is negative with an interval below 0 in the normalised arm |
#
# **Secondary (not tests of H1-H4).** $\rho$ of the cheap supervised probe, mean CKA and
# depth against $\tau$, each with its $n$ and interval; the single-layer sweep against layer
# entropy, norm ratio and CKA to the neighbours.
#
# **Power.** The minimum detectable $\Delta\tau$ at 80% power (two-sided, at the strictest
# Holm level) is computed from the per-prompt variance of the paired differences and reported
# beside every comparison. A comparison whose interval covers 0 is reported as *within
# noise, smaller than MDE*, never as "no effect" or as a ranking.
#
# **If the design does not fit the compute budget**, it shrinks in this order: fewer
# single-layer seeds, fewer random triples (not below four), fewer epochs; never fewer seeds
# for the default and the rule sets, and never the eval prompts.

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import dataclasses
import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display
from myst_nb import glue

from activation_wave.data import chat_ids, load_prompts
from activation_wave.drafter import load_drafter
from activation_wave.experiment import bootstrap_mean_ci, run_sets, spearman
from activation_wave.pipeline import load_results, notebook_config, run_capture, save_results
from activation_wave.plots import plot_acceptance_by_position, plot_score_vs_tau, plot_tau
from activation_wave.selection import rank_among_all, score_set, stats_from_cache
from activation_wave.speculative import plain_generate, prompt_lookup_generate, run_interleaved, speculate

cfg = notebook_config(profile, model, overrides)
cap = run_capture(cfg, progress=False)
target, cache = cap.target, cap.cache
N = cache.n_layers
sel = load_results("05_layer_selection", cfg, results_root or None)
print(cache.summary())

# %% [markdown]
# ## The layer sets
#
# Triples from chapter 5 (every selection method, the EAGLE-3 default, the last three
# layers, evenly spaced layers and seeded random triples), and, for a denser signal of
# what a layer is worth to a drafter, single layers across depth and every pair of
# those single layers.

# %%
sets = {name: list(ids) for name, ids in sel["sets"].items()}
if cfg.draft.sweep_stride:
    sweep = list(range(1, N + 1, cfg.draft.sweep_stride))
    for layer in sweep:
        sets[f"single-{layer}"] = [layer]
    for a, b in itertools.combinations(sweep, 2):
        sets[f"pair-{a}-{b}"] = [a, b]
seeds = [cfg.draft.seed + i for i in range(cfg.draft.n_seeds)]
print(f"{len(sets)} layer sets x {len(seeds)} seeds = {len(sets) * len(seeds)} drafters")
rows = run_sets(target, cache, sets, cfg.draft, seeds, progress=False)
runs = pd.DataFrame(rows)

# %%
stats = stats_from_cache(cache, cfg).stats
summary = []
for name, grp in runs.groupby("set", sort=False):
    ids = grp["layers"].iloc[0]
    taus = grp["tau"].to_numpy(float)
    lo, hi = (grp["tau_lo"].min(), grp["tau_hi"].max()) if len(grp) == 1 else bootstrap_mean_ci(taus)
    if len(grp) > 1:  # seed spread and per-seed record bootstrap, whichever is wider
        lo, hi = min(lo, grp["tau_lo"].mean()), max(hi, grp["tau_hi"].mean())
    sc = score_set(stats, ids) if len(ids) > 1 else {"renyi2": float(stats.entropy2[stats.pos([ids[0]])[0]]), "mean_cka": np.nan}
    summary.append({"set": name, "layers": ids, "k": len(ids), "tau": float(taus.mean()), "tau_lo": float(lo),
                    "tau_hi": float(hi), "n_seeds": len(grp), "renyi2": sc["renyi2"], "mean_cka": sc.get("mean_cka", np.nan),
                    "percentile": rank_among_all(stats, ids)["percentile"] if len(ids) > 1 else np.nan,
                    "acc1": float(np.mean([r[0] for r in grp["acceptance_by_position"]])),
                    "train_s": float(grp["train_s"].mean())})
summary = pd.DataFrame(summary).sort_values("tau", ascending=False)
display(summary.drop(columns=["train_s"]).round(3))

# %%
triples = summary[summary.k == 3]
fig = plot_tau(list(triples.set), list(triples.tau), list(triples.tau_lo), list(triples.tau_hi),
               title=None)
glue("fig_tau_sets", fig, display=False)
plt.close(fig)
default = summary[summary.set == "eagle3-default"].iloc[0]
best = triples.iloc[0]
glue("tau_default", float(default.tau), display=False)
glue("tau_default_lo", float(default.tau_lo), display=False)
glue("tau_default_hi", float(default.tau_hi), display=False)
glue("tau_best", float(best.tau), display=False)
glue("tau_best_set", f"{best.set} {best.layers}", display=False)
glue("n_drafters", len(runs), display=False)
glue("train_s_mean", float(runs.train_s.mean()), display=False)

# %% [markdown]
# ```{glue:figure} fig_tau_sets
# :name: fig-tau-sets
#
# Offline mean accepted length {term}`tau` (chain drafts at $T=0$ on the eval split)
# of drafters reading each layer triple: mean over seeds with a 95% bootstrap interval
# (resampling eval prompts, and seeds where there are several).
# ```
#
# The default triple reaches $\tau$ = {glue:text}`tau_default:.3f`
# (95% interval {glue:text}`tau_default_lo:.3f`–{glue:text}`tau_default_hi:.3f`); the
# best triple, {glue:text}`tau_best_set`, reaches {glue:text}`tau_best:.3f`.
# {glue:text}`n_drafters:d` drafters were trained, {glue:text}`train_s_mean:.0f` s each on
# average.

# %%
singles = summary[summary.k == 1].sort_values("layers", key=lambda s: s.map(lambda v: v[0]))
fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
x = [ids[0] for ids in singles.layers]
ax.errorbar(x, singles.tau, yerr=[singles.tau - singles.tau_lo, singles.tau_hi - singles.tau], fmt="-o", ms=4,
            capsize=2, label="drafter reading one layer")
ax.axhline(float(default.tau), color="black", ls="--", lw=1, label="EAGLE-3 default triple")
ax.set_xlabel("layer index read by the drafter (hidden_states)")
ax.set_ylabel("tau (tokens / target forward)")
ax.legend(frameon=False)
glue("fig_tau_single", fig, display=False)
plt.close(fig)
if len(singles):
    glue("single_best_layer", int(x[int(np.argmax(singles.tau))]), display=False)
    glue("single_best_tau", float(singles.tau.max()), display=False)
    glue("single_worst_layer", int(x[int(np.argmin(singles.tau))]), display=False)
    glue("single_worst_tau", float(singles.tau.min()), display=False)

# %% [markdown]
# ```{glue:figure} fig_tau_single
# :name: fig-tau-single
#
# Offline {term}`tau` of drafters that read a single layer, across depth, with the
# default triple for reference.
# ```
#
# Read alone, layer {glue:text}`single_best_layer` gives the best drafter
# ($\tau$ = {glue:text}`single_best_tau:.3f`) and layer {glue:text}`single_worst_layer`
# the worst ({glue:text}`single_worst_tau:.3f`).
#
# ### Pairs: does a second layer add to the first?

# %%
pairs = summary[summary.k == 2]
tau_single = {ids[0]: t for ids, t in zip(singles.layers, singles.tau)}
pair_rows = []
for row in pairs.itertuples():
    a, b = row.layers
    better = max(tau_single.get(a, np.nan), tau_single.get(b, np.nan))
    pair_rows.append({"pair": f"{a} + {b}", "tau": row.tau, "tau_lo": row.tau_lo, "tau_hi": row.tau_hi,
                      "tau alone (first)": tau_single.get(a, np.nan), "tau alone (second)": tau_single.get(b, np.nan),
                      "gain over the better single": row.tau - better,
                      "beats it (interval above)": bool(row.tau_lo > better), "S2 of the pair": row.renyi2})
pair_table = pd.DataFrame(pair_rows)
display(pair_table.round(3))
glue("n_pairs", len(pair_table), display=False)
glue("n_pairs_gain", int((pair_table["gain over the better single"] > 0).sum()) if len(pair_table) else 0, display=False)
glue("n_pairs_sig", int(pair_table["beats it (interval above)"].sum()) if len(pair_table) else 0, display=False)
if len(pair_table):
    bp = pair_table.sort_values("tau", ascending=False).iloc[0]
    glue("pair_best", bp["pair"], display=False)
    glue("pair_best_tau", float(bp["tau"]), display=False)
    glue("pair_best_gain", float(bp["gain over the better single"]), display=False)
else:
    glue("pair_best", "(none)", display=False)
    glue("pair_best_tau", float("nan"), display=False)
    glue("pair_best_gain", float("nan"), display=False)

# %% [markdown]
# Each pair of the single layers above, trained under the same budget: in
# {glue:text}`n_pairs_gain:d` of {glue:text}`n_pairs:d` pairs the drafter reading both
# layers has a higher $\tau$ than the better of the two read alone, and in
# {glue:text}`n_pairs_sig:d` its whole interval lies above it. The best pair,
# {glue:text}`pair_best`, reaches $\tau$ = {glue:text}`pair_best_tau:.3f`
# ({glue:text}`pair_best_gain:+.3f` over its better single layer).
#
# ## Do the selection scores predict drafter quality?

# %%
rho = {"renyi2 (triples)": spearman(triples.renyi2, triples.tau),
       "mean CKA (triples)": spearman(triples.mean_cka, triples.tau),
       "renyi2 (single layers)": spearman(singles.renyi2, singles.tau) if len(singles) > 2 else float("nan"),
       "renyi2 (pairs)": spearman(pairs.renyi2, pairs.tau) if len(pairs) > 2 else float("nan")}
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
plot_score_vs_tau(list(triples.renyi2), list(triples.tau), list(triples.set), ax=axes[0],
                  xlabel="concatenation entropy S2 of the triple (nats)")
plot_score_vs_tau(list(triples.mean_cka), list(triples.tau), list(triples.set), ax=axes[1],
                  xlabel="mean pairwise CKA of the triple")
glue("fig_score_tau", fig, display=False)
plt.close(fig)
glue("rho_renyi2", rho["renyi2 (triples)"], display=False)
glue("rho_cka", rho["mean CKA (triples)"], display=False)
display(pd.Series(rho, name="Spearman rho").round(3))

# %% [markdown]
# ```{glue:figure} fig_score_tau
# :name: fig-score-tau
#
# Selection score of each triple against its drafter's offline {term}`tau`; Spearman's
# $\rho$ in each title. Left: concatenation entropy $S_2$; right: mean pairwise CKA
# (lower = more diverse).
# ```
#
# Across triples, Spearman's $\rho$ between concatenation entropy and $\tau$ is
# {glue:text}`rho_renyi2:.2f`, and between mean CKA and $\tau$ it is
# {glue:text}`rho_cka:.2f`.

# %%
acc = {row.set: runs[runs.set == row.set].acceptance_by_position.iloc[0] for row in triples.head(4).itertuples()}
acc.setdefault("eagle3-default", runs[runs.set == "eagle3-default"].acceptance_by_position.iloc[0])
fig = plot_acceptance_by_position(acc)
glue("fig_acceptance", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_acceptance
# :name: fig-acceptance
#
# Acceptance rate by draft position (offline, $T=0$, first seed) for the best triples
# and the default.
# ```
#
# ## Online: lossless, and how fast?
#
# The default drafter and the best one decode the held-out prompts for real: the
# target verifies each chain of drafts in one forward pass with its KV cache. At
# $T=0$ the output must be exactly plain greedy decoding's; at $T=1$ the
# accept/resample rule keeps the target's distribution. Plain decoding and
# transformers' prompt-lookup decoding run on the same prompts in the same session,
# interleaved prompt by prompt (every prompt runs every method back to back, in a
# rotating order), so that load from other processes on this shared machine slows all
# methods alike and the ratios of tokens/s stay meaningful.

# %%
eval_prompts = [p for p in load_prompts(cfg.data) if p.split == "eval"]
rng = np.random.default_rng(cfg.spec.seed)
eval_prompts = [eval_prompts[i] for i in sorted(rng.choice(len(eval_prompts), size=min(cfg.spec.max_prompts, len(eval_prompts)), replace=False))]
prompts = [(p.id, chat_ids(target, p.text)) for p in eval_prompts]
pids = [pid for pid, _ in prompts]
spec0 = dataclasses.replace(cfg.spec, temperature=0.0, tree_topk=0)
spec1 = dataclasses.replace(cfg.spec, temperature=1.0, tree_topk=0)
tree0 = dataclasses.replace(cfg.spec, temperature=0.0)
methods = {"plain T=0": lambda p, c: plain_generate(target, [p], c(spec0)),
           "prompt lookup T=0": lambda p, c: prompt_lookup_generate(target, [p], c(spec0)),
           "plain T=1": lambda p, c: plain_generate(target, [p], c(spec1))}
online_sets = list(dict.fromkeys(["eagle3-default", best.set]))
for name in online_sets:
    drafter = load_drafter(runs[runs.set == name].path.iloc[0], target)
    methods[f"{name} chain T=0"] = lambda p, c, d=drafter: speculate(target, d, [p], c(spec0))
    methods[f"{name} chain T=1"] = lambda p, c, d=drafter: speculate(target, d, [p], c(spec1))
    if cfg.spec.tree_topk > 0:
        methods[f"{name} tree T=0"] = lambda p, c, d=drafter: speculate(target, d, [p], c(tree0), tree=True)
res = run_interleaved(methods, prompts)
plain0, plain1, lookup0 = res["plain T=0"], res["plain T=1"], res["prompt lookup T=0"]
online = {}
for name in online_sets:
    r0, r1 = res[f"{name} chain T=0"], res[f"{name} chain T=1"]
    rt = res.get(f"{name} tree T=0")
    same = sum(a == b for a, b in zip(r0.token_ids, plain0.token_ids))
    online[name] = {"layers": sets[name], "tau_t0": r0.tau, "tau_t1": r1.tau, "tokens_per_s_t0": r0.tokens_per_s,
                    "tokens_per_s_t1": r1.tokens_per_s, "lossless_prompts": same, "n_prompts": len(prompts),
                    "speedup_vs_plain_t0": r0.tokens_per_s / plain0.tokens_per_s,
                    "speedup_vs_plain_t1": r1.tokens_per_s / plain1.tokens_per_s,
                    "speedup_vs_prompt_lookup_t0": r0.tokens_per_s / lookup0.tokens_per_s,
                    "acceptance_t0": r0.acceptance_by_position,
                    "tau_offline_all_eval": float(summary[summary.set == name].tau.iloc[0])}
    if rt is not None:
        online[name].update(tau_tree_t0=rt.tau, speedup_tree_vs_plain_t0=rt.tokens_per_s / plain0.tokens_per_s,
                            lossless_prompts_tree=sum(a == b for a, b in zip(rt.token_ids, plain0.token_ids)))
online_df = pd.DataFrame(online).T
display(online_df.drop(columns=["acceptance_t0"]))
baselines = {"plain_tokens_per_s_t0": plain0.tokens_per_s, "plain_tokens_per_s_t1": plain1.tokens_per_s,
             "prompt_lookup_tokens_per_s_t0": lookup0.tokens_per_s}
display(pd.Series(baselines).round(2))
o_def = online["eagle3-default"]
o_best = online[best.set]
glue("lossless_default", f"{o_def['lossless_prompts']}/{o_def['n_prompts']}", display=False)
glue("lossless_best", f"{o_best['lossless_prompts']}/{o_best['n_prompts']}", display=False)
glue("speedup_best_t0", float(o_best["speedup_vs_plain_t0"]), display=False)
glue("speedup_default_t0", float(o_def["speedup_vs_plain_t0"]), display=False)
glue("speedup_lookup_best", float(o_best["speedup_vs_prompt_lookup_t0"]), display=False)
glue("tau_online_default", float(o_def["tau_t0"]), display=False)
glue("speedup_best_t1", float(o_best["speedup_vs_plain_t1"]), display=False)
glue("tau_best_t1", float(o_best["tau_t1"]), display=False)
glue("n_online_prompts", len(prompts), display=False)
glue("online_tokens", cfg.spec.max_new_tokens, display=False)
tree_note = "no draft tree was run (spec.tree_topk = 0)"
if "tau_tree_t0" in o_best:
    tree_note = (f"the dynamic draft tree (top-{cfg.spec.tree_topk} per node, {cfg.spec.tree_size} draft tokens) "
                 f"reached tau = {o_best['tau_tree_t0']:.3f} with the best drafter at "
                 f"{o_best['speedup_tree_vs_plain_t0']:.2f}x plain decoding, and reproduced plain greedy on "
                 f"{o_best['lossless_prompts_tree']}/{o_best['n_prompts']} prompts")
glue("tree_note", tree_note, display=False)

# %% [markdown]
# At $T=0$ speculative decoding reproduced plain greedy decoding exactly on
# {glue:text}`lossless_default` prompts with the default drafter and
# {glue:text}`lossless_best` with the best one. Wall-time speedup over plain decoding,
# measured in the same run: {glue:text}`speedup_default_t0:.2f`x with the default
# drafter and {glue:text}`speedup_best_t0:.2f`x with the best
# ({glue:text}`speedup_lookup_best:.2f`x relative to prompt-lookup decoding). Online
# $\tau$ of the default drafter on these prompts is {glue:text}`tau_online_default:.3f`;
# the offline figure above is over all eval prompts, so the two differ by the sample as
# well as by rare near-ties that a full forward and cached decoding round differently.
# At $T=1$ the best drafter reaches $\tau$ = {glue:text}`tau_best_t1:.3f` and
# {glue:text}`speedup_best_t1:.2f`x plain sampling. On the same prompts,
# {glue:text}`tree_note`. ({glue:text}`n_online_prompts:d` held-out prompts, up to
# {glue:text}`online_tokens:d` new tokens each; chapter 9 explains these speeds with a
# cost model.)

# %%
verdict_gap = float(best.tau - default.tau)
overlap = best.tau_lo <= default.tau_hi
glue("verdict_gap", verdict_gap, display=False)
glue("verdict", ("within the uncertainty of the default's" if overlap else "clearly above the default's")
     if best.set != "eagle3-default" else "the default itself", display=False)
_ = save_results("06_eagle3_speedup", {
    "runs": runs.drop(columns=["path"]).to_dict("records"), "summary": summary.to_dict("records"),
    "spearman": rho, "online": online, "baselines": baselines, "prompts": pids,
    "default": {"layers": list(default.layers), "tau": float(default.tau), "tau_lo": float(default.tau_lo),
                "tau_hi": float(default.tau_hi)},
    "best": {"set": best.set, "layers": list(best.layers), "tau": float(best.tau), "tau_lo": float(best.tau_lo),
             "tau_hi": float(best.tau_hi)},
    "verdict": {"gap": verdict_gap, "overlap": bool(overlap)}}, cfg, results_root or None)

# %% [markdown]
# ## Verdict
#
# The best triple's $\tau$ is {glue:text}`verdict_gap:.3f` above the default's, which is
# {glue:text}`verdict`. The tables above hold every drafter's numbers; chapter 8 puts
# them next to the selection scores of chapter 5.
