"""``wave select``: which layers should an EAGLE-3 drafter read? The command's report
(one JSON-ready dict, and its text) built from the selection rules and the study's results.

The recommendation follows the evidence, not the score. The selection rules rank layer
sets by concatenation entropy (S2), but the study's pre-registered drafter test found no
rule's set better than the EAGLE-3 default on the models it trained drafters for, and S2
did not track tau. So:

* for a model the study trained drafters for (its results files: the drafters page's
  ``06_predictors``, or the Gemma page's ``07_cross_drafters`` for the second model), the
  recommendation is the tested set whose paired gain in tau over the default passed its
  test (Holm-adjusted p < :data:`LEVEL`, interval above 0), else the default, with
  those numbers, their intervals and n;
* for any other model it is the default, on the evidence of the studied models (quoted),
  and the rules' sets are listed as candidates to test, not as the answer.

The engine configs follow the recommendation (or, where there is none, e.g. k != 3, the
rule's candidate, labelled as such).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.engines.conventions import export_warnings, exports
from activation_wave.measure.cka import segment_compartments
from activation_wave.measure.layer_stats import LayerStats, stats_from_cache
from activation_wave.core.layers import candidate_layers, eagle3_default_layers, span_of, span_text, text_config
from activation_wave.core.results import REPO_ROOT, ResultsFileError, read_json_object, results_dir, to_jsonable
from activation_wave.select.selection import (
    METHODS,
    check_scan,
    k_bound_message,
    method_sets,
    rank_many,
    rank_sets,
    score_set,
    select_layers,
)

__all__ = ["check_request", "compartments_of", "format_ranking", "format_report", "recommend", "select_for_cli",
           "select_from_stats", "study_evidence"]

#: The profile whose committed results are the study (the book).
STUDY_PROFILE = "default"
#: Level of the paired tests a set must pass to be recommended over the default.
LEVEL = 0.05
#: Fewest eval prompts behind a comparison that counts as evidence (chapter 6's own rule:
#: with fewer the paired bootstrap tests nothing; the smoke profile's runs have 2).
MIN_PROMPTS = 10
#: The results files holding drafter comparisons with the default, by the book page that shows them.
EVIDENCE_FILES = {"06_predictors": "drafters page", "07_cross_drafters": "Gemma page"}
#: The registered test each evidence file decides (its record in the profile's findings.json).
EVIDENCE_TESTS = {"06_predictors": "H1", "07_cross_drafters": "G1"}


def format_ranking(df: pd.DataFrame) -> str:
    """A :func:`~activation_wave.select.selection.rank_sets` table as aligned text, 3 decimals."""
    cols = ["rank", "name", "ids", "renyi2", "renyi2_gain", "mean_cka", "max_cka", "percentile"]
    cols = [c for c in cols if c in df.columns]
    view = df[cols].copy()
    view["ids"] = [str(list(x)) for x in view["ids"]]
    return view.to_string(index=False, float_format=lambda v: f"{v:.3f}")


# ---------------------------------------------------------------------------- checks
def check_request(method: str, k: Any) -> None:
    """What can be checked before a model is loaded: the method's name and k >= 1."""
    if method not in METHODS:
        raise ValueError(f"unknown selection method {method!r} (--method); choose one of {', '.join(METHODS)}")
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k={k!r} (--k): the number of layers to read must be an integer >= 1 (EAGLE-3 reads 3)")


def _check(N: int, method: str, k: int, alpha: float) -> tuple[list[int] | None, str | None]:
    """Every check that needs N, before any statistic is computed: k within the candidates,
    the default's definition, and the time of the scans over every k-subset (memory is flat
    in k, :func:`~activation_wave.select.selection.scan_plan`). Returns the default and why it is None."""
    check_request(method, k)
    pool = candidate_layers(N)
    why = k_bound_message(int(k), pool, label=f"k={k} (--k)")
    if why:
        raise ValueError(why)
    try:
        default: list[int] | None = eagle3_default_layers(N)
        note = None
    except ValueError as exc:
        default, note = None, str(exc)
    if method == "eagle3-default":
        if default is None:
            raise ValueError(f"--method eagle3-default: {note}")
        if k != 3:
            raise ValueError(f"--method eagle3-default is the fixed triple {default}; got k={k}: use --k 3 or another method")
    if default is not None and k != 3:
        default, note = None, f"the EAGLE-3 default {eagle3_default_layers(N)} has 3 layers; k={k}"
    if method == "exhaustive" and alpha != 2:
        passes = 1  # the eigen route refuses by its own subset limit
    else:
        passes = 3 if method == "exhaustive" else 2  # the rules' exhaustive set, the ranks (+ the method's own)
    check_scan(len(pool), int(k), passes=passes, label=f"k={k} (--k)")
    return default, note


