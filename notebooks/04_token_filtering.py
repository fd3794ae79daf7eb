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
# # Which tokens count: entropy filtering and outlier tokens
#
# Every statistic so far pooled a sample of response positions, all weighted alike. This
# chapter asks two questions about that choice. First, the paper's
# {term}`token-entropy filtering` ({ref}`sec-token-filter`): does keeping only the
# positions where the target is uncertain change the entropy profile, the CKA map and
# its compartments, and how many tokens does a stable picture need? Second, the *sink
# question* ({ref}`sec-outliers`): a handful of tokens carry hidden states far larger
# than the rest ({term}`massive activations` {cite:p}`sun2024massive`, on
# {term}`attention sink` tokens {cite:p}`xiao2024streaming`). Centring over tokens lets
# such a token drag every other token, so a sharp feature of an entropy-by-depth curve
# may describe one outlier rather than the information a layer carries. The chapter
# looks at that directly.

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from myst_nb import glue
from scipy.stats import spearmanr

from activation_wave.cka import cka_matrix, segment_compartments
from activation_wave.entropy import layer_entropies, profile_summary, set_compute_threads
from activation_wave.filtering import (apply_mask, compare_conditions, massive_tokens, outlier_conditions,
                                       response_offsets, token_count_stability, token_entropy_mask, token_ids_at,
                                       token_norms)
from activation_wave.pipeline import notebook_config, run_capture, save_results
from activation_wave.plots import (plot_cka_grid, plot_filter_comparison, plot_norm_ratio, plot_stability_tokens,
                                   plot_token_entropy_hist)

cfg = notebook_config(profile, model, overrides)
set_compute_threads(1)
cap = run_capture(cfg, progress=False)
cache, tok = cap.cache, cap.target.tokenizer
N = cache.n_layers
alpha, q, seed = cfg.metrics.alpha, cfg.metrics.filter_quantile, cfg.metrics.seed
sample = cache.sample_tokens(cfg.metrics.token_budget, seed=seed, min_position=cfg.metrics.drop_first)
H, ids = sample.hidden, sample.layers
n = H.shape[1]
k_max = min(len(ids), 12)


def spans(comps):
    """Compartments as text, e.g. '0-2, 3-10, 11-30'."""
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in comps)


def show(token_id):
    """A token as the reader should see it (quoted, whitespace visible)."""
    return repr(tok.decode([int(token_id)]))


glue("n_tokens", n, display=False)
glue("alpha", float(alpha), display=False)
print(cache.summary())

# %% [markdown]
# ## Where is the target uncertain?
#
# At each position the capture stored the entropy of the target's next-token
# distribution ({term}`token entropy`). Filtering keeps the positions at or above the
# {glue:text}`q:.2f` quantile of that entropy in the sample (a run-profile parameter).

# %%
keep = token_entropy_mask(sample.next_entropy, quantile=q)
thr = float(np.quantile(sample.next_entropy, q))
fig = plot_token_entropy_hist(sample.next_entropy, thr)
glue("fig_token_entropy", fig, display=False)
plt.close(fig)
sure = 0.1  # nats: the target puts nearly all its mass on one token
glue("q", float(q), display=False)
glue("thr", thr, display=False)
glue("n_kept", int(keep.sum()), display=False)
glue("sure", sure, display=False)
glue("frac_sure", float((sample.next_entropy < sure).mean()), display=False)
glue("median_entropy", float(np.median(sample.next_entropy)), display=False)

# %% [markdown]
# ```{glue:figure} fig_token_entropy
# :name: fig-token-entropy
#
# Next-token entropy of the target over the {glue:text}`n_tokens:d` sampled response
# positions, and the filter's cut.
# ```
#
# The median next-token entropy is {glue:text}`median_entropy:.2f` nats, and at
# {glue:text}`frac_sure:.0%` of the positions the target is all but certain (below
# {glue:text}`sure:.1f` nats). The cut at {glue:text}`thr:.3f` nats
# keeps {glue:text}`n_kept:d` positions.
#
# ## Filtered against unfiltered
#
# A pooled entropy grows with the number of tokens, so the filtered tokens are compared
# with a random subset of the same size, not only with the whole sample; the positions
# the filter drops (the confident ones) are shown too.

