"""Drafters trained on thousands of distinct prompts (``wave bench --only data_scale``).

The design is pre-registered in ``book/data_scale_preregistration.md`` (:data:`PRE_REGISTRATION`):

* **prompts**: nested prefixes of one ordered list, the profile's train prompts (the recipe
  screen's data, 1x) then the corpus (:mod:`activation_wave.models.corpus`) in manifest
  order: :data:`MULTIPLES` of the base count;
* **budgets** in training tokens (``DraftConfig.max_tokens``): multiples of the base recipe's
  own, ``epochs x`` the 1x set's tokens (:data:`BUDGETS`);
* **the curve**: the default triple at :data:`CURVE`; its 1x@B1 point is the strength page's
  top-budget default (the screen's base drafters, seeds 0-2, in the ledger);
* **H7**: chapter 6's sets :data:`H7_SETS` at :data:`H7_POINT`, :data:`H7_SEEDS` seeds.

The corpus prompts get greedy llama.cpp responses (``llama-server`` on the model's GGUF,
:data:`ENGINE`); with the base train records first they are captured once, keeping only the
layers the design's drafters read (``capture.layers``); every drafter trains from that one
capture on its first n train records (``DraftConfig.train_records``), reading the shards a
batch at a time. All of them are scored on the outcome on the *profile's* capture (its eval
split, as the strength page scores), so the 1x drafters and the strength page's deltas are
measured on the same records. Drafters land in the ledger as they finish, in
:func:`design`'s order, so an interrupted run resumes and a fresh clone trains nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from activation_wave.core.config import CaptureConfig, DataConfig, DraftConfig, StudyConfig
from activation_wave.study.chapters.drafter_data_scale import MULTIPLES

__all__ = ["PRE_REGISTRATION", "MULTIPLES", "BUDGETS", "CURVE", "H7_POINT", "H7_SETS", "H7_SEEDS", "ENGINE", "Job",
           "corpus_agreement", "corpus_generation", "design", "evaluate", "generate_corpus_responses", "prefix_records", "responses_ready", "run", "status",
           "strongest", "strongest_label", "training_capture"]

#: The commit that registered the design (``book/data_scale_preregistration.md``), before any of its drafters trained.
PRE_REGISTRATION = {"commit": "58c959292e535dfc6b5af1d58a8fcfee69f0c7f9",
                    "page": "book/data_scale_preregistration.md"}
BUDGETS = {"B1": 1, "B2": 2, "B4": 4}
#: The default triple's points besides 1x@B1 (the strength page's drafters), in training order.
CURVE = (("4x", "B1"), ("16x", "B1"), ("16x", "B2"), ("16x", "B4"))
H7_POINT = ("16x", "B2")
H7_SETS = ("eagle3-default", "random-0", "combined", "last-k")
H7_SEEDS = 2
#: How the corpus prompts' responses are generated: one request at a time (no cross-request
#: batching, so a response does not depend on what else was in flight), 32 per cached batch;
#: threads are ``data.engine_threads`` (not in the responses' key: 1 is the faster on a busy
#: 2-core machine, where two threads wait on each other)
ENGINE = {"data.engine": "llamacpp", "data.engine_slots": 1, "data.batch_size": 32}


@dataclass(frozen=True)
class Job:
    """One drafter of the design."""

    set: str
    layers: tuple[int, ...]
    multiple: str
    budget: str
    config: DraftConfig

    @property
    def point(self) -> str:
        return f"{self.multiple}@{self.budget}"


def design(base: DraftConfig, n_base: int, n_corpus: int, base_tokens: int,
           layers: Mapping[str, Sequence[int]]) -> list[Job]:
    """The design's drafters in the pre-registered training order (H7's first seeds, the
    cheap curve points, the second seeds, then the largest budget).

    ``base``: the screen's base recipe (its ``epochs`` define B1 with ``base_tokens``, the 1x
    set's tokens per epoch); ``n_base`` / ``n_corpus``: base train prompts and corpus prompts;
    ``layers``: chapter 6's sets by name. A multiple the data cannot fill raises ``ValueError``.
    """
    missing = [s for s in H7_SETS if s not in layers]
    if missing:
        raise ValueError(f"data_scale needs the drafters page's sets {missing} (06_predictors has {sorted(layers)}); "
                         "run the drafters page first (wave study --only 06_eagle3_speedup)")

    def job(name: str, multiple: str, budget: str, seed: int) -> Job:
        n = MULTIPLES[multiple] * n_base
        if n > n_base + n_corpus:
            raise ValueError(f"{multiple} needs {n} train prompts, the data has {n_base + n_corpus}; "
                             "rebuild the corpus with more prompts (scripts/build_corpus.py --n)")
        cfg = dataclasses.replace(base, seed=base.seed + seed, train_records=n,
                                  max_tokens=BUDGETS[budget] * base.epochs * base_tokens, eval_every=0)
        return Job(name, tuple(layers[name]), multiple, budget, cfg)

    ref = H7_SETS[0]
    first = [job(s, *H7_POINT, 0) for s in H7_SETS]
    cheap = [job(ref, m, b, 0) for m, b in CURVE if (m, b) != H7_POINT and BUDGETS[b] == 1]
    second = [job(s, *H7_POINT, k) for k in range(1, H7_SEEDS) for s in H7_SETS]
    largest = [job(ref, m, b, 0) for m, b in CURVE if (m, b) != H7_POINT and BUDGETS[b] > 1]
    return first + cheap + second + largest


def prefix_records(base: Sequence[Any], corpus: Sequence[Any]) -> list[Any]:
    """The training capture's records: the base train records, then the corpus's, in order
    (so the first ``k x len(base)`` are the ``k x`` prefix)."""
    if any(r.split != "train" for r in [*base, *corpus]):
        raise ValueError("the data-scale capture holds train-split records only (the eval split is scored on the "
                         "profile's capture)")
    return [*base, *corpus]


def _tokens(records: Sequence[Any], max_length: int) -> int:
    """Tokens a capture of ``records`` holds (each truncated to ``max_length``, as captured)."""
    return sum(min(len(r.prompt_ids) + len(r.response_ids), max_length) for r in records)


@dataclass(frozen=True)
class _Unopened:
    """A capture folder by its key alone: enough to find drafters in the ledger without capturing."""

    path: Any


def run(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """``wave bench --only data_scale``: generate, capture, train (or read from the ledger),
    score; saves the results document as ``data_scale`` and returns the benchmark entry."""
    from activation_wave.study.chapters import drafter_data_scale as analysis  # the results document's analysis
    from activation_wave.study.steps import save_results

    doc = evaluate(cfg, train=True, progress=progress)
    assert doc is not None
    save_results(analysis.NAME, doc, cfg)
    return analysis.bench_entry(doc)


def evaluate(cfg: StudyConfig, *, train: bool, progress: bool = True) -> dict[str, Any] | None:
    """The results document of the design. ``train=False`` (the book page): only what the
    committed responses and the drafter ledger hold, re-scored; None when a corpus response
    or a drafter is missing (the design has not run to the end)."""
    from activation_wave.benchmarks import recipe
    from activation_wave.draft.experiment import ScoreOnTrain, is_trained, run_jobs
    from activation_wave.models.capture import capture
    from activation_wave.models.prompts import generate_responses
    from activation_wave.core.results import cache_key, load_optional
    from activation_wave.study.chapters import drafter_data_scale as analysis
    from activation_wave.study.chapters.drafter_predictors import FoundDrafter, per_prompt_tau
    from activation_wave.study.steps import load_results, response_generator

    t0 = time.time()
    b = cfg.bench
    base = recipe.base_recipe(cfg)
    pred = load_results("06_predictors", cfg)
    layers = {x["set"]: tuple(x["layers"]) for x in pred["sets"]}
    # the profile's capture: the base train records and the eval split every drafter is scored on
    prof = profile_capture(cfg, progress=progress)
    base_train = [r for r in prof.responses if r.split == "train"]
    base_tokens = _tokens(base_train, prof.cfg.capture.max_length)
    # the corpus's responses (committed; generated by llama.cpp when missing)
    gen_cfg, prompts = corpus_generation(cfg, len(base_train))
    if not train and not responses_ready(prof.target, prompts, gen_cfg.data):
        return None
    t_gen = time.time()
    with response_generator(gen_cfg, prof.target) as gen:
        corpus, rpath = generate_responses(prof.target, prompts, gen_cfg.data, progress=progress, generator=gen)
    gen_s = time.time() - t_gen
    jobs, cap_cfg, records, cache = _plan(base.draft, prof, base_train, base_tokens, corpus, layers)
    capture_s = None
    if not all(is_trained(cache, j.layers, j.config) for j in jobs):
        if not train:
            return None
        t_cap, fresh = time.time(), not cache.path.exists()  # a capture resumed or reopened is not timed whole
        cache = capture(prof.target, records, cap_cfg, progress=progress)
        capture_s = time.time() - t_cap if fresh else None
    score = ScoreOnTrain(str(prof.cache.path), b.depth, b.draft_threshold, b.threads)
    rows = run_jobs(prof.target, cache, [(j.set, j.layers, j.config) for j in jobs], cfg.draft.workers,
                    progress=progress, score=score)
    # 1x@B1: the strength page's top-budget default drafters (the screen's base, in the ledger)
    one_x = [dataclasses.replace(base.draft, seed=base.draft.seed + k) for k in range(cfg.strength.seeds)]
    ref_rows = run_jobs(prof.target, prof.cache, [(H7_SETS[0], layers[H7_SETS[0]], c) for c in one_x],
                        cfg.draft.workers, progress=progress, score=score)
    seen = {int(r["train_log"]["n_tokens"]) for r in ref_rows}
    if seen and seen != {base_tokens}:  # B1 is defined by the 1x drafters' own tokens per epoch
        raise ValueError(f"the 1x drafters trained on {sorted(seen)} tokens per epoch, the design counts "
                         f"{base_tokens}: the profile's capture changed (capture.max_length?) since they trained")
    found = ([FoundDrafter(f"{j.set}@{j.point}", j.layers, j.config.seed, r["path"]) for j, r in zip(jobs, rows)]
             + [FoundDrafter(f"{H7_SETS[0]}@1x@B1", layers[H7_SETS[0]], r["seed"], r["path"]) for r in ref_rows])
    ids, taus, _ = per_prompt_tau(prof.target, prof.cache, found, depth=b.depth, threshold=b.draft_threshold,
                                  workers=cfg.draft.workers, threads=b.threads, ledger=cfg.draft.ledger,
                                  progress=progress)
    logs = {f.set: [] for f in found}
    for f, r in zip(found, [*rows, *ref_rows]):
        logs[f.set].append(r["train_log"])
    strength = load_optional("06_strength", cfg)
    doc = analysis.analyse(ids, taus, logs, layers, strength=strength, n_base=len(base_train),
                           n_corpus=len(corpus), base_tokens=base_tokens)
    for f, r in zip(found, [*rows, *ref_rows]):  # each seed's drafter by its key (seeds in per_seed's order)
        doc["drafters"][f.set].setdefault("keys", []).append(cache_key(r["path"]))
    doc.update({"pre_registration": PRE_REGISTRATION, "responses_file": rpath.name,
                "capture": {"key": cache.path.name, "layers": list(cap_cfg.layers), "records": len(records),
                            "tokens": _tokens(records, cap_cfg.max_length),
                            "seconds_this_run": capture_s},
                "generation_s_this_run": round(gen_s, 1), "seconds": round(time.time() - t0, 1)})
    return doc


def strongest_label(doc: Mapping[str, Any]) -> tuple[str, int, float]:
    """The default triple's single strongest drafter in a results document: (label, seed index,
    its outcome tau = mean over the eval prompts it scored), by the pre-registered outcome."""
    from activation_wave.study.chapters import drafter_data_scale as analysis

    rows = [(lab, k, sum(v for v in seed if v is not None) / max(1, sum(v is not None for v in seed)))
            for lab, d in doc["drafters"].items() if analysis.split_label(lab)[0] == H7_SETS[0]
            for k, seed in enumerate(d["per_seed"])]
    if not rows:
        raise ValueError("the data-scale results hold no default-triple drafter; run wave bench --only data_scale")
    return max(rows, key=lambda r: r[2])


def strongest(cfg: StudyConfig, *, progress: bool = True) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The weight folder, train log and choice (label, seed, tau, key) of the design's strongest
    default-triple drafter (:func:`strongest_label` of the committed ``data_scale`` results),
    found by the ledger key the results record, so the decoding benchmark's own ``draft.*`` and
    ``bench.train_threads`` settings cannot change which drafter it is. Weights missing here are
    trained again from the drafter's ledger entry on its capture (made or resumed first when it
    is not whole, about an hour for the 16x capture; opened when it is)."""
    import json

    from activation_wave.core.results import cache_path
    from activation_wave.draft.experiment import ensure_weights
    from activation_wave.models.capture import capture
    from activation_wave.study.chapters import drafter_data_scale as analysis
    from activation_wave.study.steps import load_results

    try:
        doc = load_results(analysis.NAME, cfg)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"bench.drafter=data_scale needs the data-scale results ({e}); run "
                                "wave bench --only data_scale first, or use bench.drafter=recipe") from e
    lab, k, tau = strongest_label(doc)
    keys = doc["drafters"][lab].get("keys")
    if not keys:
        raise ValueError("the data-scale results do not record their drafters' keys (written before they did): "
                         "re-execute the page (wave study --only 06b) to rewrite them")
    path = cache_path(keys[k])
    if not (path / "train_log.json").exists():
        prof = profile_capture(cfg, progress=progress)
        if analysis.split_label(lab)[1] != "1x":  # the training capture: made, resumed, or opened when whole
            base_train = [r for r in prof.responses if r.split == "train"]
            gen_cfg, prompts = corpus_generation(cfg, len(base_train))
            done = _done_responses(prof.target, prompts, gen_cfg.data)
            layers = {x["set"]: tuple(x["layers"]) for x in load_results("06_predictors", cfg)["sets"]}
            cap_cfg, records, _ = training_capture(prof.target, prof.cfg, base_train, [done[p.id] for p in prompts],
                                                   {i for n in H7_SETS for i in layers[n]})
            capture(prof.target, records, cap_cfg, progress=progress)
        ensure_weights(prof.target, [path], cfg.draft.ledger, progress=progress)
    log = json.loads((path / "train_log.json").read_text())
    return str(path), log, {"label": lab, "seed_index": k, "seed": (log.get("config") or {}).get("seed"), "tau": tau,
                            "key": keys[k]}


