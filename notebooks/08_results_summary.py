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
import pandas as pd
from IPython.display import Markdown, display

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