# %%
rng = np.random.default_rng(seed)
rand = np.zeros(n, dtype=bool)
rand[rng.choice(n, size=int(keep.sum()), replace=False)] = True
E = {"all tokens": layer_entropies(H, alpha),
     "random subset, same size": layer_entropies(H[:, rand], alpha),
     "high-entropy tokens (kept)": layer_entropies(H[:, keep], alpha),
     "low-entropy tokens (dropped)": layer_entropies(H[:, ~keep], alpha)}
fig = plot_filter_comparison(ids, E, title=f"Entropy over depth by token subset (alpha = {alpha:g})")
glue("fig_filter_entropy", fig, display=False)
plt.close(fig)
d_hi = E["high-entropy tokens (kept)"] - E["random subset, same size"]
d_lo = E["low-entropy tokens (dropped)"] - E["random subset, same size"]
glue("d_hi_mean", float(d_hi.mean()), display=False)
glue("d_lo_mean", float(d_lo.mean()), display=False)
glue("rho_hi_all", float(spearmanr(E["high-entropy tokens (kept)"][:-1], E["all tokens"][:-1]).statistic), display=False)
glue("hi_argmax", profile_summary(E["high-entropy tokens (kept)"], ids, skip_last=True)["argmax"], display=False)
glue("all_argmax", profile_summary(E["all tokens"], ids, skip_last=True)["argmax"], display=False)

# %% [markdown]
# ```{glue:figure} fig_filter_entropy
# :name: fig-filter-entropy
#
# Entropy of every layer over all sampled positions, a random subset of the filtered
# size, the filtered (high-entropy) positions and the dropped (low-entropy) ones.
# ```
#
# Against a random subset of the same size, the high-entropy positions have
# {glue:text}`d_hi_mean:+.2f` nats more entropy on average over layers, and the
# low-entropy ones {glue:text}`d_lo_mean:+.2f`. Over layers (last entry aside), the
# Spearman correlation between the filtered and the unfiltered profile is
# {glue:text}`rho_hi_all:.2f`; the filtered profile peaks at layer
# {glue:text}`hi_argmax:d`, the unfiltered one at layer {glue:text}`all_argmax:d`.

# %%
C_all = cka_matrix(H)
C_hi = cka_matrix(H[:, keep])
comp_all = segment_compartments(C_all, ids=ids, k_max=k_max)
comp_hi = segment_compartments(C_hi, ids=ids, k_max=k_max)
fig = plot_cka_grid(ids, {"all tokens": C_all, "high-entropy tokens": C_hi},
                    compartments={"all tokens": comp_all, "high-entropy tokens": comp_hi})
glue("fig_filter_cka", fig, display=False)
plt.close(fig)
off = ~np.eye(len(ids), dtype=bool)
glue("cka_filter_mad", float(np.abs(C_all - C_hi)[off].mean()), display=False)
glue("comp_all", spans(comp_all), display=False)
glue("comp_hi", spans(comp_hi), display=False)

# %% [markdown]
# ```{glue:figure} fig_filter_cka
# :name: fig-filter-cka
#
# Linear CKA over all sampled positions (left) and over the high-entropy ones (right),
# each with its automatic compartments.
# ```
#
# CKA moves by {glue:text}`cka_filter_mad:.3f` on average over pairs of layers. The
# compartments are {glue:text}`comp_all` over all tokens and {glue:text}`comp_hi` over
# the high-entropy ones.
#
# ## How many tokens are enough?
#
# The budget of the run profile is {glue:text}`n_tokens:d` tokens. To see whether that
# is enough, the statistics are recomputed on random subsets of fewer tokens (three
# seeded subsets per size) and compared with those of the whole sample: does the
# entropy profile rank the layers the same way, and how far does the CKA map move?

