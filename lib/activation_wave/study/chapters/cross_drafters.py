"""EAGLE-3 drafters on another architecture: the second (``cfg.cross.model``, its page
``07_gemma``) and, through chapter 11's ``third_drafter_config``, the third.

Pre-registered for the second model (the lab record's ``sec-cross-prereg``,
``book/lab/cross_model.md``): on the second model's own greedy
responses to the study's prompts (:func:`drafter_config`), one drafter per block output
and the EAGLE-3 default and the best rule's triple with ``cross.drafter_seeds`` seeds
(:func:`design`), trained with the study's ``draft`` recipe and scored like chapter 6
(offline tau per eval prompt at ``spec.depth`` and ``spec.draft_threshold``). The tests:

* G1, chapter 6's H1 on this model: the rule's set against the default, paired per prompt;
* G2: rho(layer index, tau) over the single layers;
* G3: rho(Renyi-2 entropy of the layer, tau) over the single layers.

:func:`run` captures (cached) and trains (cached per drafter); :func:`analyse` does the
rest on finished drafters. Both return a :class:`CrossDrafterResult`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.models.capture import CaptureCache
from activation_wave.core.config import DraftConfig, StudyConfig
from activation_wave.select.across_models import cross_config
from activation_wave.draft.experiment import run_jobs
from activation_wave.measure.layer_stats import stats_from_cache
from activation_wave.core.stats import mean_ci, seed_mean, spearman, spearman_ci
from activation_wave.study.chapters import drafter_predictors as dp
from activation_wave.draft.experiment import DrafterJob
from activation_wave.plots._style import model_label, set_label
from activation_wave.study.hypotheses import Hypothesis
from activation_wave.core.stats import within_noise
from activation_wave.study.chapters.eagle3_speedup import DEFAULT_SET, LayerProfile, layer_profile

NAME = "07_cross_drafters"

__all__ = ["SingleLayerTau", "CrossDrafterResult", "drafter_config", "design", "analyse", "run", "run_drafters",
           "load_or_run", "evaluate_hypotheses", "peak_relative_depth", "sweep_frame", "triples_frame", "page_values", "NAME"]


@dataclass(frozen=True)
class SingleLayerTau:
    """A set's drafters on the eval prompts: mean over prompts of the seed-averaged
    per-prompt tau (the pre-registered outcome) with its bootstrap interval over prompts."""

    set: str
    layers: tuple[int, ...]
    n_seeds: int
    tau: float
    lo: float
    hi: float
    per_prompt: tuple[float | None, ...]


@dataclass(frozen=True)
class CrossDrafterResult:
    """Chapter 7's drafters on the second model: every set's tau, G1's paired comparison,
    G2/G3's correlations over the single layers, and the layer profile of the statistics."""

    model: str
    n_layers: int
    rule: str  # chapter 6's best rule, whose set on this model is compared with the default
    prompt_ids: tuple[str, ...]
    sets: tuple[SingleLayerTau, ...]  # the triples first, then the single layers by index
    comparison: dp.Comparison | None  # rule set - default (None without both drafters or 2 shared prompts)
    depth: dp.Predictor | None  # rho(layer index, tau) over the single layers (G2)
    entropy: dp.Predictor | None  # rho(Renyi-2 entropy of the layer, tau) over the single layers (G3)
    entropy_vs_depth: float | None  # Spearman rho between the two predictors over the same layers
    profile: LayerProfile
    training_records: int
    training_positions: int
    train_s: float  # summed training seconds of the drafters (trained in this or an earlier run)
    n_drafters: int
    n_responses: int = 0  # greedy responses the capture holds (set by :func:`run`)
    responses_at_limit: int = 0  # of them, those cut at the token limit instead of ending

    def singles(self) -> list[SingleLayerTau]:
        """The single-layer drafters, by layer index."""
        return sorted((s for s in self.sets if len(s.layers) == 1), key=lambda s: s.layers[0])

    def set_tau(self, name: str) -> SingleLayerTau:
        """One set's tau by name."""
        return next(s for s in self.sets if s.set == name)


