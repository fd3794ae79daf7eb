"""What a reader of the book sees on a page, and the checks that page must pass.

:func:`reader_text` turns a page (an executed chapter notebook or a markdown page) into
the text a reader sees: the markdown with every ``{glue:text}`` replaced by its glued
value, roles reduced to their words, math and code kept apart. :func:`page_problems`
lists what a reader should never meet there: words of the lab record (amendments,
stages, ledger keys, commit hashes, column names), stale placeholders, ``from 1.0 to
1.0``, control characters, repeated words, sentences over :data:`MAX_SENTENCE` words,
a page over its word budget, and chapter numbers typed into prose. The test suite runs
it over every page of the book's main parts (``tests/test_book_guards.py``).

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
BUDGETS = {"chapters/intro": 700, "chapters/11_cpu_payoff": 2500}
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
    code spans and the "Try it" section."""

    prose: str
    text: str


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


def _inline(text: str, values: dict[str, str]) -> str:
    """Roles, links and math reduced to what a reader sees; code spans dropped."""
    text = re.sub(r"\{glue(?::text|:md)?\}`([^`:]+)(?::([^`]*))?`",
                  lambda m: _value(values.get(m.group(1), m.group(1)), m.group(2) or ""), text)
    text = re.sub(r"\{(?:term|doc|ref|numref|eq)\}`([^`<]*?)\s*<[^`]*>`", r"\1", text)
    text = re.sub(r"\{term\}`([^`]*)`", r"\1", text)
    text = re.sub(r"\{(?:doc|ref|numref|eq)\}`[^`]*`", "this page", text)
    text = re.sub(r"\{cite(?::\w+)?\}`[^`]*`", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\$\$.*?\$\$", " x ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", "X", text)  # a formula reads as one word
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"<\|[^|\s]*\|>", "<token>", text)  # a special token's text, e.g. <|im_start|>
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


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
                prose.append(_inline(m.group(3), values))
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
        read = _inline(line, values)
        text.append(read)
        if kind == "prose" and not s.startswith("|"):
            prose.append(read)
    return PageText(prose="\n".join(prose), text="\n".join(text))


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
    if budget is not None and words(page.prose) > budget:
        problems.append(f"{words(page.prose)} words of prose (budget {budget})")
    return problems


def budget(entry: str) -> int | None:
    """The word budget of a main-part page (None for the concepts and teaching pages)."""
    if entry in BUDGETS:
        return BUDGETS[entry]
    return CHAPTER_BUDGET if entry.startswith("chapters/") else None
