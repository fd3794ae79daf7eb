"""What a reader of the book sees on a page, and the checks that page must pass.

:func:`reader_text` turns a page (an executed chapter notebook or a markdown page) into
the text a reader sees: the markdown with every ``{glue:text}`` replaced by its glued
value, roles reduced to their words, math and code kept apart. :func:`page_problems`
lists what a reader should never meet there: words of the lab record (amendments,
stages, ledger keys, commit hashes, column names), stale placeholders, ``from 1.0 to
1.0``, control characters, repeated words, sentences over :data:`MAX_SENTENCE` words,
a page over its word budget, chapter numbers typed into prose, a count that misses its
plural, a direction word that the numbers contradict, a machine path in the text or the
outputs, and a markdown table in an output (raw pipes in the book). The test suite runs it
over every page of the book's main parts and over the per-architecture appendix pages
(``tests/test_book_pages.py``; the checks themselves: ``tests/test_book_guards.py``).

>>> page_problems(PageText(prose="The the drafter accepts.", text="The the drafter accepts."), budget=None)
["repeated word 'The the'"]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from activation_wave.core.paths import REPO_ROOT

#: The book's folder and its table of contents.
BOOK = REPO_ROOT / "book"
TOC = REPO_ROOT / "_toc.yml"
#: Longest sentence a page may print, in words.
MAX_SENTENCE = 60
#: Words of prose (code, tables, captions aside) a page may hold; pages not named here and
#: in a numbered part hold :data:`CHAPTER_BUDGET`.
BUDGETS = {"chapters/intro": 700, "chapters/11_cpu_payoff": 2500, "rerun": 1600, "operate": 3800}
CHAPTER_BUDGET = 1800
#: Directives whose body a reader reads as prose (the rest, figures and tables, are captions).
PROSE_DIRECTIVES = ("admonition", "note", "tip", "important", "warning", "seealso", "attention", "hint")

#: Words that belong to the lab record, not to a finding (with what each catches).
LAB_WORDS: dict[str, str] = {
    r"\bamendments?\b": "a design's amendment",
    r"\bstages? \d": "a training stage",
    r"\bB[124]\b": "a budget's code name",
    r"\d+x@": "a design cell's code name",
    r"\bissues?\b": "the tracker",
    r"\bledger\b": "the drafter ledger",
    r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b": "a commit hash",
    r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b": "a module or column name",
    r"\bactivation_wave\b": "a module name",
}
#: Sentences that wait for data; on a page whose data exists they are stale.
PLACEHOLDERS = ("empty until", "has not finished", "no rows until", "once its drafters have trained")


@dataclass(frozen=True)
class PageText:
    """A page as read: ``prose`` counts toward the word budget (body text and answer
    boxes); ``text`` is everything a reader reads (prose, captions and table cells), less
    code spans and the "Try it" section. ``outputs``: what the code cells show as text."""

    prose: str
    text: str
    #: what the page's code cells print or display as text (stream lines, markdown and plain
    #: outputs; images and HTML tables aside), one output per line block
    outputs: str = ""


def main_pages(toc: Path = TOC) -> list[str]:
    """The pages of the book's main parts (every part but the appendices), as toc entries."""
    doc = yaml.safe_load(toc.read_text())
    pages = [doc["root"]]
    for part in doc.get("parts", []):
        if part.get("caption", "").lower().startswith("appendi"):
            continue
        pages += [c["file"] for c in part.get("chapters", [])]
        pages += [s["file"] for c in part.get("chapters", []) for s in c.get("sections", [])]
    return pages


def architecture_pages(toc: Path = TOC) -> list[str]:
    """The appendix pages that rerun a Part I chapter on another architecture
    (``chapters/<folder>/<chapter>``): the same sentences with another model's numbers, so
    they are read with the same checks as the main parts."""
    doc = yaml.safe_load(toc.read_text())
    return [c["file"] for part in doc.get("parts", []) if part.get("caption", "").lower().startswith("appendi")
            for c in part.get("chapters", []) if re.match(r"^chapters/[^/]+/", c["file"])]


def page_file(entry: str, book: Path = BOOK) -> Path:
    """The file behind a toc entry: the executed notebook, else the markdown page."""
    for suffix in (".ipynb", ".md"):
        if (book / f"{entry}{suffix}").exists():
            return book / f"{entry}{suffix}"
    raise FileNotFoundError(f"no page for toc entry {entry!r} under {book}")