def status(cfg: StudyConfig) -> dict[str, Any]:
    """How far the design has run, without scoring anything (what the page says before it has
    run to the end): corpus responses generated, and which drafters of :func:`design` are in
    the ledger (labels ``<set>@<multiple>@<budget>#s<seed>``); ``drafters`` is None until
    every response exists (the capture's key needs them all)."""
    from activation_wave.benchmarks import recipe
    from activation_wave.draft.experiment import is_trained
    from activation_wave.study.steps import load_results

    prof = profile_capture(cfg, progress=False)
    base_train = [r for r in prof.responses if r.split == "train"]
    gen_cfg, prompts = corpus_generation(cfg, len(base_train))
    done = _done_responses(prof.target, prompts, gen_cfg.data)
    out: dict[str, Any] = {"profile": cfg.profile, "responses": sum(p.id in done for p in prompts),
                           "responses_needed": len(prompts),
                           "drafters": None, "trained": []}
    if out["responses"] < len(prompts):
        return out
    layers = {x["set"]: tuple(x["layers"]) for x in load_results("06_predictors", cfg)["sets"]}
    jobs, _, _, cache = _plan(recipe.base_recipe(cfg).draft, prof, base_train,
                              _tokens(base_train, prof.cfg.capture.max_length), [done[p.id] for p in prompts], layers)
    out["drafters"] = len(jobs)
    out["trained"] = [f"{j.set}@{j.point}#s{j.config.seed}" for j in jobs if is_trained(cache, j.layers, j.config)]
    return out


