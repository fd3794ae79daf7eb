"""A chapter's study key covers the library modules it imports, transitively, and no others."""

from __future__ import annotations

from pathlib import Path

from activation_wave.study.keys import chapter_key, used_modules


def _package(root: Path) -> Path:
    """pkg: a -> (relative) b -> (absolute, inside a function) d; c alone; a profile yaml."""
    lib = root / "pkg"
    (lib / "sub").mkdir(parents=True)
    files = {
        "__init__.py": '"""pkg."""\n',
        "a.py": "from .b import f\n",
        "b.py": "def f():\n    from pkg.sub import d\n    return d\n",
        "c.py": "X = 1\n",
        "sub/__init__.py": "",
        "sub/d.py": "from ..c import X\n",
        "unused.py": "Y = 2\n",
        "profiles.yaml": "k: 1\n",
    }
    for name, text in files.items():
        (lib / name).write_text(text)
    return lib


def test_used_modules_follows_relative_absolute_and_lazy_imports(tmp_path):
    lib = _package(tmp_path)
    nb = tmp_path / "nb.py"
    nb.write_text("# %%\nfrom pkg.a import f\nimport numpy\n")
    used = {p.relative_to(lib).as_posix() for p in used_modules(nb, lib, "pkg")}
    assert used == {"__init__.py", "a.py", "b.py", "sub/__init__.py", "sub/d.py", "c.py"}


def test_a_module_used_by_one_notebook_changes_only_that_notebooks_key(tmp_path):
    lib = _package(tmp_path)
    nb_a, nb_c = tmp_path / "nb_a.py", tmp_path / "nb_c.py"
    nb_a.write_text("from pkg import a\n")
    nb_c.write_text("import pkg.c\n")
    params = {"profile": "smoke"}
    before = chapter_key(nb_a, params, lib, "pkg"), chapter_key(nb_c, params, lib, "pkg")
    (lib / "b.py").write_text("def f():\n    return 2\n")  # only nb_a reaches b
    after = chapter_key(nb_a, params, lib, "pkg"), chapter_key(nb_c, params, lib, "pkg")
    assert after[0] != before[0] and after[1] == before[1]
    (lib / "unused.py").write_text("Y = 3\n")  # nobody imports it
    assert (chapter_key(nb_a, params, lib, "pkg"), chapter_key(nb_c, params, lib, "pkg")) == after
    (lib / "c.py").write_text("X = 2\n")  # nb_c imports c; nb_a no longer reaches it (b dropped its import)
    assert chapter_key(nb_c, params, lib, "pkg") != after[1] and chapter_key(nb_a, params, lib, "pkg") == after[0]


def test_key_changes_with_parameters_notebook_and_profiles(tmp_path):
    lib = _package(tmp_path)
    nb = tmp_path / "nb.py"
    nb.write_text("import pkg.c\n")
    key = chapter_key(nb, {"profile": "smoke"}, lib, "pkg")
    assert chapter_key(nb, {"profile": "default"}, lib, "pkg") != key
    (lib / "profiles.yaml").write_text("k: 2\n")
    key2 = chapter_key(nb, {"profile": "smoke"}, lib, "pkg")
    assert key2 != key
    nb.write_text("import pkg.c  # edited\n")
    assert chapter_key(nb, {"profile": "smoke"}, lib, "pkg") != key2


def test_decoding_modules_are_not_in_the_analysis_chapters_keys():
    """The real study: chapters 1-5 do not import the decoding code, chapters 6 does."""
    from activation_wave.study.keys import LIB_DIR
    from activation_wave.study.notebooks import NOTEBOOK_DIR

    decoding = {f"decode/{m}.py" for m in ("speculative", "rounds", "baselines", "kernels", "offline", "timing")}
    for stem in ("01_layer_entropy", "02_concat_entropy", "03_cka_compartments", "05_layer_selection"):
        used = {p.relative_to(LIB_DIR).as_posix() for p in used_modules(NOTEBOOK_DIR / f"{stem}.py")}
        assert not used & decoding, (stem, used & decoding)
    used6 = {p.relative_to(LIB_DIR).as_posix() for p in used_modules(NOTEBOOK_DIR / "06_eagle3_speedup.py")}
    assert decoding <= used6


def test_timings_keep_each_notebooks_longest_run(tmp_path):
    """A warm rerun updates the last time but never the longest (the cold-cache cost)."""
    import json

    from activation_wave.study.runner import _record_timings

    _record_timings(tmp_path, "default", None, {"06": 4000.0, "07": 60.0}, 4060.0)
    _record_timings(tmp_path, "default", None, {"06": 900.0}, 900.0)
    doc = json.loads((tmp_path / "default" / "timings.json").read_text())
    assert doc["notebooks"] == {"06": 900.0, "07": 60.0}
    assert {k: v["seconds"] for k, v in doc["longest"].items()} == {"06": 4000.0, "07": 60.0}
    assert doc["last_run"]["executed"] == ["06"] and doc["last_run"]["seconds"] == 900.0


def test_only_a_chapter_that_reads_the_benchmarks_file_is_keyed_on_it(tmp_path):
    lib = _package(tmp_path)
    (lib / "reader.py").write_text("def page():\n    from pkg.results import load_benchmarks\n    return load_benchmarks()\n")
    bench = tmp_path / "benchmarks.json"
    bench.write_text('{"a": 1}\n')
    reader, other = tmp_path / "reader_nb.py", tmp_path / "other_nb.py"
    reader.write_text("from pkg.reader import page\n")  # reads it through a library module
    other.write_text("import pkg.c\n")
    params = {"profile": "smoke"}
    keys = lambda: (chapter_key(reader, params, lib, "pkg", bench), chapter_key(other, params, lib, "pkg", bench))  # noqa: E731
    before = keys()
    bench.write_text('{"a": 2}\n')  # `wave bench` re-measured an entry
    after = keys()
    assert after[0] != before[0] and after[1] == before[1]
    bench.unlink()  # a missing file is a key of its own, not an error
    assert keys()[0] not in (before[0], after[0])


def test_the_real_chapters_that_read_the_benchmarks_file_are_keyed_on_it():
    from activation_wave.core.paths import REPO_ROOT
    from activation_wave.study.keys import reads_benchmarks
    nbs = REPO_ROOT / "notebooks"
    readers = {nb.stem for nb in nbs.glob("*.py") if reads_benchmarks(nb)}
    assert {"08_results_summary", "09_performance", "11_cpu_payoff", "intro"} <= readers
    assert not readers & {"01_layer_entropy", "02_concat_entropy", "03_cka_compartments"}