def glued(nb: dict[str, Any]) -> dict[str, str]:
    """``{name: text/plain}`` of every value a notebook glued."""
    out: dict[str, str] = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook")
            if meta:
                plain = o["data"].get(meta["mime_prefix"] + "text/plain")
                if plain is not None:
                    out[meta["name"]] = plain
    return out


def _value(plain: str, spec: str) -> str:
    """A glued value as ``{glue:text}`name:spec``` renders it."""
    import ast

    try:
        value = ast.literal_eval(plain)
    except (ValueError, SyntaxError):
        return plain
    if spec:
        try:
            return format(value, spec)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def _markdown(path: Path) -> tuple[str, dict[str, str]]:
    if path.suffix == ".md":
        return path.read_text(), {}
    nb = json.loads(path.read_text())
    cells = [c for c in nb["cells"] if c["cell_type"] == "markdown"
             and "remove-cell" not in c.get("metadata", {}).get("tags", [])]
    return "\n\n".join("".join(c["source"]) for c in cells), glued(nb)


def _inline(text: str, values: dict[str, str], here: Path | None = None) -> str:
    """Roles, links and math reduced to what a reader sees; a code span reads as placeholder
    words (one a word: counted, never matched as a name). A link reads
    as the book renders it: ``{doc}`` as the linked page's title (``here``: the page's
    folder), ``{ref}`` as its section's heading, ``{numref}`` / ``{eq}`` as a number,
    ``{cite:t}`` as "Author et al. (year)"; an inline formula keeps its words (``$\\lambda = 0$``
    reads as three), so a sentence counts them as the reader does."""
    text = re.sub(r"\{glue(?::text|:md)?\}`([^`:]+)(?::([^`]*))?`",
                  lambda m: _value(values.get(m.group(1), m.group(1)), m.group(2) or ""), text)
    text = re.sub(r"\{(?:term|doc|ref|numref|eq)\}`([^`<]*?)\s*<[^`]*>`", r"\1", text)
    text = re.sub(r"\{term\}`([^`]*)`", r"\1", text)
    text = re.sub(r"\{doc\}`([^`]*)`", lambda m: _doc_title(m.group(1), here), text)
    text = re.sub(r"\{ref\}`([^`]*)`", lambda m: _labels().get(m.group(1), "this section"), text)
    text = re.sub(r"\{numref\}`[^`]*`", "Fig. 1", text)
    text = re.sub(r"\{eq\}`[^`]*`", "(1)", text)
    text = re.sub(r"\{cite(:\w+)?\}`([^`]*)`", lambda m: _citation(m.group(2), m.group(1) or ""), text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\$\$.*?\$\$", " x ", text, flags=re.S)
    text = re.sub(r"\$([^$\n]+)\$", lambda m: _math_words(m.group(1)), text)
    # a code span is read, but its text is a name, not prose: one placeholder word per word
    text = re.sub(r"`([^`]*)`", lambda m: "\u2009".join(["Code"] * max(1, len(m.group(1).split()))), text)
    text = re.sub(r"<\|[^|\s]*\|>", "<token>", text)  # a special token's text, e.g. <|im_start|>
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def _math_words(tex: str) -> str:
    """An inline formula as the words a reader reads in it: ``\\min(\\log n, \\log d)`` ->
    ``min log n log d``; a formula with no word reads as one word (``X``)."""
    found = re.findall(r"\\?[A-Za-z]+|\d+(?:\.\d+)?|[=<>\u2264\u2265]", tex)
    # thin spaces: a word, not a repetition, to the repeated-word check ("$K K^T$")
    return "\u2009" + ("\u2009".join(w.lstrip("\\") for w in found) or "X") + "\u2009"


def _citation(keys: str, role: str) -> str:
    """A citation as the author-year style prints it: "Skean et al. (2025)" for ``{cite:t}``,
    "(Skean et al., 2025)" otherwise, from the key's leading name and year."""
    out = []
    for key in keys.split(","):
        m = re.match(r"\s*([A-Za-z]+?)(\d{4})", key)
        name, year = (m.group(1).capitalize(), m.group(2)) if m else (key.strip(), "")
        out.append(f"{name} et al. ({year})" if role == ":t" else f"{name} et al., {year}")
    return "; ".join(out) if role == ":t" else "(" + "; ".join(out) + ")"


def _doc_title(target: str, here: Path | None) -> str:
    """The title of the page ``target`` links (its first heading), as ``{doc}`` prints it."""
    base = BOOK if target.startswith("/") or here is None else here
    for suffix in (".ipynb", ".md"):
        path = (base / target.lstrip("/")).with_suffix(suffix) if not target.endswith(suffix) else base / target
        if path.is_file():
            md = path.read_text() if path.suffix == ".md" else "\n".join(
                "".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown")
            m = re.search(r"^#\s+(.+)$", md, flags=re.M)
            if m:
                return _inline(m.group(1), {})
    return "this page"


_LABELS: dict[str, str] = {}


def _labels() -> dict[str, str]:
    """``{label: heading}`` of every ``(label)=`` target in the book's markdown pages."""
    if not _LABELS:
        for path in BOOK.rglob("*.md"):
            if "_build" in path.parts:
                continue
            for m in re.finditer(r"^\((\S+)\)=\s*\n#+\s+(.+)$", path.read_text(), flags=re.M):
                _LABELS[m.group(1)] = m.group(2)
        _LABELS.setdefault("", "")
    return _LABELS


def _outputs(path: Path) -> str:
    """The text outputs of an executed notebook's shown cells (empty for a markdown page): a
    ``text/markdown`` output is marked ``[markdown]`` so that a check can tell how it renders."""
    if path.suffix != ".ipynb":
        return ""
    out: list[str] = []
    for cell in json.loads(path.read_text())["cells"]:
        if "remove-cell" in cell.get("metadata", {}).get("tags", []):
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append("".join(o["text"]))
            data = o.get("data", {})
            if "text/markdown" in data:
                out.append("[markdown]\n" + "".join(data["text/markdown"]))
            elif "text/plain" in data and not any(k.startswith(("image/", "text/html")) for k in data):
                out.append("".join(data["text/plain"]))
    return "\n\n".join(out)


#: An absolute path of the machine that ran a page (a home, the checkout, a scratch folder,
#: an installed package): never on a committed page.
MACHINE_PATH = re.compile(r"(?:/root/|/home/|/Users/|/work/|/tmp/|site-packages)\S*")


def machine_paths(text: str) -> list[str]:
    """The machine paths in ``text`` (see :data:`MACHINE_PATH`).

    >>> machine_paths("14 shards at <cache>/capture/x, read from /root/.cache/x")
    ['/root/.cache/x']
    """
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


#: Nouns the pages count; "1 compartments" or "4 compartment" is a glued count that missed
#: its plural (nouns that are not also verbs: "layer 1 sets it" is a sentence).
COUNTED_NOUNS = ("compartment", "layer", "token", "prompt", "triple", "position", "shard", "drafter", "treatment",
                 "subset")
#: Verbs that say which way a quantity went, and the sign of "from a to b" each asks for.
DIRECTION_VERBS = {"rises": 1, "rose": 1, "grows": 1, "increases": 1, "climbs": 1,
                   "falls": -1, "fell": -1, "drops": -1, "decreases": -1, "shrinks": -1}


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _fence_kind(name: str) -> str:
    """What a reader reads inside a directive: prose (answer boxes), a caption, or nothing."""
    if name in PROSE_DIRECTIVES:
        return "prose"
    if name in ("", "code", "code-block", "code-cell", "math", "python", "bash", "text", "json"):
        return "code"
    return "caption"


def reader_text(path: Path) -> PageText:
    """The text a reader sees on the page at ``path`` (see :class:`PageText`)."""
    md, values = _markdown(path)
    md = re.sub(r"\$\$.*?\$\$", " x ", md, flags=re.S)  # display math, over several lines

    def other_page(m: re.Match[str]) -> str:  # a value glued by another notebook: path::key
        nb = path.parent / m.group(1)
        plain = glued(json.loads(nb.read_text())).get(m.group(2), m.group(2)) if nb.is_file() else m.group(2)
        return _value(plain, m.group(3) or "")

    md = re.sub(r"\{glue(?::text)?\}`([^`:]+\.ipynb)::([^`:]+)(?::([^`]*))?`", other_page, md)
    prose: list[str] = []
    text: list[str] = []
    fences: list[tuple[str, str]] = []  # open fences: (marker, kind)
    try_it = try_para = False
    for line in md.splitlines():
        s = line.strip()
        if fences and s == fences[-1][0]:
            fences.pop()
            continue
        m = re.match(r"^(`{3,}|:{3,})\s*(?:\{([\w:-]+)\})?\s*(.*)$", s)
        if m and not (fences and fences[-1][1] == "code"):
            name = m.group(2) or ("" if m.group(1)[0] == "`" or not m.group(3) else m.group(3).split()[0])
            kind = _fence_kind(name if m.group(2) else ("" if m.group(1)[0] == "`" else name))
            if m.group(1)[0] == "`" and not m.group(2) and m.group(3):
                kind = "code"  # ```python
            fences.append((m.group(1), kind))
            if kind == "prose" and m.group(3):  # an admonition's title
                prose.append(_inline(m.group(3), values, path.parent))
                text.append(prose[-1])
            continue
        kind = fences[-1][1] if fences else "prose"
        if kind == "code" or (fences and s.startswith(":")):
            continue
        if re.match(r"^#+\s", s):
            try_it = bool(re.match(r"^#+\s*try it", s, flags=re.I))
        if not s:
            try_para = False
        elif re.match(r"^\W*try it", s, flags=re.I):
            try_para = True  # a "Try it" paragraph, to its end
        if try_it or try_para or re.match(r"^\(\S+\)=$", s):
            continue
        read = _inline(line, values, path.parent)
        text.append(read)
        if kind == "prose" and not s.startswith("|"):
            prose.append(read)
    return PageText(prose="\n".join(prose), text="\n".join(text), outputs=_outputs(path))


def sentences(text: str) -> list[str]:
    """Sentences of prose: paragraphs and list items split at full stops."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n\s*(?:[-*+]|\d+\.)\s+|\n#+\s", text):
        flat = " ".join(block.split())
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(*\"'])", flat) if s]
    return out


def words(text: str) -> int:
    """Words of prose (tokens with a letter or digit)."""
    return len(re.findall(r"[\w$]+(?:[-'.,][\w]+)*", text))


def page_problems(page: PageText, budget: int | None) -> list[str]:
    """What a reader should not meet on ``page`` (empty when it is clean)."""
    problems: list[str] = []
    for pattern, what in LAB_WORDS.items():
        for m in re.finditer(pattern, page.text):
            problems.append(f"lab-record word {m.group(0)!r} ({what})")
    low = page.text.lower()
    problems += [f"placeholder {p!r}" for p in PLACEHOLDERS if p in low]
    for m in re.finditer(r"\bfrom (-?\d[\d,]*(?:\.\d+)?)\S*? to (-?\d[\d,]*(?:\.\d+)?)", page.text):
        if m.group(1) == m.group(2):
            problems.append(f"'{m.group(0)}': equal numbers")
    for m in re.finditer(r"[\x00-\x08\x0b-\x1f\x7f\t]", page.text):
        problems.append(f"control character {m.group(0)!r}")
    for m in re.finditer(r"\b([A-Za-z]+) +\1\b", page.text, flags=re.I):
        problems.append(f"repeated word {m.group(0)!r}")
    for s in sentences(page.prose):
        if len(s.split()) > MAX_SENTENCE:
            problems.append(f"sentence of {len(s.split())} words: {s[:80]!r}...")
    for m in re.finditer(r"\b[Cc]hapters? \d+\w?", page.text):
        problems.append(f"'{m.group(0)}' typed into prose (link the page with {{doc}})")
    nouns = "|".join(COUNTED_NOUNS)
    for m in re.finditer(rf"(?<![\d.,\-\[])\b1 ({nouns})s\b", page.text):
        problems.append(f"'{m.group(0)}': one, in the plural")
    for m in re.finditer(rf"(?<![\d.,\-\[])\b(?:[02-9]|\d{{2,}}) ({nouns})(?=[.,;:)])", page.text):
        problems.append(f"'{m.group(0)}': a count, in the singular")
    verbs = "|".join(DIRECTION_VERBS)
    for m in re.finditer(rf"\b({verbs})\b[^.;:]{{0,60}}?\bfrom (-?\d[\d,]*(?:\.\d+)?)\S*? [^.;:]{{0,40}}?"
                         rf"\bto (-?\d[\d,]*(?:\.\d+)?)", page.text):
        a, b = _number(m.group(2)), _number(m.group(3))
        if a != b and (b - a) * DIRECTION_VERBS[m.group(1)] < 0:
            problems.append(f"'{m.group(0)}': the numbers go the other way")
    for path in machine_paths(page.text + "\n" + page.outputs):
        problems.append(f"machine path {path!r} (print it relative to its root)")
    for block in page.outputs.split("\n\n"):
        if block.strip().startswith("[markdown]") and re.search(r"^\s*\|.*\|\s*$", block, flags=re.M):
            problems.append("a markdown table in an output (the book renders outputs as CommonMark: raw pipes); "
                            "display a DataFrame")
    if budget is not None and words(page.prose) > budget:
        problems.append(f"{words(page.prose)} words of prose (budget {budget})")
    return problems


def budget(entry: str) -> int | None:
    """The word budget of a main-part page (None for the concepts and teaching pages)."""
    if entry in BUDGETS:
        return BUDGETS[entry]
    return CHAPTER_BUDGET if entry.startswith("chapters/") else None
