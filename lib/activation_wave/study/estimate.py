"""``wave dry-run``: validate a config and estimate each step's memory, disk and time.

No weights are loaded. The model's shape comes from its ``config.json`` when one is
available offline (a local folder, the HF cache, or an embedded alias's known shape),
or from :data:`KNOWN_SHAPES` for the large hub models the ``paper`` profile names.
Hardware figures are stated assumptions (:data:`HARDWARE`), not measurements: the
estimates are for planning, and say so.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from activation_wave.core.config import StudyConfig
from activation_wave.core.layers import text_config

GiB = 2**30


@dataclass(frozen=True)
class Shape:
    """What the estimates need of a decoder-only model."""

    n_layers: int
    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    tied: bool = False

    @property
    def params(self) -> int:
        head_dim = self.hidden // self.heads
        attn = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_heads * head_dim
        mlp = 3 * self.hidden * self.intermediate
        emb = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.n_layers * (attn + mlp + 2 * self.hidden) + emb


#: Published architecture sizes (model cards / config.json of each model).
KNOWN_SHAPES: dict[str, Shape] = {
    "meta-llama/Llama-3.1-8B-Instruct": Shape(32, 4096, 14336, 128256, 32, 8),
    "meta-llama/Llama-3.1-70B-Instruct": Shape(80, 8192, 28672, 128256, 64, 8),
    "meta-llama/Llama-3.3-70B-Instruct": Shape(80, 8192, 28672, 128256, 64, 8),
    "Qwen/Qwen2.5-7B-Instruct": Shape(28, 3584, 18944, 152064, 28, 4),
    "smollm2-135m": Shape(30, 576, 1536, 49152, 9, 3, tied=True),
    "gemma3-270m": Shape(18, 640, 2048, 262144, 4, 1, tied=True),
    "qwen2.5-coder-1.5b": Shape(28, 1536, 8960, 151936, 12, 2, tied=True),
}

#: Planning assumptions per device (memory in GiB, memory bandwidth GB/s, dense bf16 TFLOP/s).
HARDWARE = {
    "gpu-80g": {"memory_gib": 80, "bandwidth_gbs": 3000, "tflops": 700, "efficiency": 0.4,
                "note": "H100/H200-class GPU, bf16"},
    "cpu-2core": {"memory_gib": 24, "bandwidth_gbs": 20, "tflops": 0.1, "efficiency": 0.5,
                  "note": "the 2-core machine this study's default profile runs on, fp32"},
}


def model_shape(name: str) -> Shape:
    """Shape from a known table, a local folder's config.json, or the offline HF cache."""
    if name in KNOWN_SHAPES:
        return KNOWN_SHAPES[name]
    path = Path(name).expanduser()
    cfg_file = path / "config.json" if path.is_dir() else None
    if cfg_file is None:
        try:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache(name, "config.json")
            cfg_file = Path(hit) if isinstance(hit, str) else None
        except Exception:  # noqa: BLE001
            cfg_file = None
    if cfg_file is None or not cfg_file.exists():
        raise ValueError(f"no offline config for model {name!r}: known shapes are {sorted(KNOWN_SHAPES)}; "
                         "otherwise pass a local folder with a config.json")
    from activation_wave.models.targets import read_model_config

    c = read_model_config(cfg_file.parent)  # typed and checked: a "576" is refused here, naming the field
    return Shape(c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"], c["vocab_size"],
                 c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"]),
                 bool(c.get("tie_word_embeddings", False)))


def shape_of(config: Any) -> Shape:
    """The :class:`Shape` of a loaded model's (transformers) config."""
    c = text_config(config)
    heads = int(c.num_attention_heads)
    return Shape(int(c.num_hidden_layers), int(c.hidden_size), int(getattr(c, "intermediate_size", 0) or 0),
                 int(c.vocab_size), heads, int(getattr(c, "num_key_value_heads", None) or heads),
                 bool(getattr(c, "tie_word_embeddings", False)))


#: Default RAM limit (GiB) for any step; ``WAVE_MEMORY_GIB`` in the environment replaces it.
MEMORY_GIB = 8.0

#: Per step, the config keys whose value the step's peak grows with, the first the one a
#: refusal proposes to lower (the others are named).
MEMORY_KEYS: dict[str, tuple[str, ...]] = {
    "load": (),
    "responses": ("data.batch_size", "data.max_new_tokens"),
    "capture": ("capture.batch_size", "capture.max_length"),
    "metrics": ("metrics.token_budget",),
    "drafter": ("draft.batch_tokens", "draft.workers", "draft.draft_vocab", "draft.ttt_steps"),
}