# %%
n_hi = int(keep.sum())
sizes = [s for s in (32, 64, 128, 256, 512, 1024) if s < n_hi] + [min(n_hi, 1024)]
sizes = sorted(set(sizes))
st_all = token_count_stability(H, sizes, n_rep=3, seed=seed, alpha=alpha)
st_hi = token_count_stability(H[:, keep], sizes, n_rep=3, seed=seed, alpha=alpha)
fig = plot_stability_tokens(sizes, {"all tokens": st_all["profile_corr"], "high-entropy tokens": st_hi["profile_corr"]},
                            ylabel="Spearman correlation with the full profile",
                            title="Does a smaller sample rank the layers alike?")
glue("fig_stability_profile", fig, display=False)
plt.close(fig)
fig = plot_stability_tokens(sizes, {"all tokens": st_all["cka_mad"], "high-entropy tokens": st_hi["cka_mad"]},
                            ylabel="mean |CKA - CKA(full sample)|", title="How far does the CKA map move?")
glue("fig_stability_cka", fig, display=False)
plt.close(fig)
glue("size_small", sizes[0], display=False)
glue("size_big", sizes[-1], display=False)
glue("corr_small_all", float(st_all["profile_corr"][0].mean()), display=False)
glue("corr_big_all", float(st_all["profile_corr"][-1].mean()), display=False)
glue("corr_big_hi", float(st_hi["profile_corr"][-1].mean()), display=False)
glue("mad_small_all", float(st_all["cka_mad"][0].mean()), display=False)
glue("mad_big_all", float(st_all["cka_mad"][-1].mean()), display=False)
glue("mad_big_hi", float(st_hi["cka_mad"][-1].mean()), display=False)
glue("same_comp_big_all", float(st_all["same_compartments"][-1].mean()), display=False)

# %% [markdown]
# ```{glue:figure} fig_stability_profile
# :name: fig-stability-profile
#
# Spearman correlation, over layers, between the entropy profile of a random subset of
# tokens and that of the full sample (all sampled tokens, or all high-entropy ones).
# Line: mean of three subsets; band: their range.
# ```
#
# ```{glue:figure} fig_stability_cka
# :name: fig-stability-cka
#
# Mean absolute difference between the CKA matrix of a random subset of tokens and
# that of the full sample.
# ```
#
# With {glue:text}`size_small:d` tokens the entropy profile's rank correlation with the
# full one is {glue:text}`corr_small_all:.2f`; with {glue:text}`size_big:d` tokens it is
# {glue:text}`corr_big_all:.2f` (high-entropy tokens: {glue:text}`corr_big_hi:.2f`).
# CKA moves by {glue:text}`mad_small_all:.3f` at the smallest size and
# {glue:text}`mad_big_all:.3f` at the largest (high-entropy tokens:
# {glue:text}`mad_big_hi:.3f`); at the largest size, {glue:text}`same_comp_big_all:.0%`
# of the subsets give exactly the compartments of the full sample. Where neighbouring
# layers differ in entropy by less than the sampling noise, no budget makes their order
# meaningful; the bootstrap of {doc}`05_layer_selection` asks the same question of the
# selected layer sets.
#
# ## The sink question
#
# A first probe of this study on SmolLM2, over *every* position of some HumanEval
# records, saw the layer entropy fall by several nats at one depth and climb back over
# the following layers, at the same place as a boundary of the CKA map. The positions
# this study pools are response positions, which never include the first token of a
# sequence. To look for the effect, the next sections draw a second sample of the same
# size from every position, prompt included.
#
# ### Where the outliers sit

# %%
sall = cache.sample_tokens(cfg.metrics.token_budget, seed=seed, mask="all")
Ha = sall.hidden
norms_a = token_norms(Ha)
ratio_a = norms_a / np.median(norms_a, axis=1, keepdims=True)  # [L, n]: token norm / layer median
first = sall.position == 0
norms_r = token_norms(H)
ratio_r = norms_r / np.median(norms_r, axis=1, keepdims=True)
fig = plot_norm_ratio(ids, {"first token of the sequence (median over sequences)": np.median(ratio_a[:, first], axis=1),
                            "largest of all other positions": ratio_a[:, ~first].max(axis=1),
                            "largest response position": ratio_r.max(axis=1)})
