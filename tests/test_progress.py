"""Progress lines: estimates of the rest, and the relay that carries a notebook kernel's
progress (drafter k of n, shard k of n) into the study's log."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest

from activation_wave.core import progress as P


@pytest.fixture(autouse=True)
def no_open_bars():
    """Each test starts with no running bar of this process (a bar a test left open would be the
    parent of the next test's bars and take their parts)."""
    P._OPEN.clear()
    yield
    P._OPEN.clear()


def test_lines_carry_the_elapsed_time_and_an_estimate_of_the_rest(monkeypatch):
    clock = iter([100.0, 130.0, 160.0])
    monkeypatch.setattr(P, "_now", lambda: next(clock))
    out = io.StringIO()
    bar = P.LineProgress(total=4, desc="training drafters", unit="drafter", every=0.25, file=out)
    bar.update()  # 30 s for 1 of 4: about 90 s left
    bar.update()
    bar.close()
    assert out.getvalue().splitlines() == ["[training drafters] 1/4 drafter (25%), 30 s, ~90 s left",
                                           "[training drafters] 2/4 drafter (50%), 60 s, ~60 s left"]


def test_steps_resumed_from_a_cache_are_left_out_of_the_estimate(monkeypatch):
    """A capture resumed at shard 20 of 32: the estimate rests on the shards computed now."""
    now = [0.0]
    monkeypatch.setattr(P, "_now", lambda: now[0])
    out = io.StringIO()
    bar = P.LineProgress(total=8, desc="capture", unit="shard", every=0.25, file=out)
    for _ in range(4):  # four shards read back in one second
        now[0] += 0.25
        bar.update()
        bar.resumed()
    for _ in range(2):  # two computed, 100 s each: 2 left, about 200 s (the reads add 1 s)
        now[0] += 100.0
        bar.update()
    assert out.getvalue().splitlines()[-1] == "[capture] 6/8 shard (75%), 201 s, ~201 s left"  # not ~67 s
    later = P.LineProgress(total=10, initial=6, desc="responses", every=0.1, file=io.StringIO())
    assert later.free == 6  # steps done before the bar started are free too


def test_a_slow_step_can_announce_its_first_line():
    """Drafters trained in workers: the log says at once that training started, 0 of n."""
    out = io.StringIO()
    bar = P.LineProgress(total=7, desc="training drafters", unit="drafter", file=out)
    bar.announce()
    bar.close()
    assert out.getvalue().splitlines()[0].startswith("[training drafters] 0/7 drafter (0%), 0 s")


CHILD = textwrap.dedent("""
    from activation_wave.core.progress import progress_bar
    outer = progress_bar(total=3, desc="training drafters", unit="drafter", disable=True)
    for k in range(3):
        inner = progress_bar(total=5, desc="draft [1, 2]", unit="batch", disable=True)  # inside outer's step
        for _ in range(5):
            inner.update()
        inner.close()
        outer.update()
    outer.close()
    shards = progress_bar(range(2), desc="capture", unit="shard", disable=True)
    for _ in shards:
        pass
""")


def test_relay_prints_a_child_process_progress_into_the_log():
    log = io.StringIO()
    before = os.environ.get(P.RELAY_ENV)
    with P.relay("[study] 06_eagle3_speedup", file=log, interval=0.05, enabled=True) as path:
        assert os.environ[P.RELAY_ENV] == str(path)
        subprocess.run([sys.executable, "-c", CHILD], check=True, env=os.environ.copy())  # a notebook's kernel
    lines = log.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "[study] 06_eagle3_speedup: [training drafters] 1/3 drafter (33%)",
        "[study] 06_eagle3_speedup: [training drafters] 2/3 drafter (67%)",
        "[study] 06_eagle3_speedup: [training drafters] 3/3 drafter (100%)",
        "[study] 06_eagle3_speedup: [capture] 1/2 shard (50%)",
        "[study] 06_eagle3_speedup: [capture] 2/2 shard (100%)"]  # the inner per-batch bars stay silent
    assert "s left" in lines[0]
    assert os.environ.get(P.RELAY_ENV) == before and not path.exists()


def test_relay_is_off_on_a_terminal_and_in_worker_processes(monkeypatch):
    with P.relay("[study] x", enabled=False) as path:
        assert path is None and P.RELAY_ENV not in os.environ
    monkeypatch.setenv(P.RELAY_ENV, "/nonexistent/relay.log")
    P.silence_relay()
    assert P.RELAY_ENV not in os.environ


