"""Where `wave study` writes (issue 28, items 9 and 13): only the default profile on its own
model writes into the committed book; another model gets its own scratch folder; naming the
committed book for such a run is refused; a bad config (``--set`` included) stops the run
before anything is copied or written."""

from __future__ import annotations

import pytest
import yaml

import activation_wave.study.runner as study
from activation_wave import cli
from activation_wave.core.config import ConfigError


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    """A stand-in repository: the book and config files that a scratch copy is made from."""
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    (tmp_path / "book" / "intro.md").write_text("# x\n")
    (tmp_path / "book" / "chapters" / "01.ipynb").write_text("{}")
    for name in ("_config.yml", "_toc.yml"):
        (tmp_path / name).write_text("")
    monkeypatch.setattr(study, "REPO_ROOT", tmp_path)
    return tmp_path


def test_the_committed_book_is_the_default_profile_on_its_own_model(repo):
    assert study.prepare_book_dir("default", None) == (repo / "book", repo / "data" / "results")
    assert study.prepare_book_dir("default", None, "smollm2-135m") == (repo / "book", repo / "data" / "results")
    assert not (repo / "scratch").exists()


def test_another_model_on_the_default_profile_gets_its_own_folder(repo):
    book, results = study.prepare_book_dir("default", None, "gemma3-270m")
    assert book == repo / "scratch" / "default-gemma3-270m" / "book"
    assert results == repo / "scratch" / "default-gemma3-270m" / "results"
    assert (book / "intro.md").exists() and not (book / "chapters" / "01.ipynb").exists()
    assert not (repo / "scratch" / "default").exists()
    # a hub id or a path is named by its last part, as the results folders name it
    assert study.run_folder("default", "meta-llama/Llama-3.1-8B-Instruct") == \
        repo / "scratch" / "default-Llama-3.1-8B-Instruct"
    # smoke on its own model keeps its folder; on another model it gets its own
    assert study.run_folder("smoke", None) == repo / "scratch" / "smoke"
    assert study.run_folder("smoke", "gemma3-270m") == repo / "scratch" / "smoke-gemma3-270m"


def test_naming_the_committed_book_for_another_run_is_refused(repo):
    for profile, model in (("default", "gemma3-270m"), ("smoke", None)):
        with pytest.raises(ConfigError, match="would overwrite its pages: leave --book-dir out"):
            study.prepare_book_dir(profile, repo / "book", model)
    assert study.prepare_book_dir("default", repo / "book") == (repo / "book", repo / "data" / "results")


def test_a_bad_set_stops_the_study_before_anything_is_written(repo, tmp_path_factory):
    with pytest.raises(ConfigError, match="batch_size"):
        study.run_study("smoke", overrides={"capture.batch_size": "0"}, build=False)
    with pytest.raises(ConfigError):
        study.run_study("smoke", overrides={"capture.no_such_key": "1"}, build=False)
    other = tmp_path_factory.mktemp("elsewhere") / "b" / "book"
    with pytest.raises(ConfigError):
        study.run_study("default", model="gemma3-270m", book_dir=other, overrides={"draft.epochs": "-1"}, build=False)
    assert not (repo / "scratch").exists() and not other.parent.exists()


def test_the_cli_reports_a_bad_set_in_one_line_and_leaves_no_files(repo, capsys):
    code = cli.main(["study", "--profile", "smoke", "--set", "capture.batch_size=0", "--no-build"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "batch_size" in err[0]
    assert not (repo / "scratch").exists()


def test_a_run_without_the_third_architecture_drops_its_pages_from_the_toc(tmp_path):
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: chapters/intro\nparts:\n"
                   "  - caption: Study\n    chapters:\n      - file: chapters/01_layer_entropy\n"
                   "      - file: chapters/07_gemma\n      - file: chapters/07b_qwen\n"
                   "  - caption: Second architecture\n    chapters:\n      - file: chapters/second/01_layer_entropy\n"
                   "  - caption: Third architecture\n    chapters:\n      - file: chapters/third/01_layer_entropy\n"
                   "        title: Third\n      - file: chapters/third/05_layer_selection\n")
    study.drop_toc_folders(toc, ["third"])
    doc = yaml.safe_load(toc.read_text())
    assert [p["caption"] for p in doc["parts"]] == ["Study", "Second architecture"]
    # the page comparing the third architecture with the study's model goes with it
    assert [c["file"] for c in doc["parts"][0]["chapters"]] == ["chapters/01_layer_entropy", "chapters/07_gemma"]
    assert doc["root"] == "chapters/intro" and doc["format"] == "jb-book"
    study.drop_toc_folders(toc, [])  # nothing to drop: the file is left as it is
    assert yaml.safe_load(toc.read_text()) == doc


def test_the_time_left_comes_from_the_longest_recorded_runs():
    """`wave study` prints an estimate at the start and after every notebook: the sum of the
    notebooks' longest recorded times, and the names of those never timed."""
    import doctest

    from activation_wave.study import runner

    assert doctest.testmod(runner).failed == 0
    doc = {"longest": {"a": {"seconds": 30.0}}}
    assert runner.remaining_text(["a"], doc) == "1 notebook, at most about 1 min (their longest recorded runs, cold caches)"
    assert runner.remaining_text(["new"], doc) == "1 notebook; no record for new"
    assert runner.remaining_text(["a"], {}) == "1 notebook; no record for a"
    many = [f"n{i}" for i in range(17)]  # a cold smoke results root: counted past the first few
    assert runner.remaining_text(many, {}) == "17 notebooks; no record for n0, n1, n2 and 14 more"



def test_the_other_architecture_note_comes_from_editable_markdown_with_every_field_filled():
    from activation_wave.study.notebooks import NOTEBOOK_DIR, relocate_markdown
    from activation_wave.study.runner import _banner

    template = (NOTEBOOK_DIR / "_other_architecture.md").read_text(encoding="utf-8")
    note = _banner("gemma3-270m", "second", "smollm2-135m")
    assert note.startswith("```{note}") and "{model}" in template and "{" + "model}" not in note
    assert "**gemma3-270m**" in note and "{doc}`07_gemma`" in note and "smollm2-135m" in note
    # one folder deeper, the link to the comparison page gains ../
    assert "{doc}`../07_gemma`" in relocate_markdown(note, "second")
