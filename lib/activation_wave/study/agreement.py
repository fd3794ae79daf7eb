"""Does every page say what the findings record says? The checks behind
``tests/test_findings_guard.py``.

A page quotes a registered test in two ways: glued values (``f_<name>_<field>`` beside
``f_<name>_key``, :func:`activation_wave.study.findings.glued`) and sentences that name a test
id with a verdict word. :func:`glue_problems` compares every glued value with the record it
names; :func:`text_problems` reads the page as a reader does and fails a sentence whose verdict
word differs from every record of the test it names, or a "supported" beside an interval that
includes no effect; :func:`glue_name_problems` fails a value glued twice (the second would win
silently) or a ``{glue:text}`` name the notebook never glued.

>>> from activation_wave.study.findings import Finding, Findings
>>> F = Findings((Finding("H2", "H2", None, "c", "higher", None, "within noise", None, -0.5, -0.9, 0.2, 0.0, 10,
...     "triples", None, None, None, None, None, "", "", "", ""),))
>>> text_problems("Over the triples H2 is supported.", F)
["'Over the triples H2 is supported.': H2 reads 'supported', its record 'within noise'"]
>>> text_problems("The set is supported: +0.003 [-0.007, +0.013].", F)
["'The set is supported: +0.003 [-0.007, +0.013].': 'supported' beside [-0.007, +0.013], which includes no effect"]
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from activation_wave.study.findings import Findings, quoted

#: A registered test's id as a page names it ("H5c", "H5/combined" reads as H5).
TEST_ID = re.compile(r"\b([HGRC]\d)(c?)\b")
#: The verdict words, longest first so that "not supported" is not read as "supported".
_WORD = re.compile(r"\b(not supported|not testable|within noise|supported)\b")
#: An interval as pages print it: "[-0.007, +0.013]", "[0.96, 1.55]" (a "x" before it: a ratio).
INTERVAL = re.compile(r"(x\s*)?[\[(]\s*([+-]?\d+(?:\.\d+)?)\s*(?:,|to)\s*([+-]?\d+(?:\.\d+)?)\s*[\])]")


def _literal(plain: str) -> Any:
    try:
        return ast.literal_eval(plain)
    except (ValueError, SyntaxError):
        return plain


def glue_problems(nb: dict[str, Any], f: Findings) -> list[str]:
    """Glued record fields that differ from the record their ``f_<name>_key`` names."""
    from activation_wave.study.pages import glued

    g = {k: _literal(v) for k, v in glued(nb).items()}
    out = []
    for name, key in g.items():
        if not (name.startswith("f_") and name.endswith("_key")):
            continue
        prefix = name[: -len("_key")]
        want = quoted(f.get(str(key)))
        for field, value in want.items():
            got = g.get(f"{prefix}_{field}")
            if got is not None and str(got) != value:
                out.append(f"{prefix}_{field} = {got!r}, the record {key} says {value!r}")
    return out


def glue_name_problems(nb: dict[str, Any]) -> list[str]:
    """Names glued more than once, and ``{glue:text}`` names the notebook never glued."""
    names = Counter()
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook")
            if meta:
                names[meta["name"]] += 1
    out = [f"{n!r} glued {c} times (the last one wins silently)" for n, c in names.items() if c > 1]
    used = {m.group(1) for c in nb["cells"] if c["cell_type"] == "markdown"
            for m in re.finditer(r"\{glue(?::text|:md|:figure)?\}`([^`:]+)", "".join(c["source"]))}
    used |= {m.group(1) for c in nb["cells"] if c["cell_type"] == "markdown"
             for m in re.finditer(r"```\{glue:figure\}\s+(\S+)", "".join(c["source"]))}
    out += [f"{n!r} is used by the markdown but never glued" for n in sorted(used - set(names))]
    return out


def _pieces(text: str) -> Iterable[str]:
    """Sentences and table rows: a table row is one statement."""
    from activation_wave.study.pages import sentences

    for line in text.splitlines():
        if line.strip().startswith("|"):
            yield line.strip()
    yield from sentences("\n".join(l for l in text.splitlines() if not l.strip().startswith("|")))


def text_problems(text: str, f: Findings) -> list[str]:
    """Sentences (and table rows) whose verdict word disagrees with the record of the one test
    they name, and any "supported" (not "not supported") beside an interval that includes the
    value of no effect (0, or 1 for a speed ratio, written with an "x")."""
    out = []
    for s in _pieces(text):
        words = _WORD.findall(s)
        if not words:
            continue
        ids = {a + b for a, b in TEST_ID.findall(s)}
        known = {t.id for t in f.tests} or {r.test for r in f.records}
        ids &= known
        if len(ids) == 1:
            (tid,) = ids
            valid = {r.word for r in f.of(tid)} or {"not testable"}
            if "seed" in s:  # the seed-sensitivity analysis's word, which the record carries beside
                valid |= {r.seeds for r in f.of(tid) if r.seeds}
            wrong = [w for w in words if w not in valid]
            if wrong:
                out.append(f"{s!r}: {tid} reads {wrong[0]!r}, its record {' / '.join(sorted(valid))!r}")
        if "supported" in words:
            for m in INTERVAL.finditer(s):
                lo, hi = float(m.group(2)), float(m.group(3))
                null = 1.0 if m.group(1) or (lo > 0.3 and hi > 0.3) else 0.0
                if lo <= null <= hi:
                    out.append(f"{s!r}: 'supported' beside [{m.group(2)}, {m.group(3)}], which includes no effect")
    return out


def page_problems(path: Path, f: Findings) -> list[str]:
    """Every disagreement of one page (executed notebook or markdown) with the record."""
    from activation_wave.study.pages import reader_text

    out = text_problems(reader_text(path).text, f)
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        out += glue_problems(nb, f) + glue_name_problems(nb)
    return out