def estimate_peak_gib(cfg: StudyConfig, shape: Shape) -> dict[str, float]:
    """Conservative peak RAM (GiB) of each step of ``cfg`` on a model of ``shape``.

    Every figure counts fp32 (4 bytes) weights and activations, whatever the device, and
    takes every sequence at its longest, so it errs high. With ``W = params x 4``, ``N``
    blocks, hidden ``H``, intermediate ``I``, vocabulary ``V``, ``heads`` and ``kv_heads``:

    * ``load``: ``W``.
    * ``responses`` (generation, ``B = data.batch_size``, ``S = capture.max_length +
      data.max_new_tokens``): ``W`` + the KV cache ``2 N B kv_heads head_dim S x 4`` + the
      prefill's activations ``B S (4 H + 3 I) x 4`` and attention scores ``B heads S^2 x 4``
      + one step's logits ``2 B V x 4``; with ``data.engine: llamacpp`` only ``W`` (llama-server
      generates, in a process of its own with the quantized GGUF mapped).
    * ``capture`` (``B = capture.batch_size``, ``L = capture.max_length``): ``W`` + every
      layer's hidden states twice (transformers' tuple and the stacked float copy),
      ``2 (N+2) B L H x 4``, + the LM head's logits of every position ``B L V x 4`` + one
      block's temporaries ``B L 3 I x 4`` and scores ``B heads L^2 x 4``.
    * ``metrics`` (``T = metrics.token_budget``): the sample ``T (N+1) H x 4`` + its float64
      prepared stack and a work copy ``T (N+1) H x 16`` + two ``min(T, H)^2`` float64 Gram /
      covariance matrices.
    * ``drafter`` (``draft.workers`` processes, each): ``W`` + one batch of records' states of
      ``k + 1`` layers, read from the capture's shards as the batch is formed
      (``batch_tokens x (k+1) H x 4``; training holds no more of the data than that) + the drafter's parameters
      with gradients and AdamW moments (``params x 16``) + one batch unrolled
      ``draft.ttt_steps`` times with its graph kept: ``batch_tokens x ttt_steps x (3
      draft_vocab + (k + 6) H) x 4`` (logits, softmax, gradient; fused input and block
      activations).

    >>> est = estimate_peak_gib(StudyConfig(), KNOWN_SHAPES["smollm2-135m"])
    >>> sorted(est) == sorted(MEMORY_KEYS) and all(0 < v < 8 for v in est.values())
    True
    """
    n, h, inter, v = shape.n_layers, shape.hidden, shape.intermediate, shape.vocab
    head_dim = h // shape.heads
    w = shape.params * 4
    d, c, m, dr = cfg.data, cfg.capture, cfg.metrics, cfg.draft
    b, s = d.batch_size, c.max_length + d.max_new_tokens
    responses = (w + 2 * n * b * shape.kv_heads * head_dim * s * 4 + b * s * (4 * h + 3 * inter) * 4
                 + b * shape.heads * s * s * 4 + 2 * b * v * 4) if d.engine == "pytorch" else w
    b, seq = c.batch_size, c.max_length
    capture = (w + 2 * (n + 2) * b * seq * h * 4 + b * seq * v * 4 + b * seq * 3 * inter * 4
               + b * shape.heads * seq * seq * 4)
    t = m.token_budget
    metrics = t * (n + 1) * h * (4 + 16) + 2 * min(t, h) ** 2 * 8
    k = cfg.select.k
    vd = min(dr.draft_vocab, v)  # a draft vocabulary above V is all V tokens
    draft_params = (k + 4) * h * h + 3 * h * inter + vd * h
    records = dr.batch_tokens * (k + 1) * h * 4
    batch = dr.batch_tokens * dr.ttt_steps * (3 * vd + (k + 6) * h) * 4
    drafter = max(1, dr.workers) * (w + records + draft_params * 16 + batch)
    return {step: round(x / GiB, 2) for step, x in
            (("load", w), ("responses", responses), ("capture", capture), ("metrics", metrics), ("drafter", drafter))}


def memory_limit_gib() -> float:
    """``WAVE_MEMORY_GIB`` from the environment (a positive number of GiB), else :data:`MEMORY_GIB`."""
    from activation_wave.core.config import ConfigError

    raw = os.environ.get("WAVE_MEMORY_GIB")
    if raw is None or raw.strip() == "":
        return MEMORY_GIB
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"WAVE_MEMORY_GIB = {raw!r} is not a positive number of GiB; set it to this machine's "
                          f"usable memory, e.g. WAVE_MEMORY_GIB=64, or unset it for the {MEMORY_GIB:g} GiB default",
                          key="WAVE_MEMORY_GIB", expected="a positive number")
    return value