glue("fig_norm_ratio", fig, display=False)
plt.close(fig)
f_big = cfg.metrics.massive_factor
massive = massive_tokens(norms_a, f_big)
first_ids = token_ids_at(cache, sall.record[first], sall.position[first])
vals, counts = np.unique(first_ids, return_counts=True)
sink_peak = np.median(ratio_a[:, first], axis=1)
glue("n_first", int(first.sum()), display=False)
glue("n_all", int(Ha.shape[1]), display=False)
glue("first_token", show(vals[int(np.argmax(counts))]), display=False)
glue("sink_peak", float(sink_peak.max()), display=False)
glue("sink_peak_layer", int(ids[int(np.argmax(sink_peak))]), display=False)
glue("other_peak", float(ratio_a[:, ~first].max()), display=False)
glue("resp_peak", float(ratio_r.max()), display=False)
glue("resp_peak_layer", int(ids[int(np.argmax(ratio_r.max(axis=1)))]), display=False)
glue("f_big", float(f_big), display=False)
glue("n_massive", int(massive.sum()), display=False)
glue("massive_first_share", float(first[massive].mean()) if massive.any() else 0.0, display=False)

# %% [markdown]
# ```{glue:figure} fig_norm_ratio
# :name: fig-norm-ratio
#
# Token norm divided by the layer's median token norm (log scale): the first token of
# each sequence, the largest of all other positions, and the largest response position.
# ```
#
# The sample from every position holds {glue:text}`n_first:d` first tokens (mostly
# {glue:text}`first_token`) among {glue:text}`n_all:d`. At its peak, layer
# {glue:text}`sink_peak_layer:d`, the first token's norm is {glue:text}`sink_peak:.0f`
# times the layer's median norm; the largest of all other positions reaches
# {glue:text}`other_peak:.1f` times the median, and the largest response position
# {glue:text}`resp_peak:.1f` times (at layer {glue:text}`resp_peak_layer:d`). With a threshold of
# {glue:text}`f_big:.0f` times the median norm in any layer,
# {glue:text}`n_massive:d` tokens count as massive, {glue:text}`massive_first_share:.0%`
# of them at the first position.
#
# ### Entropy with and without the outliers
#
# Four treatments of the same all-position sample: all tokens with the usual mean
# centring, without the first position of each sequence, without the massive tokens,
# and all tokens centred on the coordinate-wise median, which a few outliers cannot move.

# %%
conds = outlier_conditions(sall.position, norms_a, drop_first=max(1, cfg.metrics.drop_first), massive_factor=f_big)
res_a = compare_conditions(Ha, conds, alpha=alpha)
labels = list(res_a)
fig = plot_filter_comparison(ids, {k: v["entropy"] for k, v in res_a.items()},
                             title="Entropy over depth, every position of the sequences")
glue("fig_sink_entropy", fig, display=False)
plt.close(fig)
summ = {k: profile_summary(v["entropy"], ids, skip_last=True) for k, v in res_a.items()}
ref = summ[labels[0]]
cliff = ids.index(ref["drop_to"])
glue("cliff_drop", ref["drop"], display=False)
glue("cliff_layer", ref["drop_to"], display=False)
glue("cliff_before", float(res_a[labels[0]]["entropy"][cliff - 1]), display=False)
glue("cliff_after", float(res_a[labels[0]]["entropy"][cliff]), display=False)
glue("cliff_recovery", float(res_a[labels[0]]["entropy"][-2] - res_a[labels[0]]["entropy"][cliff]), display=False)
for key, lab in zip(("nofirst", "nomassive", "median"), labels[1:]):
    glue(f"{key}_drop", summ[lab]["drop"], display=False)
    glue(f"{key}_at_cliff", float(res_a[lab]["entropy"][cliff]), display=False)
rho_wave = spearmanr(res_a[labels[0]]["entropy"][:-1], np.log(sink_peak[:-1])).statistic
glue("rho_wave", float(rho_wave), display=False)
# "removed": the largest remaining fall is under half the original one
gone = [summ[lab]["drop"] < 0.5 * ref["drop"] for lab in labels[1:]]
removed = all(gone)
glue("verdict_removed", "each of the three removes it" if removed else
     ("only some of the three remove it" if any(gone) else "none of the three removes it"), display=False)