def test_a_relayed_bar_writes_between_shares_when_a_step_takes_long(tmp_path, monkeypatch):
    relay = tmp_path / "relay.log"
    monkeypatch.setenv(P.RELAY_ENV, str(relay))
    clock = iter([0.0, 61.0, 61.0, 61.0, 62.0])  # start; step 1 (check, line, stamp); step 2 (check)
    monkeypatch.setattr(P, "_now", lambda: next(clock))
    bar = P.progress_bar(total=100, desc="scoring drafters", unit="drafter", disable=True)
    bar.update()  # 1%: no new 10% share, but a minute has passed
    bar.update()  # one second later: nothing
    bar.close()
    assert relay.read_text().splitlines() == ["[scoring drafters] 1/100 drafter (1%), 61 s, ~6039 s left"]


def test_a_plain_log_gets_a_line_per_slow_step(monkeypatch):
    """Outside a study (``wave bench > log``): a step that takes over a minute prints its line
    even when it completes no new 10% share; quick steps between shares print nothing."""
    monkeypatch.delenv(P.RELAY_ENV, raising=False)
    clock = iter([0.0, 1800.0, 1800.0, 1810.0, 3600.0, 3600.0])  # start; step 1 (check, line); step 2; step 3
    monkeypatch.setattr(P, "_now", lambda: next(clock))
    out = io.StringIO()
    bar = P.LineProgress(total=40, desc="training drafters", unit="drafter", file=out)
    bar.update()  # half an hour for 1 of 40 (2.5%): a line
    bar.update()  # ten seconds later: nothing
    bar.update()  # another half hour: a line
    bar.close()
    assert [line.split(",")[0] for line in out.getvalue().splitlines()] == [
        "[training drafters] 1/40 drafter (2%)", "[training drafters] 3/40 drafter (8%)"]


def test_the_study_relays_while_a_notebook_runs(tmp_path, monkeypatch, capsys):
    """``wave study`` executes each notebook inside :func:`relay`: what the kernel writes to
    the relay file reaches the study's stderr, prefixed with the notebook's name."""
    import nbformat
    import papermill as pm

    from activation_wave.study import runner as study

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))  # stderr is not a terminal under pytest

    def fake_execute(nb, out, **kw):
        with open(os.environ[P.RELAY_ENV], "a") as fh:  # what the kernel's progress bar does
            fh.write("[training drafters] 35/70 drafter (50%), 1500 s, ~1500 s left\n")
        nbformat.write(nbformat.v4.new_notebook(), out)

    monkeypatch.setattr(pm, "execute_notebook", fake_execute)
    assert study.run_study("smoke", book_dir=tmp_path / "b" / "book", only=["09"], build=False) == 0
    err = capsys.readouterr().err
    assert "[study] 09_performance: [training drafters] 35/70 drafter (50%), 1500 s, ~1500 s left" in err


def test_online_decoding_reaches_the_relay_without_a_visible_bar(tmp_path, monkeypatch):
    """Chapter 6's online runs (prompt by prompt, every method) report through the relay even
    when the caller asked for no bar, so ``wave study`` does not sit silent for half an hour."""
    from activation_wave.decode.timing import run_interleaved
    from activation_wave.decode.rounds import summarise

    relay = tmp_path / "relay.log"
    monkeypatch.setenv(P.RELAY_ENV, str(relay))

    def method(ids, adjust):
        return summarise("plain-loop", 0.0, 0, [{"token_ids": list(ids), "wall_s": 0.1, "rounds": 2}], [], [], [])

    run_interleaved({"plain": method}, [(f"q{i}", [1, 2]) for i in range(10)])
    lines = relay.read_text().splitlines()
    assert lines and lines[-1].startswith("[decoding] 10/10 prompt (100%)")