def _largest_fitting(cfg: StudyConfig, shape: Shape, step: str, key: str, limit: float) -> int | None:
    """The largest value of integer ``key`` (below its current one) with ``step`` within ``limit``."""
    section, name = key.split(".")
    current = getattr(getattr(cfg, section), name)

    def fits(value: int) -> bool:
        sec = replace(getattr(cfg, section), **{name: value})
        return estimate_peak_gib(replace(cfg, **{section: sec}), shape)[step] <= limit

    bound = getattr(type(getattr(cfg, section)), "BOUNDS", {}).get(name)
    low = 1 if bound is None or bound.low is None else max(1, math.floor(bound.low) + 1 if bound.low_open else math.ceil(bound.low))
    if current <= low or not fits(low):
        return None
    lo, hi = low, current - 1  # fits(lo) holds
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def check_memory(cfg: StudyConfig, shape: Shape, peaks: dict[str, float] | None = None) -> None:
    """Refuse, in one line, a config whose largest step (:func:`estimate_peak_gib`) exceeds
    the memory limit (:func:`memory_limit_gib`: ``WAVE_MEMORY_GIB`` or 8 GiB). The line names
    the step, its estimate, the key to lower with a value that fits, and ``WAVE_MEMORY_GIB``
    for a machine with more memory."""
    from activation_wave.core.config import ConfigError

    limit = memory_limit_gib()
    peaks = peaks or estimate_peak_gib(cfg, shape)
    step = max(peaks, key=lambda k: peaks[k])
    if peaks[step] <= limit:
        return
    keys = MEMORY_KEYS[step]
    fix, named = "", keys
    for key in keys:
        value = _largest_fitting(cfg, shape, step, key, limit)
        if value is not None:
            fix = f"lower {key} to at most {value} (--set {key}={value}); "
            named = tuple(x for x in keys if x != key)
            break
    others = f"the step also grows with {', '.join(named)}; " if named else ""
    if not keys:
        fix = "choose a smaller model (--model); "
    env = " (the paper profile expects a large machine)" if cfg.profile == "paper" else ""
    raise ConfigError(f"step {step} needs ~{peaks[step]:g} GiB of memory (a conservative estimate, see `wave dry-run`) "
                      f"with model {cfg.model}, above the {limit:g} GiB limit: {fix}{others}or, on a machine with more "
                      f"memory, set WAVE_MEMORY_GIB to its GiB{env}", key=keys[0] if keys else "model",
                      expected=f"<= {limit:g} GiB")


def check_before_load(cfg: StudyConfig, *, steps: tuple[str, ...] | None = None, layers: int | None = None) -> None:
    """The estimate every command makes before it loads weights: :func:`check_fit` on the
    shape read from the model's config alone (:func:`model_shape`: an alias, or a folder's
    ``config.json``), or, with ``steps``, only the memory of those steps (``info`` loads, no
    more). ``layers``: the number of layers a drafter reads (``train-draft --layers``), which
    sizes the drafter step instead of ``select.k``. A model whose shape is not known offline
    (a .gguf file, an uncached hub id) is checked once loaded."""
    try:
        shape = model_shape(cfg.model)
    except (ValueError, KeyError, TypeError, OSError):
        return
    if layers is not None:
        sized = replace(cfg, select=replace(cfg.select, k=layers))
        peaks = estimate_peak_gib(sized, shape)
        check_memory(sized, shape, peaks)
        return
    if steps is not None:
        peaks = estimate_peak_gib(cfg, shape)
        check_memory(cfg, shape, {k: v for k, v in peaks.items() if k in steps})
        return
    check_fit(cfg, shape)


