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
# # Results at a glance
#
# One table per question of the study, every entry read from the results files that
# the chapters wrote (`data/results/<profile>/<model>/`).

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from myst_nb import glue
from scipy.stats import spearmanr

from activation_wave.pipeline import load_results, notebook_config

cfg = notebook_config(profile, model, overrides)
R = {name: load_results(name, cfg, results_root or None) for name in (
    "00_data_and_capture", "01_layer_entropy", "02_concat_entropy", "03_cka_compartments",
    "04_token_filtering", "05_layer_selection", "06_eagle3_speedup", "07_cross_model")}

# %% [markdown]
# ## Data

# %%
s0 = R["00_data_and_capture"]["summary"]
display(pd.Series({"model": cfg.model, "records (prompts)": s0["records"], "tokens captured": s0["tokens"],
                   "response positions": s0["response_positions"], "cache on disk (MiB)": s0["disk_MiB"]},
                  name="value").to_frame())

# %% [markdown]
# ## Information and similarity across depth

# %%
s1 = R["01_layer_entropy"]["summary"]["dataset"]
comp = R["03_cka_compartments"]["compartments"]
sink = R["04_token_filtering"]["sink"]
cond = sink["conditions"]
all_tok = cond["all tokens (mean centring)"]["entropy"]
rows = [
    ("dataset entropy, response positions (nats)", f"{s1['min']:.2f} (layer {s1['argmin']}) to {s1['max']:.2f} (layer {s1['argmax']})"),
    ("largest fall between adjacent layers (response positions)", f"{s1['drop']:.2f} nats, layer {s1['drop_from']} to {s1['drop_to']}"),
    ("CKA compartments (response positions)", ", ".join(f"{a}-{b}" for a, b in comp)),
    ("largest norm ratio of the first sequence token", f"{max(sink['first_norm_ratio']):.0f}x the median"),
    ("entropy with all positions (sink included): min over layers", f"{min(all_tok):.2f} nats at layer {all_tok.index(min(all_tok))}"),
]
for name, c in cond.items():
    if name != "all tokens (mean centring)":
        e = c["entropy"]
        rows.append((f"... {name}: min over layers", f"{min(e):.2f} nats at layer {e.index(min(e))}"))
display(pd.DataFrame(rows, columns=["quantity", "value"]))

# %% [markdown]
# ## Which layers, and do drafters agree?

# %%
s5, s6 = R["05_layer_selection"], R["06_eagle3_speedup"]
tau = {r["set"]: r for r in s6["summary"]}
rows = []
for method, ids in s5["sets"].items():
    sc = s5["scores"].get(method, {})
    t = tau.get(method, {})
    rows.append({"set": method, "layers": str(ids), "S2 (nats)": sc.get("renyi2"), "percentile of S2": sc.get("percentile"),
                 "mean CKA": sc.get("mean_cka"), "drafter tau": t.get("tau"), "tau 95% low": t.get("tau_lo"),
                 "tau 95% high": t.get("tau_hi")})
display(pd.DataFrame(rows).sort_values("drafter tau", ascending=False).round(3))
display(pd.Series(s6["spearman"], name="Spearman rho, score vs tau").round(3).to_frame())

# %% [markdown]
# ### What orders the drafters
#
# The selection scores are one candidate explanation of drafter quality; where in the
# network a set's layers sit is another. The table below ranks both against $\tau$
# across the layer triples of chapter 6, with the two-sided p-value of each Spearman
# correlation (13 triples, so these p-values are rough).

# %%
tri = [r for r in s6["summary"] if r["k"] == 3]
t3 = [r["tau"] for r in tri]
predictors = {"concatenation entropy S2": [r["renyi2"] for r in tri],
              "mean pairwise CKA": [r["mean_cka"] for r in tri],
              "deepest layer of the triple": [max(r["layers"]) for r in tri],
              "mean layer index": [float(np.mean(r["layers"])) for r in tri],
              "shallowest layer of the triple": [min(r["layers"]) for r in tri]}
