"""The cost model of speculative decoding: the speedup that measured costs predict.

A round costs one verify of ``depth + 1`` tokens plus ``depth`` head steps; with a plain
step costing ``t1`` the predicted speedup is ``tau * t1 / t_round``, its ceiling (every
draft accepted) ``(depth + 1) * t1 / t_round``, and speculation breaks even at
``tau = t_round / t1``. The costs come from :func:`~.timing.measure_costs`. Pure
arithmetic, so figures can use it without importing the decoding code.

>>> costs = {"depth": 3, "step_ms": 50.0, "verify_ms": {"4": 70.0}, "draft_chain_ms": 10.0}
>>> cost_model(2.0, costs)["speedup"]
1.25
"""

from __future__ import annotations

from typing import Any

__all__ = ["cost_model"]


def cost_model(tau: float, costs: dict[str, Any], depth: int | None = None, *, verify_tokens: int | None = None,
               draft_ms: float | None = None) -> dict[str, float]:
    """Predicted speedup of speculative over plain decoding from measured costs.

    ``t_round = verify_ms[verify_tokens] + draft_ms`` (defaults: ``depth + 1`` verify
    tokens and ``costs["draft_chain_ms"]``, or ``depth`` x ``draft_step_ms``);
    ``speedup = tau * step_ms / t_round``; ``ceiling`` is the speedup at tau = depth + 1;
    ``break_even_tau = t_round / step_ms``.
    """
    depth = int(costs.get("depth", 4) if depth is None else depth)
    k = verify_tokens or depth + 1
    verify = costs["verify_ms"]
    verify_k = verify.get(k, verify.get(str(k)))
    if verify_k is None:
        raise KeyError(f"no verify time for {k} tokens in costs (have {sorted(verify)}); measure it with "
                       "measure_costs(..., extra_sizes=[k])")
    if draft_ms is None:
        draft_ms = costs.get("draft_chain_ms", depth * costs.get("draft_step_ms", 0.0))
    step = float(costs["step_ms"])
    t_round = float(verify_k) + float(draft_ms)
    return {"tau": tau, "step_ms": step, "round_ms": t_round, "speedup": tau * step / t_round,
            "ceiling": (depth + 1) * step / t_round, "break_even_tau": t_round / step}