def profile_capture(cfg: StudyConfig, *, progress: bool = True) -> Any:
    """The profile's capture on the recipe screen's data (the base train records and the eval
    split every drafter of the design is scored on), as the strength page opens it."""
    from activation_wave.benchmarks import recipe
    from activation_wave.benchmarks.speedup import _overrides, bench_config
    from activation_wave.study.steps import run_capture

    return run_capture(bench_config(cfg.profile, recipe.base_recipe(cfg).samples_per_prompt, _overrides(cfg)),
                       progress=progress)


def corpus_generation(cfg: StudyConfig, n_base: int) -> tuple[StudyConfig, list[Any]]:
    """The config that generates the corpus's responses (:data:`ENGINE`, the profile's
    ``data.max_new_tokens`` and ``data.engine_threads``) and the corpus prompts the largest
    data size reads, ``(max multiple - 1) x n_base`` of them (an error when the corpus is smaller)."""
    from activation_wave.models.prompts import corpus_prompts

    gen_cfg = dataclasses.replace(cfg, data=DataConfig(**{**dataclasses.asdict(cfg.data), "sources": ("corpus",),
                                                         "samples_per_prompt": 0, "max_prompts_per_source": 0,
                                                         **{k.split(".")[1]: v for k, v in ENGINE.items()}}))
    need = (max(MULTIPLES.values()) - 1) * n_base
    prompts = corpus_prompts()
    if len(prompts) < need:
        raise ValueError(f"the largest data size needs {need} corpus prompts, the corpus has {len(prompts)}; "
                         f"rebuild it with more (scripts/build_corpus.py --n {need})")
    return gen_cfg, prompts[:need]