def drafter_config(cfg: StudyConfig) -> StudyConfig:
    """The config of the second model's drafters: ``cfg.cross.model`` (capture settings of
    :func:`~activation_wave.select.across_models.cross_config`) on the study's prompt sources, the
    ``cross.drafter_*`` prompt count and length, greedy responses only."""
    c = cross_config(cfg)
    data = dataclasses.replace(cfg.data, max_prompts_per_source=cfg.cross.drafter_prompts_per_source,
                               max_new_tokens=cfg.cross.drafter_max_new_tokens, samples_per_prompt=0)
    return dataclasses.replace(c, data=data, draft=dataclasses.replace(cfg.draft, samples_per_prompt=0))


def design(sets: Mapping[str, Sequence[int]], rule: str, n_layers: int, draft: DraftConfig, *, seeds: int,
           sweep_stride: int) -> list[DrafterJob]:
    """The pre-registered drafters: the default and ``rule``'s set (``sets``: the second
    model's chapter-7 selections) with ``seeds`` seeds, then one drafter per block output
    ``1, 1 + sweep_stride, ...`` up to N (one seed, all the data; none when the stride is 0)."""
    for name in (DEFAULT_SET, rule):
        if name not in sets:
            raise ValueError(f"no {name!r} set among the second model's selections {sorted(sets)}; "
                             "run the second architecture's page (07_gemma) first: its selection part")
    jobs = [DrafterJob(name, tuple(int(i) for i in sets[name]), "triples",
                       dataclasses.replace(draft, seed=draft.seed + s))
            for name in dict.fromkeys([DEFAULT_SET, rule]) for s in range(seeds)]
    if sweep_stride:
        jobs += [DrafterJob(f"single-{i}", (i,), "sweep", draft) for i in range(1, n_layers + 1, sweep_stride)]
    return jobs


def _set_taus(taus: Mapping[str, np.ndarray], jobs: Sequence[DrafterJob]) -> list[SingleLayerTau]:
    layers = {j.set: j.layers for j in jobs}
    out = []
    for name, t in taus.items():
        y = tuple(None if not np.isfinite(v) else float(v) for v in seed_mean(t))
        out.append(SingleLayerTau(name, layers[name], int(t.shape[0]), *mean_ci(y), y))
    return out


def _paired(a: np.ndarray, b: np.ndarray) -> int:
    """Prompts both sets scored (finite seed-averaged tau on both sides)."""
    return int((np.isfinite(seed_mean(a)) & np.isfinite(seed_mean(b))).sum())


def analyse(cfg: StudyConfig, target: Any, cache: CaptureCache, jobs: Sequence[DrafterJob], rule: str, *,
            n_boot: int = 10_000, seed: int = 0, progress: bool = False) -> CrossDrafterResult:
    """Train (or load) ``jobs`` on ``cache`` and compute the pre-registered figures.

    ``cfg`` is :func:`drafter_config`'s (its ``spec`` sets the outcome's depth and draft
    threshold, its ``metrics`` the statistics that give each layer its entropy).
    """
    rows = run_jobs(target, cache, [(j.set, j.layers, j.config) for j in jobs], cfg.draft.workers, progress=progress)
    found = [dp.FoundDrafter(r["set"], tuple(r["layers"]), r["seed"], r["path"]) for r in rows]
    prompt_ids, taus, _ = dp.per_prompt_tau(target, cache, found, depth=cfg.spec.depth,
                                            threshold=cfg.spec.draft_threshold, workers=cfg.draft.workers,
                                            threads=cfg.draft.threads, ledger=cfg.draft.ledger)
    sets = _set_taus(taus, jobs)
    comparison = None
    if DEFAULT_SET in taus and rule in taus and rule != DEFAULT_SET and _paired(taus[rule], taus[DEFAULT_SET]) >= 2:
        # one comparison: Holm over a single test leaves p and the MDE as they are
        (comparison,) = dp.compare_to_reference({s: taus[s] for s in (DEFAULT_SET, rule)},
                                                {j.set: j.layers for j in jobs}, DEFAULT_SET, n_boot=n_boot,
                                                seed=seed)
    cs = stats_from_cache(cache, cfg)
    st = cs.stats
    singles = sorted((s for s in sets if len(s.layers) == 1), key=lambda s: s.layers[0])
    depth = entropy = None
    rho_ed = None
    if len(singles) >= 3:
        ids = [s.layers[0] for s in singles]
        y = np.stack([seed_mean(taus[s.set]) for s in singles])
        ent = np.array([st.entropy2[st.pos([i])[0]] for i in ids], float)
        c = spearman_ci(np.array(ids, float), y, n_boot=n_boot, seed=seed)
        depth = dp.Predictor("layer index", "single layers", c.rho, c.lo, c.hi, c.n)
        c = spearman_ci(ent, y, n_boot=n_boot, seed=seed)
        entropy = dp.Predictor("Renyi-2 entropy", "single layers", c.rho, c.lo, c.hi, c.n)
        rho_ed = spearman(ent, np.array(ids, float))
    train_recs = [r for r in cache.records if r["split"] == "train"]
    return CrossDrafterResult(
        model=cfg.model, n_layers=cache.n_layers, rule=rule, prompt_ids=tuple(prompt_ids),
        sets=tuple([s for s in sets if len(s.layers) > 1] + singles), comparison=comparison, depth=depth,
        entropy=entropy, entropy_vs_depth=rho_ed, profile=layer_profile(cs), training_records=len(train_recs),
        training_positions=int(sum(r["length"] - r["prompt_len"] for r in train_recs)),
        train_s=float(sum(r["train_s"] or 0.0 for r in rows)), n_drafters=len(rows))


