"""A supervised cheap proxy for drafter quality: a closed-form ridge probe on cached hidden states.

The probe asks the drafter's own question of a layer set: from the set's hidden states
at an anchor position ``t`` (plus the token the target has just verified, ``x_{t+1}``,
which a drafter also reads), how well can a linear map predict the target's next
tokens ``x_{t+2}, x_{t+3}, ...`` (the greedy target's argmax at ``t+1, t+2, ...``,
``steps`` of them)? It is fitted on train-split anchors and scored on eval-split
anchors of one capture cache, never trained by gradient descent.

Speed comes from doing all the work that does not depend on the set once
(:meth:`ProbeData.from_cache`):

1. every layer's hidden states at the sampled anchors are centred, scaled to unit mean
   squared norm per token (so no layer dominates by its norm; norms grow with depth)
   and projected on their top ``rank`` principal components (fitted on train);
2. the train Gram ``G = P^T P`` of all projected blocks ``[D, D]`` (``D = (L + 2) *
   rank``) and the cross-products ``B = P^T Y`` with the targets are formed once.

A set's ridge solution is then ``W = (G_SS + lam I)^{-1} B_S`` on its rows and
columns only (a ``(k + 1) rank`` square system), and its held-out score needs one
``[n_eval, (k + 1) rank]`` product: every single layer and every triple of a
30-layer model score from the same blocks.

**Targets.** Two choices were built and compared on the same anchors:

* ``"onehot"`` (default): ridge regression onto the one-hot code of the target token
  in a reduced vocabulary of the ``vocab`` most frequent target tokens of the train
  anchors (a least-squares linear classifier, with the class frequencies as
  intercept); prediction = argmax over that vocabulary. Tokens outside it count as
  misses, as a drafter's reduced vocabulary would.
* ``"embedding"``: ridge regression onto the target token's input embedding (read from
  layer 0 of the capture at the token's own position, which in a greedy response is the
  target's argmax; for tied-embedding models such as SmolLM2 this is also its output
  embedding), scored by the argmax of the dot product with the embeddings of the same
  reduced vocabulary.

The one-hot probe is the default: it fits the scored quantity (which token wins)
directly; on the smoke capture it was the more accurate of the two on the same held-out
anchors (averaged over every single layer); and it is the cheaper one to score, since the
embedding probe adds an ``[n_eval, H] x [H, vocab]`` product per step to the same solve.
Without the verified token's block the probe credits deep layers for knowing
``x_{t+1}``, which a drafter is given anyway; hence ``with_token=True`` by default.

**Score.** Per eval anchor, the number of leading steps predicted correctly (a chain of
non-autoregressive guesses accepted while they match), averaged, plus one: the probe's
analogue of the mean accepted length tau. ``acc_by_step`` gives each step's accuracy.

>>> # doctest: +SKIP
>>> data = ProbeData.from_cache(cache)
>>> data.score([2, 15, 27]).score
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from activation_wave.models.capture import CaptureCache

__all__ = ["ProbeScore", "ProbeData", "probe_scores", "rank_subsets"]

TARGETS = ("onehot", "embedding")
#: Name of the block holding the embedding of the verified token x_{t+1}.
TOKEN_BLOCK = "token"


@dataclass(frozen=True)
class ProbeScore:
    """Held-out score of one layer set (``score`` = 1 + mean leading correct steps)."""

    layers: tuple[int, ...]
    score: float
    acc_by_step: tuple[float, ...]
    n_eval: int
    seconds: float


def _valid_anchors(loss_mask: np.ndarray, record: np.ndarray, steps: int) -> np.ndarray:
    """Rows ``r`` of one shard with a response position at ``r`` and targets at ``r+1 .. r+steps``
    in the same record (the last ``steps`` positions of each response have none)."""
    n = len(loss_mask)
    ok = loss_mask.copy()
    for j in range(1, steps + 1):
        nxt = np.zeros(n, bool)
        nxt[: n - j] = loss_mask[j:] & (record[j:] == record[: n - j])
        ok &= nxt
    return np.nonzero(ok)[0]


def _sample_anchors(cache: CaptureCache, steps: int, n_train: int, n_eval: int, seed: int
                    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Seeded anchors per split: ``(shard, row)`` pairs [n, 2] and their target ids [n, steps]."""
    splits = np.array([r["split"] for r in cache.records])
    where: dict[str, list[np.ndarray]] = {"train": [], "eval": []}
    labels: dict[str, list[np.ndarray]] = {"train": [], "eval": []}
    for si, shard in enumerate(cache.iter_shards([], fields=("record", "loss_mask", "top1"))):
        rec = shard["record"].numpy().astype(np.int64)
        rows = _valid_anchors(shard["loss_mask"].numpy().astype(bool), rec, steps)
        top1 = shard["top1"].numpy().astype(np.int64)
        for split in where:
            mine = rows[splits[rec[rows]] == split]
            where[split].append(np.stack([np.full(len(mine), si), mine], 1))
            labels[split].append(np.stack([top1[mine + j] for j in range(1, steps + 1)], 1))
    rng = np.random.default_rng(seed)
    out_w, out_l = {}, {}
    for split, n in (("train", n_train), ("eval", n_eval)):
        w = np.concatenate(where[split]) if where[split] else np.zeros((0, 2), np.int64)
        lab = np.concatenate(labels[split]) if labels[split] else np.zeros((0, steps), np.int64)
        if len(w) < 2:
            raise ValueError(f"the capture at {cache.path} has {len(w)} {split}-split anchors with {steps} target "
                             f"steps: the probe needs at least 2; capture more {split} records or lower steps")
        pick = np.sort(rng.choice(len(w), size=min(n, len(w)), replace=False))
        out_w[split], out_l[split] = w[pick], lab[pick]
    return out_w, out_l