def check_fit(cfg: StudyConfig, shape: Shape, *, memory: bool = True) -> None:
    """Raise :class:`~activation_wave.core.config.ConfigError` for a value that its section's
    bounds allow but this model does not: ``capture.layers`` outside ``0..N`` or repeated, more
    layers than it has candidates, a top-k or a
    draft vocabulary larger than its vocabulary, or (``memory``) a step whose estimated peak exceeds the
    memory limit (:func:`check_memory`). A draft vocabulary equal to the model's vocabulary
    takes every token; a larger one is refused (a typo, not a request).

    ``wave dry-run`` calls it with the model's shape, and every step once its model is known
    (:func:`activation_wave.study.steps.run_capture`, ``wave speculate``), so they reject alike.

    >>> check_fit(StudyConfig(), KNOWN_SHAPES["smollm2-135m"])
    >>> from dataclasses import replace
    >>> check_fit(replace(StudyConfig(), select=replace(StudyConfig().select, k=31)), KNOWN_SHAPES["smollm2-135m"])
    Traceback (most recent call last):
    ...
    activation_wave.core.config.ConfigError: select.k = 31 is out of range for model smollm2-135m: it has N = 30 decoder blocks, so 30 candidate layers (hidden_states 1..30), and a selection needs k below that; choose 1 <= k <= 29, e.g. --set select.k=3
    """
    from activation_wave.core.config import ConfigError
    from activation_wave.core.layers import candidate_layers, check_capture_layers

    check_capture_layers(cfg.capture.layers, shape.n_layers, model=cfg.model)  # the capture's own check
    n_cand = len(candidate_layers(shape.n_layers))
    if cfg.select.k >= n_cand:  # k = n_cand takes every candidate: nothing left to choose (as `wave select` says)
        raise ConfigError(f"select.k = {cfg.select.k} is out of range for model {cfg.model}: it has N = {shape.n_layers} "
                          f"decoder blocks, so {n_cand} candidate layers (hidden_states 1..{shape.n_layers}), and a "
                          f"selection needs k below that; choose 1 <= k <= {n_cand - 1}, e.g. --set select.k={min(3, n_cand - 1)}",
                          key="select.k", expected=f"in [1, {n_cand - 1}]")
    beyond = sorted(i for i in cfg.strength.singles if i > shape.n_layers)
    if beyond:
        raise ConfigError(f"strength.singles = {list(cfg.strength.singles)}: layer ids {beyond} are beyond model "
                          f"{cfg.model}'s N = {shape.n_layers} blocks; choose ids in 1..{shape.n_layers}, e.g. "
                          f"--set strength.singles={max(1, shape.n_layers - 7)},{max(1, shape.n_layers - 3)}",
                          key="strength.singles", expected=f"in [1, {shape.n_layers}]")
    for key, value in (("capture.topk", cfg.capture.topk), ("draft.draft_vocab", cfg.draft.draft_vocab)):
        if value > shape.vocab:  # draft_vocab = the vocabulary size takes every token; above it is a typo
            raise ConfigError(f"{key} = {value} is out of range for model {cfg.model}: its vocabulary has "
                              f"{shape.vocab} tokens; choose at most {shape.vocab} (the whole vocabulary), e.g. "
                              f"--set {key}={min(shape.vocab, 8 if key == 'capture.topk' else 8192)}", key=key,
                              expected=f"<= {shape.vocab}")
    if memory:
        check_memory(cfg, shape)