# ---------------------------------------------------------------------------- evidence
def _source(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _evidence_docs(cfg: Any, profile: str, root: str | Path | None) -> Iterator[tuple[str, str, Path, dict]]:
    """(model folder name, results name, path, document) of every drafter comparison
    under ``profile``'s results; the model of a ``07_cross_drafters`` file is its ``model`` field."""
    base = results_dir(dataclasses.replace(cfg, profile=profile), root).parent
    if not base.is_dir():
        return
    for name in EVIDENCE_FILES:
        for path in sorted(base.glob(f"*/{name}.json")):
            # a damaged results file is an error naming it, never "no drafters were trained"
            doc = read_json_object(path, _rerun(name, profile, path))
            model = doc.get("model") if name == "07_cross_drafters" else (doc.get("config") or {}).get("model")
            if isinstance(model, str) and model:
                yield results_dir(dataclasses.replace(cfg, profile=profile, model=model), root).name, name, path, doc


def _rerun(name: str, profile: str, path: Path) -> str:
    """The fix for a damaged evidence file: rerun the chapter that writes it, or restore it."""
    return (f"run {EVIDENCE_FILES[name]} again (`wave study --profile {profile} --only {name[:2]}`) or restore the "
            f"file (git checkout -- {_source(path)})")


def _record(model: str, profile: str, name: str, path: Path, c: Mapping[str, Any], reference: str,
            reference_layers: list[int]) -> dict[str, Any]:
    rule = c.get("family") == "rules"
    if name == "06_predictors":
        p, adjust = (c.get("p_holm_rules"), "Holm within the rules") if rule else (c.get("p_holm_all"),
                                                                                    "Holm over all sets")
    else:
        p, adjust = c.get("p"), "one test"
    lo, hi = c.get("lo"), c.get("hi")
    return {"kind": "paired delta tau vs the default", "model": model, "profile": profile,
            "chapter": EVIDENCE_FILES[name], "source": _source(path), "set": c.get("set"),
            "layers": [int(i) for i in c.get("layers", [])], "rule": rule, "reference": reference,
            "reference_layers": reference_layers, "delta": c.get("delta"), "lo": lo, "hi": hi, "p": p,
            "p_adjust": adjust, "n": c.get("n"),
            "within_noise": None if lo is None or hi is None else bool(lo <= 0 <= hi)}


def _predictor(model: str, profile: str, name: str, path: Path, pr: Mapping[str, Any], what: str) -> dict[str, Any]:
    lo, hi = pr.get("lo"), pr.get("hi")
    return {"kind": f"rho({what}, tau)", "model": model, "profile": profile, "chapter": EVIDENCE_FILES[name],
            "source": _source(path), "units": pr.get("units"), "rho": pr.get("rho"), "lo": lo, "hi": hi,
            "n": pr.get("n"), "within_noise": None if lo is None or hi is None else bool(lo <= 0 <= hi)}


def _from_doc(model: str, profile: str, name: str, path: Path, doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """One studied model's evidence from one results file, or None if it holds no test
    (no comparison, or fewer than :data:`MIN_PROMPTS` prompts)."""
    if name == "06_predictors":
        reference = doc.get("reference", "eagle3-default")
        ref = next((s for s in doc.get("sets", []) if s.get("set") == reference), None)
        comps = [c for c in doc.get("comparisons", []) if len(c.get("layers", [])) == 3]
        preds = [_predictor(model, profile, name, path, p, "S2 of the set") for p in doc.get("predictors", [])
                 if p.get("name") == "renyi2" and p.get("units") == "triples"]
    else:
        reference = "eagle3-default"
        ref = next((s for s in doc.get("sets", []) if s.get("set") == reference), None)
        comps = [doc["comparison"]] if doc.get("comparison") else []
        preds = [_predictor(model, profile, name, path, doc["entropy"], "S2 of the layer")] if doc.get("entropy") else []
    if ref is None or not comps or min(int(c.get("n") or 0) for c in comps) < MIN_PROMPTS:
        return None
    if not isinstance(ref.get("layers"), list) or any(not isinstance(c.get("layers"), list) for c in comps):
        raise ResultsFileError(f"{path}: the reference set {reference!r} or a comparison has no 'layers' list; "
                               f"{_rerun(name, profile, path)}")
    ref_layers = [int(i) for i in ref["layers"]]
    return {"model": model, "profile": profile, "chapter": EVIDENCE_FILES[name], "source": _source(path),
            "test": EVIDENCE_TESTS[name], "reference_layers": ref_layers,
            "comparisons": [_record(model, profile, name, path, c, reference, ref_layers) for c in comps],
            "predictors": preds}


def study_evidence(cfg: Any, root: str | Path | None = None) -> dict[str, Any]:
    """The study's drafter evidence: ``own`` (for ``cfg.model``: its run's profile first,
    then :data:`STUDY_PROFILE`; None if the study trained no drafters for it) and ``studied``
    (every model of :data:`STUDY_PROFILE` with a test). ``root`` as :func:`~activation_wave.core.results.results_dir`."""
    me = results_dir(cfg, root).name
    own = None
    for profile in dict.fromkeys((cfg.profile, STUDY_PROFILE)):
        for model, name, path, doc in _evidence_docs(cfg, profile, root):
            if model == me and (found := _from_doc(model, profile, name, path, doc)) is not None:
                own = found
                break
        if own is not None:
            break
    studied = [e for m, name, path, doc in _evidence_docs(cfg, STUDY_PROFILE, root)
               if (e := _from_doc(m, STUDY_PROFILE, name, path, doc)) is not None]
    for e in ([own] if own else []) + studied:  # the registered test's word: its findings record, never ours
        e["record"] = _record_of(cfg, e["profile"], e["test"], root)
    return {"own": own, "studied": studied}


def _record_of(cfg: Any, profile: str, test: str, root: str | Path | None) -> str | None:
    """``"H1 (registered): not supported (lower)"`` from ``profile``'s findings record (the file
    ``findings.json`` beside its models' results, written by the study's findings step), None without one."""
    path = results_dir(dataclasses.replace(cfg, profile=profile), root).parent / "findings.json"
    if not path.is_file():
        return None
    doc = read_json_object(path, f"run `wave findings --profile {profile}` to rebuild it")
    label = next((r.get("label") for r in doc.get("records") or [] if r.get("key") == test), None)
    return f"{test} (registered): {label}" if label else None


def _passed(c: Mapping[str, Any]) -> bool:
    return (c["delta"] is not None and c["delta"] > 0 and c["p"] is not None and c["p"] < LEVEL
            and c["lo"] is not None and c["lo"] > 0)


def _num(v: Any, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def comparison_text(c: Mapping[str, Any]) -> str:
    """``combined [7, 27, 29]: delta tau -0.012 [-0.018, -0.005], Holm p 0.0008, n = 96 prompts``."""
    p = "p" if c["p_adjust"] == "one test" else "Holm p"
    noise = ", within noise" if c.get("within_noise") else ""
    return (f"{c['set']} {c['layers']}: delta tau {_num(c['delta'], '+.3f')} [{_num(c['lo'], '+.3f')}, "
            f"{_num(c['hi'], '+.3f')}], {p} {_num(c['p'], '.2g')}, n = {c['n']} prompts{noise}")


def predictor_text(p: Mapping[str, Any]) -> str:
    noise = ", within noise" if p.get("within_noise") else ""
    return (f"{p['kind']} = {_num(p['rho'], '+.2f')} [{_num(p['lo'], '+.2f')}, {_num(p['hi'], '+.2f')}], "
            f"n = {p['n']} {p['units']}{noise}")


def _shown(e: Mapping[str, Any], method: str) -> list[dict[str, Any]]:
    """The comparisons a sentence quotes: the asked rule's (else the best rule's) and the
    largest delta of any tested set, if that is another."""
    comps = e["comparisons"]
    rules = [c for c in comps if c["rule"]] or comps
    first = next((c for c in rules if c["set"] == method), None) or max(rules, key=lambda c: c["delta"] or -np.inf)
    top = max(comps, key=lambda c: c["delta"] or -np.inf)
    return [first] + ([top] if top is not first else [])


def recommend(evidence: Mapping[str, Any], N: int, k: int, method: str, default: list[int] | None
              ) -> dict[str, Any]:
    """The recommendation from :func:`study_evidence`: ``recommended`` (ids or None),
    ``basis`` (``"study"``: this model's own drafter test; ``"studied models"``: the default,
    on the other models' evidence; ``"none"``), ``reason`` (one sentence with the numbers)
    and ``evidence`` (the comparison and predictor records it rests on)."""
    own = evidence.get("own")
    if own is not None and (N < 4 or own["reference_layers"] != eagle3_default_layers(N)):
        own = None  # same name, other model (another N): not its evidence
    if own is not None:
        records = own["comparisons"] + own["predictors"]
        where = f"{own['model']}'s drafters on the {own['chapter']} ({own['source']}"
        where += f"; {own['record']})" if own.get("record") else ")"
        if k != 3:
            shown = "; ".join(comparison_text(c) for c in _shown(own, method))
            return {"recommended": None, "basis": "none", "evidence": records,
                    "reason": f"the study compared 3-layer sets only; for 3 layers, {where}: {shown}. "
                              f"No {k}-layer set was tested, so these are candidates to test"}
        winners = [c for c in own["comparisons"] if _passed(c)]
        if winners:
            best = max(winners, key=lambda c: c["delta"])
            return {"recommended": best["layers"], "basis": "study", "evidence": records,
                    "reason": f"on {where} this set beat the default: {comparison_text(best)}"}
        shown = "; ".join(comparison_text(c) for c in _shown(own, method))
        preds = "; ".join(predictor_text(p) for p in own["predictors"])
        return {"recommended": own["reference_layers"], "basis": "study", "evidence": records,
                "reason": f"on {where} no tested set beat the EAGLE-3 default {own['reference_layers']}: {shown}"
                          + (f"; the score the rules rank by: {preds}" if preds else "")}
    studied = evidence.get("studied") or []
    records = [r for e in studied for r in e["comparisons"] + e["predictors"]]
    parts = []
    for e in studied:
        best_rule = max([c for c in e["comparisons"] if c["rule"]] or e["comparisons"],
                        key=lambda c: c["delta"] or -np.inf)
        preds = "; ".join(predictor_text(p) for p in e["predictors"])
        parts.append(f"{e['model']} ({e['chapter']}{'; ' + e['record'] if e.get('record') else ''}): best rule "
                     f"{comparison_text(best_rule)}"
                     + (f"; {preds}" if preds else ""))
    said = ("; ".join(parts) if parts else "the study's results files were not found")
    beaten = any(_passed(c) for e in studied for c in e["comparisons"] if c["rule"])
    if default is None:
        return {"recommended": None, "basis": "none", "evidence": records,
                "reason": f"no drafters were trained for this model, and the EAGLE-3 default is not defined for k={k} "
                          f"here; on the studied models: {said}. These sets are candidates to test"}
    return {"recommended": default, "basis": "studied models", "evidence": records,
            "reason": f"no drafters were trained for this model; on the studied models "
                      f"{'a rule beat' if beaten else 'no selection rule beat'} the EAGLE-3 default: {said}. "
                      f"The rules' sets in the ranking are candidates to test against it, not a recommendation"}


# ---------------------------------------------------------------------------- the report
def compartments_of(stats: LayerStats) -> list[tuple[int, int]]:
    """The CKA compartments of ``stats`` as the CKA page draws them: the exact contiguous
    segmentation of the plain linear CKA map, k chosen by the gain-ratio rule among
    ``1..min(L, 12)`` (:func:`~activation_wave.measure.cka.segment_compartments`)."""
    return segment_compartments(stats.cka, ids=stats.ids, k_max=min(len(stats.ids), 12))


def _with_compartments(out: dict[str, Any], spans: Sequence[Sequence[int]]) -> None:
    """Each candidate's, the selected set's and the default's compartment (1-based) per layer."""
    out["compartments"] = [[int(a), int(b)] for a, b in spans]
    for c in out["candidates"]:
        c["compartments"] = span_of(c["ids"], spans)
    out["selected_compartments"] = span_of(out["selected"], spans)
    out["default_compartments"] = span_of(out["default"], spans) if out["default"] is not None else None


def select_from_stats(stats: LayerStats, cfg: Any, N: int, *, model_type: str = "llama",
                      results_root: str | Path | None = None, info: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
    """:func:`select_for_cli` on statistics already computed (``info``: extra keys, e.g.
    the token sample's); checks as :func:`select_for_cli`."""
    sc = cfg.select
    method, k = sc.method, int(sc.k)
    default, note = _check(N, method, k, sc.alpha)
    lam = float(sc.lam) if method == "combined" else None
    sel = select_layers(stats, k, method, lam=lam, alpha=sc.alpha, seed=sc.seed)
    named = method_sets(stats, k, lam=float(sc.lam), alpha=sc.alpha, n_random=sc.n_random, seed=sc.seed)
    if method not in named:
        named[method] = sel.ids
    table = rank_sets(stats, named, alpha=sc.alpha)
    ranks = rank_many(stats, [sel.ids, *([default] if default is not None else []), *table["ids"]])
    scores = {"selected": {**sel.scores, **ranks[0]}, "default": None}
    if default is not None:
        scores["default"] = {**score_set(stats, default, alpha=sc.alpha), **ranks[1]}
    table["percentile"] = [r["percentile"] for r in ranks[-len(table):]]
    rec = recommend(study_evidence(cfg, results_root), N, k, method, default)
    target = rec["recommended"] if rec["recommended"] is not None else list(sel.ids)
    ex = exports(target, N)
    ranking = [{**r, "ids": list(r["ids"])} for r in table.to_dict("records")]
    out = {
        "model": cfg.model,
        "n_layers": N,
        "method": method,
        "k": k,
        "lam": lam,
        "alpha": float(sc.alpha),
        "recommended": rec["recommended"],
        "basis": rec["basis"],
        "reason": rec["reason"],
        "evidence": rec["evidence"],
        "selected": [int(i) for i in sel.ids],
        "candidates": [{"name": r["name"], "ids": r["ids"], "renyi2": r["renyi2"], "percentile": r["percentile"]}
                       for r in ranking],
        "default": default,
        "default_note": note,
        "scores": scores,
        "exports_for": "recommended" if rec["recommended"] is not None else "candidate",
        "exports_ids": [int(i) for i in target],
        "exports": {e: f"{v['snippet']}   [convention: {v['convention']}]" for e, v in ex.items() if e != "hidden_states"},
        "exports_detail": ex,
        "engine_warnings": export_warnings(target, N, model_type=model_type),
        "table": "",
        "ranking": ranking,
        **(info or {}),
    }
    _with_compartments(out, out.get("compartments") or compartments_of(stats))
    head = (f"{cfg.model}: N={N}" + (f", {out['n_tokens']} tokens" if "n_tokens" in out else "")
            + (f" with next-token entropy >= {out['filter_threshold']:.3f} nats (quantile "
               f"{cfg.metrics.filter_quantile:g})" if out.get("filtered") else " (unfiltered)" if "filtered" in out else "")
            + f"; candidates ranked by S2 = closed-form concatenation entropy (nats), percentile among all "
              f"{scores['selected']['n_sets']} {k}-layer sets (a score to test, not a recommendation)\n")
    out["table"] = head + format_ranking(table)
    return to_jsonable(out)


def select_for_cli(cap: Any, cfg: Any, *, results_root: str | Path | None = None) -> dict[str, Any]:
    """``wave select``: which layers should an EAGLE-3 drafter read? One JSON-ready dict.

    Computes the statistics of ``cap.cache`` as ``cfg`` asks (:func:`stats_from_cache`:
    ``cfg.metrics.token_budget`` tokens, next-token-entropy filtered when
    ``cfg.select.filtered``), selects ``cfg.select.k`` layers with ``cfg.select.method``
    (``cfg.select.lam`` for ``"combined"``), ranks every rule's set, and recommends from
    the study's results (:func:`study_evidence`, :func:`recommend`; ``results_root`` as
    :func:`~activation_wave.core.results.results_dir`).

    Returns keys ``model``, ``n_layers``, ``method``, ``k``, ``lam``, ``alpha``,
    ``recommended`` (``hidden_states`` ids, or None), ``basis``, ``reason`` (the numbers,
    with intervals and n), ``evidence`` (records: ``delta``/``lo``/``hi``/``p``/``n`` of
    each tested set against the default, ``rho``/``lo``/``hi``/``n`` of the score against
    tau), ``selected`` (the method's set: a candidate), ``candidates`` (every rule's set,
    ranked by S2), ``default`` (the EAGLE-3 default, None when undefined for this N or
    when k != 3, with ``default_note`` saying why), ``scores`` (``selected`` / ``default``:
    :func:`score_set` plus ``rank`` / ``percentile`` among every k-subset),
    ``exports_for`` (``"recommended"``, or ``"candidate"`` when nothing is recommended),
    ``exports_ids``, ``exports`` (engine -> snippet naming its convention),
    ``exports_detail`` (:func:`~activation_wave.engines.conventions.exports`), ``engine_warnings``
    (:func:`~activation_wave.engines.conventions.export_warnings` of the exported set), ``table``
    (the ranking as text), ``ranking`` (the same as records), ``filtered``,
    ``filter_threshold``, ``n_tokens``, ``capture``, ``compartments`` (the CKA compartments of
    the sampled positions, unfiltered, as the CKA page finds them: inclusive ``[first, last]``
    ids, :func:`compartments_of`), and per layer the 1-based compartment of each candidate
    (``candidates[i]["compartments"]``), of ``selected`` (``selected_compartments``) and of the
    default (``default_compartments``, None without a default).

    Raises ValueError, naming the fix, for an unknown method, ``k < 1``, ``k`` not
    below the number of candidate layers, a k whose scans over every k-subset would take
    too long (naming the largest k that fits), and for ``eagle3-default`` when N is too
    small for ``[2, N//2, N-3]`` or k != 3; all before any statistic is computed.
    """
    N = int(cap.cache.n_layers)
    _check(N, cfg.select.method, cfg.select.k, cfg.select.alpha)
    cs = stats_from_cache(cap.cache, cfg)
    # compartments on every sampled position, as the CKA page draws them (not on the filtered ones)
    whole = cs.stats if not cs.filtered else LayerStats.from_hidden(cs.sample.hidden, cs.sample.layers, N)
    info = {"filtered": cs.filtered, "filter_threshold": cs.threshold, "n_tokens": cs.n_tokens,
            "capture": str(cap.cache.path), "compartments": compartments_of(whole)}
    return select_from_stats(cs.stats, cfg, N, model_type=_model_type(cap), results_root=results_root, info=info)


def format_report(out: Mapping[str, Any]) -> str:
    """The text ``wave select`` prints: the candidates, the recommendation and why, and the
    engine configs of the recommended set (or of the candidate, labelled, if none)."""
    lines = [out["table"], ""]
    if out.get("compartments"):
        where = "; ".join(f"{c['name']} {c['compartments']}" for c in out["candidates"])
        lines += [f"CKA compartments: {span_text(out['compartments'])} ({len(out['compartments'])}); "
                  f"the compartment of each layer: {where}", ""]
    lines.append(f"{out['method']} picks (k={out['k']}): {out['selected']}   (a candidate; EAGLE-3 default: "
                 f"{out['default']})")
    if out["recommended"] is not None:
        lines.append(f"recommended: {out['recommended']}   (basis: {out['basis']})")
    else:
        lines.append("recommended: none")
    lines.append(f"  why: {out['reason']}")
    what = "the recommended set" if out["exports_for"] == "recommended" else "the candidate to test (not a recommendation)"
    lines.append(f"engine configs for {what} {out['exports_ids']}:")
    lines += [f"  {engine:10s} {snippet}" for engine, snippet in out["exports"].items()]
    if out["engine_warnings"]:
        lines.append("engines that cannot load a drafter on these layers (or would feed it other tensors):")
        lines += [f"  ! {w}" for w in out["engine_warnings"]]
    return "\n".join(lines)


def _model_type(cap: Any) -> str:
    """The target's ``config.model_type`` (text config for multimodal wrappers), "llama" if unknown."""
    model = getattr(getattr(cap, "target", None), "model", None)
    config = getattr(model, "config", None)
    config = text_config(config)
    return str(getattr(config, "model_type", "llama"))