corr = pd.DataFrame({name: dict(zip(("rho", "p"), spearmanr(x, t3))) for name, x in predictors.items()}).T
display(corr.astype(float).round(4))
spread = max(t3) - min(t3)
half_ci = float(np.mean([(r["tau_hi"] - r["tau_lo"]) / 2 for r in tri]))
late_from = R["00_data_and_capture"]["info"]["decoder blocks N"] - 2  # hidden_states of the last three blocks
late = [r for r in tri if max(r["layers"]) >= late_from]
early = [r for r in tri if max(r["layers"]) < late_from]
glue("rho_deepest", float(corr.loc["deepest layer of the triple", "rho"]), display=False)
glue("p_deepest", float(corr.loc["deepest layer of the triple", "p"]), display=False)
glue("rho_s2", float(corr.loc["concatenation entropy S2", "rho"]), display=False)
glue("p_s2", float(corr.loc["concatenation entropy S2", "p"]), display=False)
glue("tau_spread", spread, display=False)
glue("tau_half_ci", half_ci, display=False)
glue("n_late", len(late), display=False)
glue("tau_late", float(np.mean([r["tau"] for r in late])) if late else float("nan"), display=False)
glue("tau_early", float(np.mean([r["tau"] for r in early])) if early else float("nan"), display=False)
glue("late_from", late_from, display=False)
singles6 = {r["layers"][0]: r["tau"] for r in s6["summary"] if r["k"] == 1}
pairs6 = [r for r in s6["summary"] if r["k"] == 2]
pair_gain = [r["tau"] - max(singles6.get(a, float("nan")) for a in r["layers"]) for r in pairs6]
glue("n_pairs6", len(pairs6), display=False)
glue("n_pairs6_gain", sum(g > 0 for g in pair_gain), display=False)
glue("pairs6_max_gain", max(pair_gain) if pair_gain else float("nan"), display=False)

# %% [markdown]
# On this model the ranking of drafters is explained by depth, not by the selection
# scores: Spearman's $\rho$ between a triple's deepest layer and its drafter's $\tau$ is
# {glue:text}`rho_deepest:.2f` (p = {glue:text}`p_deepest:.1g`), while concatenation
# entropy gives {glue:text}`rho_s2:.2f` (p = {glue:text}`p_s2:.1g`): *more* entropy,
# *worse* drafters. The {glue:text}`n_late:d` triples that read a layer at or above
# {glue:text}`late_from:d` (the last three blocks) average $\tau$ =
# {glue:text}`tau_late:.3f`, the others {glue:text}`tau_early:.3f`. Layer entropy grows
# with depth on SmolLM2 (chapter 1), so the rules that maximise it (entropy-greedy,
# exhaustive, combined) pick exactly those last layers. The single-layer drafters of
# chapter 6 point the same way from the other side: reading layer 21 alone is as good
# as the default triple, and much better than reading layer 1 or 11; adding a second
# layer to the better single layer of a pair raises $\tau$ in {glue:text}`n_pairs6_gain:d`
# of {glue:text}`n_pairs6:d` pairs (best change {glue:text}`pairs6_max_gain:+.3f`). A plausible reading
# (not tested here) is that the last blocks already commit to the target's next token,
# which the drafter also receives as its input token, and keep less of what the
# following tokens need. The effect is small in absolute terms: all triples lie within
# {glue:text}`tau_spread:.3f` of each other, about the half-width of one set's 95%
# interval ({glue:text}`tau_half_ci:.3f`), so it is the consistency of the ranking over
# 13 triples and two seeds, not any single gap, that carries the conclusion.

# %% [markdown]
# ## Speculative decoding on this machine

# %%
online = pd.DataFrame(s6["online"]).T[["layers", "tau_t0", "tau_t1", "lossless_prompts", "n_prompts",
                                        "speedup_vs_plain_t0", "speedup_vs_plain_t1", "speedup_vs_prompt_lookup_t0"]]
display(online)

# %% [markdown]
# ## Two architectures

# %%
rows = []
for s in R["07_cross_model"]["summaries"]:
    rows.append({"model": s["model"], "N": s["n_layers"], "width": s["hidden_size"],
                 "compartments": ", ".join(f"{a}-{b}" for a, b in s["compartments"]),
                 "EAGLE-3 default": str(s["default"]), "exhaustive (S2)": str(s["sets"].get("exhaustive")),
                 "default's S2 percentile": round(s["percentile"].get("eagle3-default", float("nan")), 1)})
display(pd.DataFrame(rows))