effect = np.abs(res_a[labels[0]]["entropy"] - res_a[labels[1]]["entropy"])[:-1]
glue("sink_effect", float(effect.max()), display=False)
glue("sink_effect_layer", int(ids[int(np.argmax(effect))]), display=False)
conclusion = {
    True: ("The cliff is therefore an outlier artefact of the estimator, by the mechanism of {ref}`sec-outliers`: "
           f"the first token's hidden state reaches {float(sink_peak.max()):.0f} times the median norm (every other "
           f"position at most {float(ratio_a[:, ~first].max()):.1f} times), mean centring subtracts a large "
           "multiple of its direction from every other token, row normalisation lines the tokens up along it, and "
           "the spectrum collapses; as the first token's relative norm decays with depth, the entropy climbs back "
           "(the rank correlation with its norm ratio, above). A wave of this kind in an entropy profile describes "
           "one token per sequence, not the information a layer carries."),
    False: ("The fall is therefore not the work of the first token alone: at least one of the three treatments "
            "leaves most of it in place ({numref}`fig-sink-entropy`). It may come from a broader group of high-norm "
            "tokens (other positions that stick out in the same layers, {numref}`fig-norm-ratio`) or from a real "
            "narrowing of the representation; these statistics cannot tell the two apart, so the fall should be "
            "read with that caution, not as a measure of information alone."),
}[bool(removed)]
glue("sink_conclusion", Markdown(conclusion), display=False)

# %% [markdown]
# ```{glue:figure} fig_sink_entropy
# :name: fig-sink-entropy
#
# Entropy of every layer over a sample of *all* positions (prompt and response), under
# the four treatments of outlier tokens.
# ```
#
# With every position and mean centring, the entropy falls by
# {glue:text}`cliff_drop:.2f` nats into layer {glue:text}`cliff_layer:d`, from
# {glue:text}`cliff_before:.2f` to {glue:text}`cliff_after:.2f` nats, and changes by
# {glue:text}`cliff_recovery:+.2f` nats from there to layer $N-1$. At that layer, leaving out the first position gives
# {glue:text}`nofirst_at_cliff:.2f` nats, leaving out the massive tokens
# {glue:text}`nomassive_at_cliff:.2f`, and median centring
# {glue:text}`median_at_cliff:.2f`; the largest fall between consecutive layers in
# those three curves is {glue:text}`nofirst_drop:.2f`, {glue:text}`nomassive_drop:.2f`
# and {glue:text}`median_drop:.2f` nats. Each treatment on its own
# {glue:text}`verdict_removed` the cliff. Over layers 0 to $N-1$, the mean-centred
# entropy follows the first token's norm ratio of {numref}`fig-norm-ratio` closely:
# Spearman correlation {glue:text}`rho_wave:.2f` with its logarithm.
#
# ### CKA with and without the outliers

# %%
mats = {k: v["cka"] for k, v in res_a.items() if v["cka"] is not None}
comps_a = {k: segment_compartments(C, ids=ids, k_max=k_max) for k, C in mats.items()}
fig = plot_cka_grid(ids, mats, compartments=comps_a, ncols=3)
glue("fig_sink_cka", fig, display=False)
plt.close(fig)
glue("comp_sink_ref", spans(comps_a[labels[0]]), display=False)
glue("comp_sink_nofirst", spans(comps_a[labels[1]]), display=False)
glue("comp_sink_nomassive", spans(comps_a[labels[2]]), display=False)

# %% [markdown]
# ```{glue:figure} fig_sink_cka
# :name: fig-sink-cka
#
# Linear CKA over every position: all tokens, without the first position, without the
# massive tokens; automatic compartments outlined.
# ```
#
# Over every position the automatic compartments are {glue:text}`comp_sink_ref`;
# without the first position {glue:text}`comp_sink_nofirst`, and without the massive
# tokens {glue:text}`comp_sink_nomassive`.
#
# ### And on the response positions this study uses
#
# Response positions never include the first token of a sequence, but they have
# outliers of their own, milder ones ({numref}`fig-norm-ratio`). Plain CKA weighs every
# token by its squared norm twice over, so even tokens a few times larger than the
# median can dominate it. The table drops the response tokens whose norm exceeds a
# multiple of the median in any layer, for several multiples, and recomputes the
# compartments; the last row instead gives every token unit norm before CKA (the
# row-normalised CKA, which sees the tokens as the entropy does).