def run(cfg: StudyConfig, sets: Mapping[str, Sequence[int]], rule: str, *, n_boot: int = 10_000,
        progress: bool = False) -> CrossDrafterResult:
    """Chapter 7's drafters end to end: the second model's responses and capture (cached;
    the default profile's responses are committed), :func:`design`, :func:`analyse`."""
    return run_drafters(drafter_config(cfg), sets, rule, seeds=cfg.cross.drafter_seeds,
                        sweep_stride=cfg.cross.drafter_sweep_stride, n_boot=n_boot, progress=progress)


def load_or_run(cfg: StudyConfig, sets: Mapping[str, Sequence[int]], rule: str, root: Any = None, *,
                n_boot: int = 10_000) -> CrossDrafterResult:
    """The second model's drafters for its page: the results file when it holds this design
    (the same model, rule, rule's set and number of drafters), so a clone reads the committed
    scores instead of capturing the model's responses again (over an hour on two cores); else
    :func:`run`, whose result is saved."""
    from activation_wave.core.results import load_result, save_result

    try:
        res = load_result(NAME, cfg, root, cls=CrossDrafterResult)
    except FileNotFoundError:
        res = None
    if res is not None and res.model == cfg.cross.model and res.rule == rule and rule in sets:
        stride = cfg.cross.drafter_sweep_stride
        expected = (2 if rule != DEFAULT_SET else 1) * cfg.cross.drafter_seeds + (
            len(range(1, res.n_layers + 1, stride)) if stride else 0)
        if res.n_drafters == expected and any(x.set == rule and list(x.layers) == [int(i) for i in sets[rule]]
                                              for x in res.sets):
            return res
    res = run(cfg, sets, rule, n_boot=n_boot)
    save_result(NAME, res, cfg, root)
    return res


def run_drafters(dcfg: StudyConfig, sets: Mapping[str, Sequence[int]], rule: str, *, seeds: int, sweep_stride: int,
                 n_boot: int = 10_000, progress: bool = False) -> CrossDrafterResult:
    """Another model's drafters under ``dcfg`` (its drafter config: chapter 7's
    :func:`drafter_config`, chapter 11's ``third_drafter_config``): responses and capture
    (cached), :func:`design` with ``seeds`` and ``sweep_stride``, :func:`analyse`."""
    from activation_wave.study.steps import run_capture

    cap = run_capture(dcfg, progress=progress)
    print(cap.cache.summary())
    jobs = design(sets, rule, cap.cache.n_layers, dcfg.draft, seeds=seeds, sweep_stride=sweep_stride)
    res = analyse(dcfg, cap.target, cap.cache, jobs, rule, n_boot=n_boot, progress=progress)
    return dataclasses.replace(res, n_responses=len(cap.responses),
                               responses_at_limit=sum(r.finish == "length" for r in cap.responses))