def generate_corpus_responses(cfg: StudyConfig, *, progress: bool = True) -> Any:
    """Only the design's first step: the corpus's responses, generated (resumably) where missing;
    their file. What ``scripts/generate_corpus_responses.py`` runs."""
    from activation_wave.models.prompts import generate_responses
    from activation_wave.study.steps import response_generator

    prof = profile_capture(cfg, progress=progress)
    gen_cfg, prompts = corpus_generation(cfg, sum(r.split == "train" for r in prof.responses))
    with response_generator(gen_cfg, prof.target) as gen:
        _, path = generate_responses(prof.target, prompts, gen_cfg.data, progress=progress, generator=gen)
    return path


def corpus_agreement(cfg: StudyConfig, n: int = 32, *, progress: bool = True) -> dict[str, Any]:
    """Greedy agreement of the committed llama.cpp corpus responses with the PyTorch target's own,
    on the first ``n`` corpus prompts llama.cpp has answered (the PyTorch ones generated here, in
    batches of ``data.batch_size``); saved as ``corpus_agreement`` in the results folder."""
    from activation_wave.engines.llamacpp_generate import divergence_logits, greedy_agreement
    from activation_wave.models.prompts import generate_responses
    from activation_wave.study.steps import save_results

    prof = profile_capture(cfg, progress=progress)
    gen_cfg, prompts = corpus_generation(cfg, sum(r.split == "train" for r in prof.responses))
    done = _done_responses(prof.target, prompts, gen_cfg.data)
    chosen = [p for p in prompts if p.id in done][:n]
    if len(chosen) < n:
        raise ValueError(f"only {len(chosen)} corpus prompts have llama.cpp responses, {n} asked for; "
                         "generate more first (scripts/generate_corpus_responses.py)")
    ref, _ = generate_responses(prof.target, chosen, dataclasses.replace(cfg.data, engine="pytorch",
                                                                         sources=("corpus",)), progress=progress)
    cand = {p.id: done[p.id] for p in chosen}
    agreement = greedy_agreement(ref, cand)
    rows = divergence_logits(prof.target, {r.id: r for r in ref}, cand, agreement)
    gaps = sorted(r["gap"] for r in rows)
    doc = {"what": "greedy agreement of llama.cpp (the data-scale corpus responses) with the PyTorch target on "
                   f"the first {n} corpus prompts llama.cpp answered (shortest prompts first)",
           "engine": done[chosen[0].id].engine, "reference_engine": ref[0].engine, **agreement.to_json(),
           "divergence": {"how": "PyTorch fp32 target, batch 1, at each prompt's first differing position: the "
                                 "logit of its own token minus llama.cpp's (engines/llamacpp_generate.divergence_logits)",
                          "n": len(rows), "gap_median": gaps[len(gaps) // 2] if gaps else None,
                          "gap_max": gaps[-1] if gaps else None,
                          "gap_below": {str(t): sum(g < t for g in gaps) for t in (0.1, 0.25, 0.5, 1.0)},
                          "llamacpp_token_is_pytorch_second": sum(r["candidate_is_second"] for r in rows),
                          "rows": rows}}
    save_results("corpus_agreement", doc, cfg)
    return doc


def responses_ready(target: Any, prompts: Sequence[Any], data: DataConfig) -> bool:
    """Whether every response of ``prompts`` under ``data`` is committed or cached (nothing to generate)."""
    done = _done_responses(target, prompts, data)
    return all(p.id in done for p in prompts)


def _done_responses(target: Any, prompts: Sequence[Any], data: DataConfig) -> dict[str, Any]:
    """The responses of ``prompts`` under ``data`` generated so far (committed or cached), by prompt id."""
    from activation_wave.models.prompts import _response_cache, read_responses, responses_key

    return read_responses(_response_cache(f"{target.slug}-{responses_key(target, prompts, data)}.jsonl", False))


def _plan(base: DraftConfig, prof: Any, base_train: Sequence[Any], base_tokens: int, corpus: Sequence[Any],
          layers: Mapping[str, Sequence[int]]) -> tuple[list[Job], CaptureConfig, list[Any], Any]:
    """The design's drafters (:func:`design`) on the profile capture ``prof``'s train records and
    the corpus records, the training capture's config (only the layers they read), its records,
    and its folder by key (unopened, found without capturing)."""
    jobs = design(base, len(base_train), len(corpus), base_tokens, layers)
    return (jobs, *training_capture(prof.target, prof.cfg, base_train, corpus, {i for j in jobs for i in j.layers}))


def training_capture(target: Any, cfg: StudyConfig, base_train: Sequence[Any], corpus: Sequence[Any],
                     layers: Sequence[int]) -> tuple[CaptureConfig, list[Any], Any]:
    """A capture of the base train records then the corpus's, keeping only ``layers``: its config,
    its records, and its folder by key (unopened, found without capturing)."""
    from activation_wave.models.capture import cache_dir_for

    cap_cfg = capture_config(cfg, layers)
    records = prefix_records(base_train, corpus)
    return cap_cfg, records, _Unopened(cache_dir_for(target, records, cap_cfg))


def capture_config(cfg: StudyConfig, layers: Sequence[int]) -> CaptureConfig:
    """The training capture's config: the profile's, with only ``layers`` kept."""
    return dataclasses.replace(cfg.capture, layers=tuple(sorted(set(map(int, layers)))))
