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
# # Which tokens should the statistics count?
#
# ```{admonition} Answer
# :class: tip
#
# Keeping only the tokens whose next-token entropy is at or above its
# {glue:text}`q:.2f` quantile, the entropy profile correlates
# {glue:text}`rho_hi_all:.2f` with the unfiltered one, and the compartments are
# {glue:text}`comp_hi` (unfiltered: {glue:text}`comp_all`). Over all positions, entropy
# falls by {glue:text}`cliff_drop:.2f` nats into layer {glue:text}`cliff_layer:d`, where the
# first position reaches {glue:text}`sink_peak:.0f` times the median norm; treatments that
# remove that fall on their own: {glue:text}`removed_by`.
# ```
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

# %% tags=["parameters", "hide-input"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %% tags=["hide-input"]
from IPython.display import display

from activation_wave.study.glue import glue_figure, glue_values
from activation_wave.study.chapters import token_filtering as ch
from activation_wave.core.layers import span_text
from activation_wave.study.steps import open_chapter
from activation_wave.plots import (plot_cka_grid, plot_filter_comparison, plot_norm_ratio, plot_stability_tokens,
                                   plot_token_entropy_hist)
from activation_wave.core.results import save_result
from activation_wave.core.tables import format_table

cfg, cap = open_chapter(profile, model, overrides)

# %% [markdown]
# ## Where is the target uncertain?
#
# At each position the capture stored the entropy of the target's next-token
# distribution ({term}`token entropy`). Filtering keeps the positions at or above the
# {glue:text}`q:.2f` quantile of that entropy in the sample (a run-profile parameter).

# %%
r = ch.run(cfg, cap)  # every measurement of this chapter: activation_wave/study/chapters/token_filtering.py
_ = save_result("04_token_filtering", r, cfg, results_root or None)
f, b, sink, resp, ids = r.filter, r.budget, r.sink, r.response, r.ids
glue_figure("fig_token_entropy", plot_token_entropy_hist(r.next_entropy, f.threshold))
glue_values(n_tokens=r.n_tokens, alpha=r.alpha, q=f.quantile, thr=f.threshold, n_kept=f.n_kept, sure=f.sure_nats,
            frac_sure=f.frac_sure, median_entropy=f.median_entropy)

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

# %% tags=["hide-input"]
labels = {"all": "all tokens", "random": "random subset, same size", "kept": "high-entropy tokens (kept)",
          "dropped": "low-entropy tokens (dropped)"}
glue_figure("fig_filter_entropy", plot_filter_comparison(ids, {labels[k]: v for k, v in f.entropy.items()},
                                                         title=f"Entropy over depth by token subset (alpha = {r.alpha:g})"))
glue_values(d_hi_mean=f.d_kept_mean, d_lo_mean=f.d_dropped_mean, rho_hi_all=f.rho_kept_all, hi_argmax=f.kept_argmax,
            all_argmax=f.all_argmax)

# %% [markdown]
# ```{glue:figure} fig_filter_entropy
# :name: fig-filter-entropy
#
# Entropy of every layer over all sampled positions, a random subset of the filtered
# size, the filtered (high-entropy) positions and the dropped (low-entropy) ones.
# ```
#
# Against a random subset of the same size, the high-entropy positions have
# a mean entropy difference over layers of {glue:text}`d_hi_mean:+.2f` nats, and the
# low-entropy ones {glue:text}`d_lo_mean:+.2f` nats. Over layers (last entry aside), the
# Spearman correlation between the filtered and the unfiltered profile is
# {glue:text}`rho_hi_all:.2f`; the filtered profile peaks at layer
# {glue:text}`hi_argmax:d`, the unfiltered one at layer {glue:text}`all_argmax:d`.

# %% tags=["hide-input"]
glue_figure("fig_filter_cka", plot_cka_grid(ids, {"all tokens": f.cka_all, "high-entropy tokens": f.cka_kept},
                                            compartments={"all tokens": f.compartments_all,
                                                          "high-entropy tokens": f.compartments_kept}))
glue_values(cka_filter_mad=f.cka_mad, comp_all=span_text(f.compartments_all), comp_hi=span_text(f.compartments_kept))

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

# %% tags=["hide-input"]
for measure, ylabel, title, name in (
        ("profile_corr", "Spearman correlation with the full profile", "Does a smaller sample rank the layers alike?",
         "fig_stability_profile"),
        ("cka_mad", "mean |CKA - CKA(full sample)|", "How far does the CKA map move?", "fig_stability_cka")):
    glue_figure(name, plot_stability_tokens(b.sizes, {"all tokens": b.all[measure], "high-entropy tokens": b.kept[measure]},
                                            ylabel=ylabel, title=title))
glue_values(size_small=b.sizes[0], size_big=b.sizes[-1], corr_small_all=b.at("all", "profile_corr", 0),
            corr_big_all=b.at("all", "profile_corr", -1), corr_big_hi=b.at("kept", "profile_corr", -1),
            mad_small_all=b.at("all", "cka_mad", 0), mad_big_all=b.at("all", "cka_mad", -1),
            mad_big_hi=b.at("kept", "cka_mad", -1), same_comp_big_all=b.at("all", "same_compartments", -1))

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
# (sec-sink-question)=
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

# %% tags=["hide-input"]
glue_figure("fig_norm_ratio", plot_norm_ratio(ids, {
    "first token of the sequence (median over sequences)": sink.first_norm_ratio,
    "largest of all other positions": sink.other_ratio, "largest response position": resp.response_ratio}))