def dry_run(cfg: StudyConfig, *, hardware: str | None = None, text: bool = False, plan: bool = False) -> Any:
    """Estimated memory, disk and time of each step of ``cfg`` (no weights loaded).

    Rejects, as every step does, a config that does not fit the model (:func:`check_fit`),
    including one whose peak memory (:func:`estimate_peak_gib`) exceeds the limit. One
    exception, so that a GPU run can be planned from a small machine: for the ``paper``
    profile with ``WAVE_MEMORY_GIB`` unset, dry-run reports the steps above the 8 GiB
    default (``memory.over_limit``) instead of refusing; the steps themselves still refuse
    until ``WAVE_MEMORY_GIB`` is set. ``plan``: report instead of refusing for any profile
    and limit (chapter 9 plans the paper profile whatever this machine's limit is)."""
    from activation_wave.core.layers import eagle3_default_layers
    from activation_wave.engines.specforge import handoff, handoff_text

    hw_name = hardware or ("cpu-2core" if cfg.profile != "paper" else "gpu-80g")
    hw = HARDWARE[hw_name]
    shape = model_shape(cfg.model)
    check_fit(cfg, shape, memory=False)
    limit = memory_limit_gib()
    peaks = estimate_peak_gib(cfg, shape)
    plan_only = plan or (cfg.profile == "paper" and not os.environ.get("WAVE_MEMORY_GIB", "").strip())
    if not plan_only:
        check_memory(cfg, shape, peaks)
    over = [step for step, gib in peaks.items() if gib > limit]
    bytes_per = 4 if hw_name.startswith("cpu") else 2
    weights = shape.params * bytes_per
    gpus = max(1, math.ceil(weights * 1.3 / (hw["memory_gib"] * GiB)))
    n_prompts = cfg.data.max_prompts_per_source * len(cfg.data.sources) if cfg.data.max_prompts_per_source else 420
    # sampled responses go to the train split only: counting them for every prompt is an upper bound
    n_responses = n_prompts * (1 + cfg.data.samples_per_prompt)
    resp_tokens = n_responses * cfg.data.max_new_tokens * 0.8
    # Decoding is bound by reading the weights once per step; a batch shares that read.
    step_s = weights / (hw["bandwidth_gbs"] * 1e9 * hw["efficiency"] * gpus)
    gen_s = resp_tokens / cfg.data.batch_size * step_s
    records = min(n_responses, cfg.capture.max_records or n_responses)
    cap_tokens = records * min(cfg.capture.max_length, cfg.data.max_new_tokens + 200)
    flops = 2 * shape.params * cap_tokens
    cap_s = flops / (hw["tflops"] * 1e12 * hw["efficiency"] * gpus)
    cap_disk = cap_tokens * (shape.n_layers + 1) * shape.hidden * 2
    full_disk = n_responses * min(cfg.capture.max_length, cfg.data.max_new_tokens + 200) * (shape.n_layers + 1) * shape.hidden * 2
    metrics_mem = (shape.n_layers + 1) * cfg.metrics.token_budget * shape.hidden * 4
    draft_params = (cfg.select.k + 4) * shape.hidden * shape.hidden + 3 * shape.hidden * shape.intermediate + min(cfg.draft.draft_vocab, shape.vocab) * shape.hidden
    out = {
        "model": cfg.model, "profile": cfg.profile, "hardware": {"name": hw_name, **hw},
        "shape": asdict(shape), "params_billion": round(shape.params / 1e9, 2),
        "eagle3_default_layers": eagle3_default_layers(shape.n_layers),
        "steps": {
            "load": {"weights_gib": round(weights / GiB, 1), "devices": gpus,
                     "how": "device_map='auto' (accelerate) across devices" if gpus > 1 else "one device"},
            "responses": {"prompts": n_prompts, "responses": n_responses, "tokens": int(resp_tokens), "hours": round(gen_s / 3600, 2)},
            "capture": {"records": records, "tokens": cap_tokens, "disk_gib": round(cap_disk / GiB, 1),
                        "all_records_disk_gib": round(full_disk / GiB, 1), "hours": round(cap_s / 3600, 2)},
            "metrics": {"memory_gib": round(metrics_mem / GiB, 2), "tokens": cfg.metrics.token_budget},
            "drafter": {"params_million": round(draft_params / 1e6, 1),
                        "how": "train here on cached states, or in SpecForge with the exported layer ids at scale"},
        },
        "memory": {"peak_gib": peaks, "limit_gib": limit, "over_limit": over,
                   "how": "conservative fp32 upper bounds (estimate_peak_gib); a step above the limit is refused"},
        "assumptions": "planning estimates from stated hardware figures, not measurements",
    }
    if cfg.profile == "paper":  # drafters at this scale train in SpecForge: the hand-off it writes
        out["handoff"] = handoff(cfg, vocab=shape.vocab)
    if not text:
        return out
    s = out["steps"]
    return "\n".join([
        f"dry run: {cfg.model} ({out['params_billion']} B params), profile {cfg.profile}, on {hw_name} ({hw['note']})",
        f"  load      {s['load']['weights_gib']} GiB of weights on {gpus} device(s): {s['load']['how']}",
        f"  responses {s['responses']['prompts']} prompts, ~{s['responses']['tokens']} tokens, ~{s['responses']['hours']} h",
        f"  capture   {records} records, {cap_tokens} tokens, {s['capture']['disk_gib']} GiB on disk (all records: "
        f"{s['capture']['all_records_disk_gib']} GiB), ~{s['capture']['hours']} h",
        f"  metrics   {s['metrics']['memory_gib']} GiB for {cfg.metrics.token_budget} tokens x all layers",
        f"  drafter   {s['drafter']['params_million']} M params; {s['drafter']['how']}",
        f"  peak RAM  " + ", ".join(f"{k} {v:g}" for k, v in peaks.items()) + f" GiB (conservative; limit {limit:g} GiB"
        + (f", WAVE_MEMORY_GIB)" if not plan_only and os.environ.get("WAVE_MEMORY_GIB") else ", WAVE_MEMORY_GIB to change)"),
        *([f"  over the limit: {', '.join(over)}; the steps refuse until WAVE_MEMORY_GIB is set to the machine's GiB"]
          if over else []),
        f"  EAGLE-3 default layers {out['eagle3_default_layers']}",
        *(handoff_text(out["handoff"]) if "handoff" in out else []),
        f"  ({out['assumptions']})"])