def _read_rows(cache: CaptureCache, layer: int, where: np.ndarray, offset: int = 0) -> np.ndarray:
    """``h.{layer}`` at rows ``where[:, 1] + offset`` of shards ``where[:, 0]``, [n, H] float64, in order."""
    out = np.zeros((len(where), cache.manifest["model"]["hidden_size"]))
    for si, shard in enumerate(cache.iter_shards([layer], fields=())):
        sel = np.nonzero(where[:, 0] == si)[0]
        if len(sel):
            out[sel] = shard[f"h.{layer}"][where[sel, 1] + offset].double().numpy()
    return out


def _project(train: np.ndarray, evals: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Centre and scale (train mean, unit mean squared norm), then top-``rank`` PCA scores."""
    mu = train.mean(0)
    z, ze = train - mu, evals - mu
    scale = np.sqrt((z * z).sum(1).mean())
    if scale > 0:
        z, ze = z / scale, ze / scale
    if rank >= z.shape[1]:
        return z, ze
    _, vecs = np.linalg.eigh(z.T @ z)
    u = vecs[:, ::-1][:, :rank]
    return z @ u, ze @ u


@dataclass(eq=False)
class ProbeData:
    """Everything a set's probe needs, precomputed once from a capture (see the module doc).

    ``G`` [D, D] and ``B`` [D, steps * C] are train cross-products of the projected blocks
    (``C`` = vocabulary size for ``"onehot"``, hidden size for ``"embedding"``);
    ``P_eval`` [n_eval, D] the eval blocks; ``labels_eval`` [n_eval, steps] indices into
    ``vocab_ids`` (-1: outside the reduced vocabulary); ``blocks`` maps a layer id (or
    :data:`TOKEN_BLOCK`) to its column slice.
    """

    layers: tuple[int, ...]
    blocks: dict[Any, slice]
    G: np.ndarray
    B: np.ndarray
    intercept: np.ndarray
    P_eval: np.ndarray
    labels_eval: np.ndarray
    vocab_ids: np.ndarray
    vocab_emb: np.ndarray | None
    target: str
    steps: int
    ridge: float
    with_token: bool
    n_train: int
    build_seconds: float

    @classmethod
    def from_cache(cls, cache: CaptureCache, *, layers: Sequence[int] | None = None, n_train: int = 8192,
                   n_eval: int = 4096, rank: int = 64, vocab: int = 1024, steps: int = 3, ridge: float = 1e-2,
                   target: str = "onehot", with_token: bool = True, seed: int = 0) -> ProbeData:
        """Sample anchors, project every layer's block and form the train cross-products.

        ``layers`` defaults to every layer id of the cache (``0..N``); a set can only
        use these. ``ridge`` is relative: ``lam = ridge * trace(G_SS) / dim``, so sets
        of different sizes are regularised alike. ``with_token`` adds the block of the
        verified token's embedding (layer 0 one position later) to every set, as the
        drafter reads it too; then a set is scored on what it adds to that token.
        """
        if target not in TARGETS:
            raise ValueError(f"target={target!r}: choose one of {TARGETS}")
        if steps < 1 or rank < 1 or vocab < 1:
            raise ValueError(f"steps, rank and vocab must be >= 1, got {steps}, {rank}, {vocab}")
        t0 = time.perf_counter()
        layers = tuple(cache.layer_ids if layers is None else sorted(set(int(i) for i in layers)))
        bad = [i for i in layers if i not in cache.layer_ids]
        if bad:
            raise ValueError(f"layers {bad} are not in the capture (it holds 0..{cache.n_layers})")
        where, labels = _sample_anchors(cache, steps, n_train, n_eval, seed)
        ids, counts = np.unique(labels["train"], return_counts=True)
        vocab_ids = np.sort(ids[np.argsort(-counts, kind="stable")[:vocab]])
        lookup = {int(t): i for i, t in enumerate(vocab_ids)}
        code = {s: np.vectorize(lambda t: lookup.get(int(t), -1), otypes=[np.int64])(labels[s]) for s in labels}

        names: list[Any] = list(layers) + ([TOKEN_BLOCK] if with_token else [])
        train_parts, eval_parts, blocks, col = [], [], {}, 0
        for name in names:
            layer, offset = (0, 1) if name == TOKEN_BLOCK else (name, 0)
            both = _read_rows(cache, layer, np.concatenate([where["train"], where["eval"]]), offset)  # one pass
            p_tr, p_ev = _project(both[: len(where["train"])], both[len(where["train"]):], rank)
            train_parts.append(p_tr)
            eval_parts.append(p_ev.astype(np.float32))
            blocks[name] = slice(col, col + p_tr.shape[1])
            col += p_tr.shape[1]
        P = np.concatenate(train_parts, 1)
        n = len(P)
        vocab_emb = None
        if target == "onehot":  # sparse: P^T Y is a sum of P's rows per (step, token)
            from scipy.sparse import csr_matrix

            rows, cols = np.nonzero(code["train"] >= 0)
            Y = csr_matrix((np.ones(len(rows)), (rows, cols * len(vocab_ids) + code["train"][rows, cols])),
                           shape=(n, steps * len(vocab_ids)))
        else:  # the target token's embedding: layer 0 at the target token's own position
            Y = np.concatenate([_read_rows(cache, 0, where["train"], j + 1) for j in range(1, steps + 1)], 1)
            first: dict[int, int] = {}
            for i, t in enumerate(labels["train"].ravel()):
                first.setdefault(int(t), i)
            at = np.array([first[int(t)] for t in vocab_ids])  # flat index: anchor * steps + (step - 1)
            rows = where["train"][at // steps] + np.stack([np.zeros_like(at), at % steps + 2], 1)
            vocab_emb = _read_rows(cache, 0, rows).astype(np.float32)
        intercept = np.asarray(Y.mean(0)).ravel()
        B = np.asarray((Y.T @ P).T) - np.outer(P.sum(0), intercept)  # = P^T (Y - 1 intercept^T)
        return cls(layers=layers, blocks=blocks, G=P.T @ P, B=B, intercept=intercept,
                   P_eval=np.concatenate(eval_parts, 1), labels_eval=code["eval"], vocab_ids=vocab_ids,
                   vocab_emb=vocab_emb, target=target, steps=steps, ridge=ridge, with_token=with_token,
                   n_train=n, build_seconds=time.perf_counter() - t0)

    def _columns(self, layers: Sequence[int]) -> np.ndarray:
        missing = [i for i in layers if i not in self.blocks]
        if missing:
            raise ValueError(f"layers {missing} were not prepared (prepared: {list(self.layers)}); "
                             "build ProbeData with them in `layers`")
        names = list(layers) + ([TOKEN_BLOCK] if self.with_token else [])
        return np.concatenate([np.arange(self.blocks[n].start, self.blocks[n].stop) for n in names])

    def predict(self, layers: Sequence[int]) -> np.ndarray:
        """Predicted reduced-vocabulary index per eval anchor and step [n_eval, steps]."""
        from scipy.linalg import cho_factor, cho_solve

        cols = self._columns(layers)
        A = self.G[np.ix_(cols, cols)]
        lam = self.ridge * float(np.trace(A)) / len(cols)
        W = cho_solve(cho_factor(A + lam * np.eye(len(cols))), self.B[cols]).astype(np.float32)
        out = self.P_eval[:, cols] @ W + self.intercept.astype(np.float32)  # [n_eval, steps * C]
        width = out.shape[1] // self.steps
        if self.target == "onehot":
            return np.stack([out[:, j * width:(j + 1) * width].argmax(1) for j in range(self.steps)], 1)
        return np.stack([(out[:, j * width:(j + 1) * width] @ self.vocab_emb.T).argmax(1)
                         for j in range(self.steps)], 1)

    def score(self, layers: Sequence[int]) -> ProbeScore:
        """Held-out score of one set (see the module doc)."""
        t0 = time.perf_counter()
        ids = tuple(int(i) for i in layers)
        correct = self.predict(ids) == self.labels_eval
        leading = np.cumprod(correct, axis=1).sum(1)
        return ProbeScore(layers=ids, score=float(1.0 + leading.mean()),
                          acc_by_step=tuple(float(a) for a in correct.mean(0)), n_eval=len(correct),
                          seconds=time.perf_counter() - t0)


def probe_scores(cache: CaptureCache | ProbeData, sets: Mapping[str, Sequence[int]] | Sequence[Sequence[int]],
                 **kw: Any) -> dict[str, ProbeScore]:
    """Probe score of every set: ``{name: ProbeScore}`` (unnamed sets are named by their layers).

    ``cache`` is a capture (then ``kw`` goes to :meth:`ProbeData.from_cache`, built over
    the layers the sets use) or a prepared :class:`ProbeData`.
    """
    named = dict(sets) if isinstance(sets, Mapping) else {str(list(s)): s for s in sets}
    if isinstance(cache, ProbeData):
        data = cache
    else:
        data = ProbeData.from_cache(cache, layers=sorted({int(i) for s in named.values() for i in s}), **kw)
    return {name: data.score(ids) for name, ids in named.items()}


def rank_subsets(data: ProbeData, k: int, candidates: Sequence[int] | None = None) -> list[ProbeScore]:
    """Score every ``k``-subset of ``candidates`` (default: every prepared layer); best first."""
    pool = sorted(data.layers if candidates is None else candidates)
    scores = [data.score(s) for s in itertools.combinations(pool, k)]
    return sorted(scores, key=lambda s: (-s.score, s.layers))