def evaluate_hypotheses(res: CrossDrafterResult, alpha: float = 0.05) -> list[Hypothesis]:
    """G1-G3 of chapter 7's pre-registration by their verdict rules (None: not testable here,
    e.g. fewer than ``MIN_PAIRED_PROMPTS`` eval prompts for G1, or the default's or the rule's
    drafter accepting nothing, tau 1 on every prompt: :func:`~.drafter_predictors.dead_instrument`)."""
    c = res.comparison
    if c is None:
        g1 = Hypothesis("G1", "the best rule's set beats the default", "no rule or default drafter", None, "")
    else:
        ok = (c.delta > 0 and c.p < alpha) if c.n >= dp.MIN_PAIRED_PROMPTS else None
        dead = [s.set for s in res.sets if s.set in (DEFAULT_SET, c.set) and dp.dead_instrument(s.per_prompt)]
        if dead:  # a drafter that accepts nothing measures nothing: no verdict rests on it
            ok = None
        g1 = Hypothesis("G1", "the best rule's set beats the default",
                        f"{c.set} {list(c.layers)}: delta tau = {c.delta:+.3f} [{c.lo:+.3f}, {c.hi:+.3f}], "
                        f"p = {c.p:.3g}, n = {c.n} prompts, MDE = {c.mde:.3f}{within_noise(c.lo, c.hi)}", ok,
                        "paired per prompt, one test" + (f"; not testable: {', '.join(dead)} accepts no draft on any "
                                                         "prompt (tau 1)" if dead else ""), (c.lo, c.hi),
                        value=c.delta, p=c.p, n=c.n, mde=c.mde, compared=c.set,
                        base=next((s.tau for s in res.sets if s.set == DEFAULT_SET), None))

    def rho(name: str, claim: str, p: dp.Predictor | None) -> Hypothesis:
        if p is None or p.lo is None or not np.isfinite(p.lo):
            return Hypothesis(name, claim, "fewer than 3 single layers", None, "")
        return Hypothesis(name, claim, f"rho = {p.rho:+.2f} [{p.lo:+.2f}, {p.hi:+.2f}], n = {p.n} layers"
                          f"{within_noise(p.lo, p.hi)}", bool(p.lo > 0),
                          "Spearman over the single layers, resampling layers and prompts", (p.lo, p.hi),
                          value=p.rho, n=p.n)

    return [g1, rho("G2", "tau of one layer rises with its depth", res.depth),
            rho("G3", "tau of one layer rises with its Renyi-2 entropy", res.entropy)]


def peak_relative_depth(layers: Sequence[int], tau: Sequence[float], n_layers: int) -> float:
    """Relative depth (index / N) of the single layer with the highest tau."""
    return float(layers[int(np.nanargmax(np.asarray(tau, float)))] / n_layers)


def sweep_frame(model: str, n_layers: int, sets: Sequence[Any]) -> pd.DataFrame:
    """One row per single-layer set of ``sets`` (objects with ``set``, ``layers`` and
    ``per_prompt``: this module's :class:`SingleLayerTau` or chapter 6's ``SetTaus``): the
    model, layer, relative depth, mean per-prompt tau and its bootstrap interval over prompts."""
    rows = []
    for s in sets:
        if len(s.layers) != 1:
            continue
        tau, lo, hi = mean_ci(s.per_prompt)
        rows.append({"model": model, "layer": int(s.layers[0]), "relative depth": s.layers[0] / n_layers,
                     "tau": tau, "lo": lo, "hi": hi})
    return pd.DataFrame(rows).sort_values("layer", ignore_index=True)


def triples_frame(res: CrossDrafterResult) -> pd.DataFrame:
    """The model's multi-layer sets (the default and the rule's triple) as the pages show them,
    named in plain words: tau on the pre-registered outcome with its 95% interval over prompts,
    and on how many prompts the drafter accepted at least one draft."""
    return pd.DataFrame([{"model": model_label(res.model), "set": set_label(s.set), "layers": str(list(s.layers)),
                          "seeds": s.n_seeds, "tau": s.tau, "95% interval": f"[{s.lo:.3f}, {s.hi:.3f}]",
                          "prompts with an accepted draft": sum(t is not None and t > 1.0 for t in s.per_prompt)}
                         for s in res.sets if len(s.layers) > 1])