def _heartbeat(release_after: float, **kw):
    """Two stand-in drafters that finish after ``release_after`` s, waited for with a 20 ms
    heartbeat (``kw`` to ``completed_with_heartbeat``): (the log, the futures, what it handed back)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from activation_wave.draft.experiment import completed_with_heartbeat

    out = io.StringIO()
    bar = P.LineProgress(total=2, desc="training drafters", unit="drafter", file=out)
    release = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(release.wait, 5) for _ in range(2)]
        threading.Timer(release_after, release.set).start()
        got = list(completed_with_heartbeat(futures, bar, every=0.02, **kw))
    bar.close()
    return out.getvalue(), futures, got


def test_a_long_wait_for_workers_prints_a_heartbeat():
    """While no drafter finishes, the log gets the bar's line every few minutes (here 20 ms),
    and every future is still handed back once."""
    out, futures, got = _heartbeat(release_after=0.2)
    assert sorted(map(id, got)) == sorted(map(id, futures))
    beats = out.splitlines()
    assert len(beats) >= 3 and all(b.startswith("[training drafters] 0/2 drafter") for b in beats)
    from concurrent.futures import ThreadPoolExecutor

    from activation_wave.draft.experiment import completed_with_heartbeat

    with ThreadPoolExecutor(1) as pool:  # no bar (progress off): the futures alone
        assert [f.result() for f in completed_with_heartbeat([pool.submit(sum, [1, 2])], None, every=0.01)] == [3]


def test_a_drafter_trained_in_this_process_shows_its_own_progress(monkeypatch, tmp_path):
    """One drafter (or one worker) trains in the study's process: its batch bar is asked for
    when the caller wants progress, so a 40-minute drafter does not leave the log silent."""
    from activation_wave.draft import experiment as X

    asked = []
    monkeypatch.setattr(X, "is_trained", lambda cache, ids, c: False)
    monkeypatch.setattr(X, "drafter_dir", lambda cache, ids, c: tmp_path / "-".join(map(str, ids)))
    monkeypatch.setattr(X, "train_or_load", lambda target, cache, ids, c, progress=False: (asked.append(progress), (None, {}))[1])
    X._train_missing(None, None, [([2, 4], None)], 1, True)
    X._train_missing(None, None, [([2, 4], None)], 1, False)
    assert asked == [True, False]


def test_a_relayed_line_carries_the_drafter_training_inside_it(tmp_path, monkeypatch):
    """Under the study's relay, "training drafters" advances only when a drafter is done; the
    drafter's own batch bar inside it puts its count on that line, relayed once a minute."""
    now = [0.0]
    monkeypatch.setattr(P, "_now", lambda: now[0])
    relay = tmp_path / "relay.log"
    outer = P.LineProgress(total=2, desc="training drafters", unit="drafter", quiet=True, relay=relay)
    inner = P.LineProgress(total=400, desc="draft [2, 15, 27]", unit="batch", quiet=True, relay=relay)
    assert inner.relay is None and inner.parent is outer  # the outer bar relays, carrying the inner's count
    for step in range(1, 101):
        now[0] = 1.0 * step
        inner.update()
    lines = relay.read_text().splitlines()
    assert lines == ["[training drafters] 0/2 drafter (0%), 60 s; draft [2, 15, 27] 60/400 batch (15%, ~340 s left)"]
    inner.close()
    assert outer.parts == {} and "batch" not in outer.line()
    outer.close()


def test_drafters_in_workers_report_their_batches_through_part_files(tmp_path):
    """A worker's bar (here another process, with PART_ENV set as _train_in_worker sets it)
    writes its count; the parent reads every running job's part and forgets finished ones."""
    with P.PartFiles() as board:
        code = textwrap.dedent("""
            import os, sys
            from activation_wave.core import progress
            from activation_wave.core.progress import progress_bar
            progress.PART_EVERY_S = 0.0  # every step written (a real one: at most once a second)
            bar = progress_bar(total=50, desc="draft [1, 2, 3]", unit="batch", disable=True)
            for _ in range(20):
                bar.update()
            sys.stdout.write(type(bar).__name__)
        """)
        env = {**os.environ, **board.env(0), "PYTHONPATH": os.pathsep.join(sys.path)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout == "LineProgress" and out.stderr == ""  # silent on stderr: the worker's bar is not shown
        parts = board.parts()
        assert list(parts) == ["0"] and parts["0"].startswith("draft [1, 2, 3] 20/50 batch (40%")
        board.done(0)
        assert board.parts() == {}
    assert not board.folder.exists()


def test_the_workers_heartbeat_names_each_drafters_progress():
    """The heartbeat while drafters train in workers: the count of whole drafters and, after it,
    each running drafter's batches (read from its part file)."""
    class Board:
        def parts(self):
            return {"0": "draft [2, 15, 27] 212/430 batch (49%, ~555 s left)",
                    "1": "draft [7, 27, 29] 190/430 batch (44%, ~680 s left)"}

    out, _, _ = _heartbeat(release_after=0.1, parts=Board())
    beat = out.splitlines()[0]
    assert beat.startswith("[training drafters] 0/2 drafter (0%), ")
    assert beat.endswith("; draft [2, 15, 27] 212/430 batch (49%, ~555 s left); draft [7, 27, 29] 190/430 batch "
                         "(44%, ~680 s left)")