glue_values(n_first=sink.n_first, n_all=sink.n_tokens, first_token=sink.first_token, sink_peak=sink.sink_peak,
            sink_peak_layer=sink.sink_peak_layer, other_peak=sink.other_peak, resp_peak=resp.response_peak,
            resp_peak_layer=resp.response_peak_layer, f_big=sink.massive_factor, n_massive=sink.n_massive,
            massive_first_share=sink.massive_first_share)

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

# %% tags=["hide-input"]
cond = sink.conditions
glue_figure("fig_sink_entropy", plot_filter_comparison(ids, {c.label: c.entropy for c in cond.values()},
                                                       title="Entropy over depth, every position of the sequences"))
c = sink.cliff
glue_values(cliff_drop=c.drop, cliff_layer=c.to_layer, cliff_before=c.before, cliff_after=c.after,
            cliff_recovery=c.recovery, rho_wave=sink.spearman_entropy_log_first_ratio,
            removed_by=ch.REMOVED_BY[sink.removed], sink_effect=sink.first_effect,
            sink_effect_layer=sink.first_effect_layer,
            **{f"{k.replace('_', '')}_drop": sink.drops[k] for k in ch.CONDITION_KEYS[1:]},
            **{f"{k.replace('_', '')}_at_cliff": sink.at_cliff[k] for k in ch.CONDITION_KEYS[1:]})

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
# and {glue:text}`median_drop:.2f` nats. Treatments that remove the cliff on their own:
# {glue:text}`removed_by`. Over layers 0 to $N-1$, the mean-centred entropy and the
# logarithm of the first token's norm ratio ({numref}`fig-norm-ratio`) have a Spearman
# correlation of {glue:text}`rho_wave:.2f`.
#
# ### CKA with and without the outliers

# %% tags=["hide-input"]
mean_centred = {k: c for k, c in cond.items() if c.cka is not None}
glue_figure("fig_sink_cka", plot_cka_grid(ids, {c.label: c.cka for c in mean_centred.values()},
                                          compartments={c.label: c.compartments for c in mean_centred.values()}, ncols=3))
glue_values(comp_sink_ref=span_text(cond["all"].compartments), comp_sink_nofirst=span_text(cond["no_first"].compartments),
            comp_sink_nomassive=span_text(cond["no_massive"].compartments))

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

# %% tags=["hide-input"]
display(format_table(ch.sweep_table(resp), {"share": "{:.1%}"}))
mats = {"all response tokens": (f.cka_all, f.compartments_all)}
if resp.cka_low is not None:
    mats[f"without tokens > {resp.low_factor:g}x median norm"] = (resp.cka_low, resp.spans_low)
mats["row-normalised CKA"] = (resp.cka_normalized, resp.spans_normalized)
glue_figure("fig_response_cka", plot_cka_grid(ids, {k: v[0] for k, v in mats.items()},
                                              compartments={k: v[1] for k, v in mats.items()}, ncols=3))
glue_values(resp_drop_ref=resp.drop_reference, resp_drop_max_other=resp.drop_max_other,
            resp_entropy_shift_max=resp.entropy_shift_max, resp_first_ratio=resp.first_response_ratio,
            comp_norm=resp.compartments_normalized, cka_moves=ch.CKA_MOVES[resp.cka_moves], **ch.low_values(resp))

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
# norm. For CKA: {glue:text}`n_low_text` ({glue:text}`share_low:.1%`) exceed
# {glue:text}`f_low:.0f` times the median norm in some layer (the most frequent:
# {glue:text}`top_low`), and leaving them out gives the compartments
# {glue:text}`comp_low`, against {glue:text}`comp_all` with every token; row-normalised
# CKA, in which every token weighs the same, gives {glue:text}`comp_norm`.
#
# ### What it means
#
# Read together, the measurements answer the sink question for this model. With every
# position in the sample, the largest fall of entropy between consecutive layers is
# {glue:text}`cliff_drop:.2f` nats, into layer {glue:text}`cliff_layer:d`. Three
# treatments were tried (leaving out the first position, leaving out the massive tokens,
# centring on the median); treatments that remove the cliff on their own:
# {glue:text}`removed_by`. Over all layers but the last, leaving out the first position
# changes the entropy by at most {glue:text}`sink_effect:.2f` nats (at layer
# {glue:text}`sink_effect_layer:d`).
#
# Where all three treatments remove the cliff, it is an outlier artefact of the
# estimator, by the mechanism of {ref}`sec-outliers`. The first token's hidden state
# reaches {glue:text}`sink_peak:.0f` times the median norm, every other position at
# most {glue:text}`other_peak:.1f` times. Mean centring subtracts a large multiple of
# its direction from every other token, row normalisation lines the tokens up along it,
# and the spectrum collapses; as the first token's relative norm decays with depth, the
# entropy climbs back. A wave of this kind describes one token per sequence, not the
# information a layer carries. Where a treatment leaves most of the fall in place, the
# fall may come from a broader group of high-norm tokens or from a real narrowing of the
# representation, which these statistics cannot tell apart.
#
# The study's own statistics use response positions, which never include the first
# token of a sequence; there, as measured above, no treatment of outliers moves a
# layer's entropy by more than {glue:text}`resp_entropy_shift_max:.2f` nats.
# When the highest-norm response tokens are left out, or every token is weighed the same,
# the compartments of plain CKA {glue:text}`cka_moves` (the table above).
# {doc}`05_layer_selection` uses the compartments
# only in the `cka-diverse` rule and the CKA penalty of the `combined` rule, and reports
# how stable each rule's choice is.

# %% [markdown]
# ## Try it
#
# `wave study --profile smoke --only 04 --no-build --set metrics.filter_quantile=0.8` re-executes this page in a
# few minutes, keeping only the most uncertain fifth of the positions; open
# `scratch/smoke/book/chapters/04_token_filtering.ipynb` and compare the compartments.