def page_values(res: CrossDrafterResult | None, draft_workers: int, prefix: str = "xd",
                alpha: float = 0.05) -> dict[str, Any]:
    """The values an architecture's page glues about its drafters, as ``<prefix>_*`` (None:
    the profile trained none; every number NaN, every word "not testable").

    Words: ``_delta_word`` in :func:`~.drafter_predictors.comparison_word`'s vocabulary, "not
    testable" when either side's drafter accepts nothing (tau 1 on every prompt) or too few
    prompts pair. The registered tests' words (G1-G3, C2) are the findings record's
    (:mod:`activation_wave.study.findings`), never computed here.
    Counts: prompts on which the default drafter accepted at least one draft
    (``_default_live``), responses cut at the token limit (``_at_limit``, ``_at_limit_pct``),
    single-layer drafters (``_n_singles``)."""
    nan = float("nan")
    p = prefix
    if res is None:
        out: dict[str, Any] = {f"{p}_{k}": nan for k in (
            "tau_default", "tau_rule", "delta", "delta_lo", "delta_hi", "p", "mde", "train_min", "at_limit_pct",
            "rho_depth", "rho_depth_lo", "rho_depth_hi", "rho_entropy", "rho_entropy_lo", "rho_entropy_hi",
            "rho_entropy_depth", "best_tau", "peak_rel", "last_tau")}
        out.update({f"{p}_{k}": 0 for k in ("n_drafters", "records", "positions", "eval_prompts", "n_responses",
                                              "at_limit", "default_live", "n_singles", "rho_depth_n", "rho_entropy_n",
                                              "best_layer")})
        out.update({f"{p}_model": "none", f"{p}_default": "none", f"{p}_rule": "none", f"{p}_rule_set": "none",
                    f"{p}_delta_word": "not testable"})
        return out
    d = res.set_tau(DEFAULT_SET)
    r = next((s for s in res.sets if s.set == res.rule), None)
    singles = res.singles()
    out = {
        f"{p}_model": res.model, f"{p}_n_drafters": res.n_drafters, f"{p}_records": res.training_records,
        f"{p}_positions": res.training_positions, f"{p}_train_min": res.train_s / 60 / max(1, draft_workers),
        f"{p}_eval_prompts": len(res.prompt_ids), f"{p}_n_responses": res.n_responses,
        f"{p}_at_limit": res.responses_at_limit,
        f"{p}_at_limit_pct": 100 * res.responses_at_limit / res.n_responses if res.n_responses else nan,
        f"{p}_tau_default": d.tau, f"{p}_default": str(list(d.layers)),
        f"{p}_default_live": sum(t is not None and t > 1.0 for t in d.per_prompt),
        f"{p}_rule": res.rule, f"{p}_rule_set": str(list(r.layers)) if r else "none",
        f"{p}_tau_rule": r.tau if r else nan, f"{p}_n_singles": len(singles)}
    c = res.comparison
    dead = any(dp.dead_instrument(s.per_prompt) for s in (d, r) if s is not None)
    testable = c is not None and c.n >= dp.MIN_PAIRED_PROMPTS and not dead
    out.update({f"{p}_delta": c.delta if c else nan, f"{p}_delta_lo": c.lo if c else nan,
                f"{p}_delta_hi": c.hi if c else nan, f"{p}_p": c.p if c else nan, f"{p}_mde": c.mde if c else nan,
                f"{p}_delta_word": dp.comparison_word(c.delta, c.p, alpha) if testable else "not testable"})
    for key, q in (("depth", res.depth), ("entropy", res.entropy)):
        out.update({f"{p}_rho_{key}": q.rho if q else nan, f"{p}_rho_{key}_lo": q.lo if q else nan,
                    f"{p}_rho_{key}_hi": q.hi if q else nan, f"{p}_rho_{key}_n": q.n if q else 0})
    out[f"{p}_rho_entropy_depth"] = nan if res.entropy_vs_depth is None else res.entropy_vs_depth
    best = max(singles, key=lambda s: s.tau) if singles else None
    out.update({f"{p}_best_layer": best.layers[0] if best else 0, f"{p}_best_tau": best.tau if best else nan,
                f"{p}_peak_rel": best.layers[0] / res.n_layers if best else nan,
                f"{p}_last_tau": singles[-1].tau if singles and singles[-1].layers[0] == res.n_layers else nan})
    return out