# %%
offsets = response_offsets(sample.position, sample.record, cache.records)
conds_r = outlier_conditions(offsets, norms_r, drop_first=max(1, cfg.metrics.drop_first), massive_factor=f_big)
res_r = compare_conditions(H, conds_r, alpha=alpha)
factors = sorted({3.0, 5.0, 10.0, float(f_big)})
rows, C_low, f_low, low_row = [], None, factors[0], None
for f in factors:
    drop = massive_tokens(norms_r, f)
    if drop.sum() > n - 4:
        continue
    C = cka_matrix(apply_mask(H, ~drop)[0]) if drop.any() else C_all
    if C_low is None and drop.any():
        C_low, f_low, low_row = C, f, len(rows) + 1  # row in `sweep` (row 0: plain CKA, nothing dropped)
    top = ""
    if drop.any():
        tid, cnt = np.unique(token_ids_at(cache, sample.record[drop], sample.position[drop]), return_counts=True)
        top = ", ".join(f"{show(t)} ({c})" for t, c in sorted(zip(tid, cnt), key=lambda x: -x[1])[:3])
    rows.append({"tokens dropped": f"norm > {f:g}x median", "n dropped": int(drop.sum()),
                 "share": float(drop.mean()), "most frequent dropped tokens": top,
                 "compartments": spans(segment_compartments(C, ids=ids, k_max=k_max))})
C_norm = cka_matrix(H, normalize=True)
rows.append({"tokens dropped": "none, row-normalised CKA", "n dropped": 0, "share": 0.0,
             "most frequent dropped tokens": "", "compartments": spans(segment_compartments(C_norm, ids=ids, k_max=k_max))})
sweep = pd.DataFrame([{"tokens dropped": "none (plain CKA)", "n dropped": 0, "share": 0.0,
                       "most frequent dropped tokens": "", "compartments": spans(comp_all)}] + rows)
display(sweep.style.format({"share": "{:.1%}"}).hide(axis="index"))
resp_summ = {k: profile_summary(v["entropy"], ids, skip_last=True) for k, v in res_r.items()}
glue("resp_drop_ref", resp_summ[list(res_r)[0]]["drop"], display=False)
glue("resp_drop_max_other", max(s["drop"] for s in list(resp_summ.values())[1:]), display=False)
glue("resp_entropy_shift_max", float(max(np.abs(v["entropy"] - res_r[list(res_r)[0]]["entropy"]).max()
                                         for v in list(res_r.values())[1:])), display=False)
glue("resp_first_ratio", float(ratio_r[:, offsets == 0].max()) if (offsets == 0).any() else 1.0, display=False)
glue("comp_norm", spans(segment_compartments(C_norm, ids=ids, k_max=k_max)), display=False)
cka_moves = any(r != spans(comp_all) for r in sweep["compartments"])
glue("cka_conclusion", Markdown(
    "Plain CKA, and the compartments drawn from it, answer to the few response tokens with the largest norms "
    "(the table above): leaving those tokens out, or weighing every token the same, redraws the compartments."
    if cka_moves else
    "The compartments of plain CKA stay the same when the highest-norm response tokens are left out or every "
    "token is weighed the same (the table above)."), display=False)
low = sweep.loc[low_row] if low_row is not None else {"compartments": spans(comp_all), "n dropped": 0,
                                                          "share": 0.0, "most frequent dropped tokens": "none"}
glue("f_low", float(f_low), display=False)
glue("comp_low", low["compartments"], display=False)
glue("n_low", int(low["n dropped"]), display=False)
glue("share_low", float(low["share"]), display=False)
glue("top_low", low["most frequent dropped tokens"], display=False)
if C_low is not None:
    show_mats = {"all response tokens": C_all, f"without tokens > {f_low:g}x median norm": C_low,
                 "row-normalised CKA": C_norm}
