"""Chapter 0, data and capture: the target, its responses and the hidden-state cache.

:func:`run` returns a :class:`DataAndCaptureResult` with the model's facts, the
capture's size and the per-layer token-norm profile of a sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from activation_wave.models.capture import norm_profile
from activation_wave.core.config import StudyConfig
from activation_wave.models.prompts import Response
from activation_wave.core.layers import eagle3_default_layers

#: How many responses the chapter quotes, and how many characters of each.
N_EXAMPLES, EXAMPLE_CHARS = 4, 300


@dataclass(frozen=True)
class ModelInfo:
    """The target's facts: N decoder blocks, width, vocabulary, the EAGLE-3 default."""

    model: str
    fingerprint: str
    n_layers: int
    hidden_size: int
    vocab_size: int
    default_layers: list[int] | None

    def table(self) -> dict[str, Any]:
        """Display names -> values, for a key-value table."""
        return {"model": self.model, "fingerprint": self.fingerprint, "decoder blocks N": self.n_layers,
                "hidden size": self.hidden_size, "vocabulary": self.vocab_size, "layer indices": f"0..{self.n_layers}",
                "EAGLE-3 default [2, N//2, N-3]": str(self.default_layers)}


@dataclass(frozen=True)
class CaptureSummary:
    """Size of the capture cache."""

    records: int
    tokens: int
    response_positions: int
    shards: int
    disk_mib: int
    storage_dtypes: list[str]

    def table(self) -> dict[str, Any]:
        """Display names -> values, for a key-value table."""
        return {"records (prompt + response)": self.records, "tokens": self.tokens,
                "response positions": self.response_positions, "shards": self.shards, "on disk (MiB)": self.disk_mib,
                "stored as": ", ".join(self.storage_dtypes)}


@dataclass(frozen=True)
class DataAndCaptureResult:
    """What chapter 0 reports; ``norm_profile`` maps ``median_norm`` / ``max_norm`` /
    ``p99_norm`` / ``max_abs`` to ``[L]`` over the sampled tokens."""

    info: ModelInfo
    summary: CaptureSummary
    layers: list[int]
    norm_profile: dict[str, list[float]]
    max_norm_ratio: float
    max_norm_ratio_layer: int
    responses_file: str
    capture_dir: str


def capture_summary(cache: Any) -> CaptureSummary:
    """Records, tokens, response positions, shards and disk use of a capture cache."""
    m = cache.manifest
    return CaptureSummary(records=len(m["records"]), tokens=m["n_tokens"], response_positions=m["n_loss_tokens"],
                          shards=len(m["shards"]), disk_mib=round(cache.disk_bytes() / 2**20),
                          storage_dtypes=sorted({d for s in m["shards"] for d in s["dtypes"].values()}))


def response_lengths(responses: Sequence[Response]) -> dict[str, list[int]]:
    """Response lengths in tokens, grouped by prompt source."""
    out: dict[str, list[int]] = {}
    for r in responses:
        out.setdefault(r.source, []).append(len(r.response_ids))
    return out


def example_responses(responses: Sequence[Response], n: int = N_EXAMPLES, seed: int = 0) -> list[str]:
    """``n`` seeded responses as one-line markdown (id, category, split, length, text head)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in sorted(rng.choice(len(responses), size=min(n, len(responses)), replace=False)):
        r = responses[i]
        text = r.text.strip().replace("\n", " ")
        more = "…" if len(text) > EXAMPLE_CHARS else ""
        out.append(f"**{r.id}** ({r.category}, {r.split}, {len(r.response_ids)} tokens): {text[:EXAMPLE_CHARS]}{more}")
    return out


def norm_values(r: DataAndCaptureResult) -> dict[str, Any]:
    """What the page says of the token norms, by the names it quotes them: the median norm at
    the first and the last layer index and the largest max/median ratio with its layer (no
    direction word: the sentence gives both numbers)."""
    median = r.norm_profile["median_norm"]
    return dict(max_norm_ratio=r.max_norm_ratio, max_norm_ratio_layer=r.max_norm_ratio_layer,
                median_first=float(median[0]), median_last=float(median[-1]), last_layer=int(r.layers[-1]))


def run(cfg: StudyConfig, cap: Any) -> DataAndCaptureResult:
    """Chapter 0 on a capture (:class:`~activation_wave.study.steps.Captured`)."""
    target, cache = cap.target, cap.cache
    N = target.n_layers
    info = ModelInfo(model=cfg.model, fingerprint=target.fingerprint, n_layers=N, hidden_size=target.hidden_size,
                     vocab_size=target.vocab_size, default_layers=eagle3_default_layers(N))
    sample = cache.sample_tokens(cfg.metrics.token_budget, seed=cfg.metrics.seed)
    prof = norm_profile(sample.hidden)
    ratio = prof["max_norm"] / prof["median_norm"]
    return DataAndCaptureResult(info=info, summary=capture_summary(cache), layers=list(sample.layers),
                                norm_profile={k: np.asarray(v).tolist() for k, v in prof.items()},
                                max_norm_ratio=float(ratio.max()), max_norm_ratio_layer=int(sample.layers[int(np.argmax(ratio))]),
                                responses_file=cap.responses_path.name, capture_dir=cache.path.name)
