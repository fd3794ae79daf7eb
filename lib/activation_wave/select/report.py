"""``wave select``: which layers should an EAGLE-3 drafter read? The command's report
(one JSON-ready dict, with a ranking table as text) built from the selection rules."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from activation_wave.measure.layer_stats import stats_from_cache
from activation_wave.core.layers import candidate_layers, eagle3_default_layers
from activation_wave.core.results import to_jsonable
from activation_wave.engines.conventions import export_warnings, exports
from activation_wave.select.selection import METHODS, method_sets, rank_among_all, rank_sets, score_set, select_layers
from activation_wave.core.layers import text_config

__all__ = ["format_ranking", "select_for_cli"]


def format_ranking(df: pd.DataFrame) -> str:
    """A :func:`~activation_wave.select.selection.rank_sets` table as aligned text, 3 decimals."""
    cols = ["rank", "name", "ids", "renyi2", "renyi2_gain", "mean_cka", "max_cka", "percentile"]
    cols = [c for c in cols if c in df.columns]
    view = df[cols].copy()
    view["ids"] = [str(list(x)) for x in view["ids"]]
    return view.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def select_for_cli(cap: Any, cfg: Any) -> dict[str, Any]:
    """``wave select``: which layers should an EAGLE-3 drafter read? One JSON-ready dict.

    Computes the statistics of ``cap.cache`` as ``cfg`` asks (:func:`stats_from_cache`:
    ``cfg.metrics.token_budget`` tokens, next-token-entropy filtered when
    ``cfg.select.filtered``), selects ``cfg.select.k`` layers with ``cfg.select.method``
    (``cfg.select.lam`` for ``"combined"``) and compares them with the EAGLE-3 default
    and the other methods.

    Returns keys ``model``, ``n_layers``, ``method``, ``k``, ``lam``, ``alpha``,
    ``selected`` (``hidden_states`` indices), ``default`` (the EAGLE-3 default, None
    when undefined for this N or when k != 3, with ``default_note`` saying why),
    ``scores`` (``selected`` / ``default``: :func:`score_set` plus ``rank`` /
    ``percentile`` among every k-subset), ``exports`` (engine -> snippet naming its
    convention), ``exports_detail`` (:func:`~activation_wave.engines.conventions.exports`), ``engine_warnings``
    (:func:`~activation_wave.engines.conventions.export_warnings`: engines that cannot load a drafter on
    ``selected``), ``table`` (ranking of every
    method's set, as text), ``ranking`` (the same as records), ``filtered``,
    ``filter_threshold``, ``n_tokens``, ``capture``.

    Raises ValueError, naming the fix, for an unknown method, ``k < 1``, ``k`` not
    below the number of candidate layers (N), and for ``eagle3-default`` when N is
    too small for ``[2, N//2, N-3]`` or k != 3; all before any statistic is computed.
    """
    sc = cfg.select
    N = int(cap.cache.n_layers)
    method, k = sc.method, sc.k
    if method not in METHODS:
        raise ValueError(f"unknown selection method {method!r} (--method); choose one of {', '.join(METHODS)}")
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k={k!r} (--k): the number of layers to read must be an integer >= 1 (EAGLE-3 reads 3)")
    pool = candidate_layers(N)
    if k >= len(pool):
        raise ValueError(f"k={k} (--k) but this model has only N={len(pool)} candidate layers (hidden_states "
                         f"{pool[0]}..{pool[-1]}; 0, the embeddings, is not a candidate): choose 1 <= k <= {len(pool) - 1}")
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

    cs = stats_from_cache(cap.cache, cfg)
    stats = cs.stats
    lam = float(sc.lam) if method == "combined" else None
    sel = select_layers(stats, k, method, lam=lam, alpha=sc.alpha, seed=sc.seed)
    scores = {"selected": {**sel.scores, **rank_among_all(stats, sel.ids)}, "default": None}
    if default is not None:
        scores["default"] = {**score_set(stats, default, alpha=sc.alpha), **rank_among_all(stats, default)}
    named = method_sets(stats, k, lam=float(sc.lam), alpha=sc.alpha, n_random=sc.n_random, seed=sc.seed)
    if f"{method}" not in named:
        named[method] = sel.ids
    table = rank_sets(stats, named, alpha=sc.alpha)
    table["percentile"] = [rank_among_all(stats, ids)["percentile"] for ids in table["ids"]]
    ex = exports(sel.ids, N)
    out = {
        "model": cfg.model,
        "n_layers": N,
        "method": method,
        "k": int(k),
        "lam": lam,
        "alpha": float(sc.alpha),
        "selected": [int(i) for i in sel.ids],
        "default": default,
        "default_note": note,
        "scores": scores,
        "exports": {e: f"{v['snippet']}   [convention: {v['convention']}]" for e, v in ex.items() if e != "hidden_states"},
        "exports_detail": ex,
        "engine_warnings": export_warnings(sel.ids, N, model_type=_model_type(cap)),
        "table": (f"{cfg.model}: N={N}, {cs.n_tokens} tokens"
                  + (f" with next-token entropy >= {cs.threshold:.3f} nats (quantile {cfg.metrics.filter_quantile:g})"
                     if cs.filtered else " (unfiltered)")
                  + f"; S2 = closed-form concatenation entropy (nats), percentile among all {scores['selected']['n_sets']} "
                  f"{k}-layer sets\n" + format_ranking(table)),
        "ranking": [{**r, "ids": list(r["ids"])} for r in table.to_dict("records")],
        "filtered": cs.filtered,
        "filter_threshold": cs.threshold,
        "n_tokens": cs.n_tokens,
        "capture": str(cap.cache.path),
    }
    return to_jsonable(out)


def _model_type(cap: Any) -> str:
    """The target's ``config.model_type`` (text config for multimodal wrappers), "llama" if unknown."""
    model = getattr(getattr(cap, "target", None), "model", None)
    config = getattr(model, "config", None)
    config = text_config(config)
    return str(getattr(config, "model_type", "llama"))