else:
    show_mats = {"all response tokens": C_all, "row-normalised CKA": C_norm}
fig = plot_cka_grid(ids, show_mats, compartments={k: segment_compartments(v, ids=ids, k_max=k_max)
                                                  for k, v in show_mats.items()}, ncols=3)
glue("fig_response_cka", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_response_cka
# :name: fig-response-cka
#
# CKA over the study's response positions: plain, without the highest-norm tokens, and
# row-normalised; automatic compartments outlined.
# ```
#
# On response positions, the four treatments of {numref}`fig-sink-entropy` (the first
# *response* position in place of the first position of the sequence) move no layer's
# entropy by more than {glue:text}`resp_entropy_shift_max:.2f` nats; the largest fall
# between consecutive layers is {glue:text}`resp_drop_ref:.2f` nats with mean centring
# and at most {glue:text}`resp_drop_max_other:.2f` under the other treatments. The first
# response position reaches at most {glue:text}`resp_first_ratio:.1f` times the median
# norm. For CKA, dropping the {glue:text}`n_low:d` tokens ({glue:text}`share_low:.1%`)
# whose norm exceeds {glue:text}`f_low:.0f` times the median in some layer (most often
# {glue:text}`top_low`) gives the compartments {glue:text}`comp_low`, against
# {glue:text}`comp_all` with every token; row-normalised CKA, in which every token
# weighs the same, gives {glue:text}`comp_norm`.
#
# ### What it means
#
# Read together, the measurements answer the sink question for this model. With every
# position in the sample, the largest fall of entropy between consecutive layers is
# {glue:text}`cliff_drop:.2f` nats, into layer {glue:text}`cliff_layer:d`. Three
# treatments were tried (leaving out the first position, leaving out the massive tokens,
# centring on the median), and {glue:text}`verdict_removed`. Over all layers but the
# last, leaving out the first
# position changes the entropy by at most {glue:text}`sink_effect:.2f` nats (at layer
# {glue:text}`sink_effect_layer:d`). {glue:md}`sink_conclusion:myst`
#
# The study's own statistics use response positions, which never include the first
# token of a sequence; there, as measured above, no treatment of outliers moves a
# layer's entropy by more than {glue:text}`resp_entropy_shift_max:.2f` nats.
# {glue:md}`cka_conclusion:myst` {doc}`05_layer_selection` uses the compartments
# only in the `cka-diverse` rule and the CKA penalty of the `combined` rule, and reports
# how stable each rule's choice is.

# %%
_ = save_results("04_token_filtering", {
    "ids": ids, "alpha": alpha, "n_tokens": n, "filter": {"quantile": q, "threshold": thr, "n_kept": int(keep.sum()),
                                                           "entropy": E, "cka_mad": float(np.abs(C_all - C_hi)[off].mean()),
                                                           "compartments_all": comp_all, "compartments_kept": comp_hi},
    "stability": {"sizes": sizes, "all": {k: st_all[k] for k in ("profile_corr", "entropy_shift", "cka_mad", "same_compartments")},
                  "kept": {k: st_hi[k] for k in ("profile_corr", "entropy_shift", "cka_mad", "same_compartments")}},
    "sink": {"n_tokens": int(Ha.shape[1]), "n_first": int(first.sum()), "first_norm_ratio": sink_peak,
             "massive_factor": f_big, "n_massive": int(massive.sum()),
             "conditions": {k: {"n_tokens": v["n_tokens"], "center": v["center"], "entropy": v["entropy"],
                                "compartments": comps_a.get(k)} for k, v in res_a.items()},
             "cliff": ref, "cliff_removed": bool(removed), "spearman_entropy_log_first_ratio": float(rho_wave)},
    "response_outliers": {"conditions": {k: {"n_tokens": v["n_tokens"], "entropy": v["entropy"]} for k, v in res_r.items()},
                          "sweep": sweep.to_dict("records")},
}, cfg, results_root or None)
