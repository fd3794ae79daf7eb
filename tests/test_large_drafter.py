"""Issue 42's 1.5B drafter on the corpus (benchmarks/large_drafter.py) and how chapter 11 reads it."""

from __future__ import annotations

import dataclasses
import math

import pytest

from activation_wave.benchmarks import large_drafter as ld
from activation_wave.core.config import load_config
from activation_wave.draft.experiment import drafter_dir
from activation_wave.select.across_models import third_drafter_config
from activation_wave.study.chapters import cpu_payoff as cpu


class _Folder:
    def __init__(self, path):
        self.path = path


def test_the_recipe_is_the_registered_one_and_its_key_does_not_depend_on_the_machine(tmp_path):
    cfg = load_config("default")
    d = ld.drafter_config(third_drafter_config(cfg))
    assert (d.max_tokens, d.dtype, d.threads, d.batch_tokens, d.draft_vocab, d.ttt_steps, d.lr) == (
        1_000_000, "bf16", 2, 2048, 4096, 3, 0.003)
    assert d.ledger == "data/drafters" and d.train_records == 0 and d.seed == 0
    # draft.workers / draft.threads of the machine running it change the third drafters' threads, not this key
    busy = load_config("default", {"draft.workers": 1, "draft.threads": 1})
    folder = _Folder(tmp_path)
    assert drafter_dir(folder, [2, 14, 25], ld.drafter_config(third_drafter_config(busy))) == \
        drafter_dir(folder, [2, 14, 25], d)


def test_stages_continue_their_parent_and_stage_one_keeps_its_key(tmp_path):
    """Stage 1 is the second amendment's drafter (its committed ledger key); stage 2 (third
    amendment) restarts the recipe from it; stage 3 (fourth) continues it at lr 0.0003, constant."""
    dcfg = third_drafter_config(load_config("default"))
    folder = _Folder(tmp_path)
    one, two, three, four, *later = ld.stage_configs(dcfg, folder, [2, 14, 25])
    assert len(ld.stage_configs(dcfg, folder, [2, 14, 25], 1)) == 1 and 5 <= len(ld.STAGES) <= 8
    assert drafter_dir(folder, [2, 14, 25], one).name == "L2-14-25-1024f68829b4"  # data/drafters' entries
    assert drafter_dir(folder, [2, 14, 25], two).name == "L2-14-25-a16f61908529"
    assert one.init_from == "" and two.init_from == three.init_from == "L2-14-25-1024f68829b4"
    assert (two.seed, three.seed, two.max_tokens, three.max_tokens) == (1, 2, ld.STAGE_TOKENS, ld.STAGE_TOKENS)
    assert dataclasses.replace(two, seed=0, init_from="", max_tokens=ld.BUDGET) == one  # nothing else changes
    assert (three.lr, three.lr_schedule, two.lr, two.lr_schedule) == (3e-4, "constant", one.lr, "cosine")
    assert dataclasses.replace(three, seed=1, lr=one.lr, lr_schedule="cosine") == two
    assert [ld.lineage(k) for k in (1, 2, 3, 4)] == [[1], [1, 2], [1, 3], [1, 3, 4]]
    # stage 4 (fifth amendment) continues stage 3 at the probe's lr, seed 3
    assert four.init_from == drafter_dir(folder, [2, 14, 25], three).name and four.seed == 3
    assert dataclasses.replace(four, seed=2, init_from=three.init_from) == three
    # stages 5 to 8 (sixth amendment): each continues the one before, seed k - 1, nothing else changes
    for k, (parent, stage) in enumerate(zip([four, *later], later), start=5):
        assert stage.init_from == drafter_dir(folder, [2, 14, 25], parent).name and stage.seed == k - 1
        assert dataclasses.replace(stage, seed=3, init_from=four.init_from) == four
        assert ld.lineage(k) == [1, 3, *range(4, k + 1)]


def test_the_probe_continues_stage_three_at_each_lr_outside_the_ledger(tmp_path):
    """Fifth amendment: both probe drafters start from stage 3's weights, train one pass with the
    same seed (same batches), differ only in lr, and keep no ledger entry."""
    dcfg = third_drafter_config(load_config("default"))
    folder = _Folder(tmp_path)
    low, high = ld.probe_configs(dcfg, folder, [2, 14, 25])
    three = ld.stage_configs(dcfg, folder, [2, 14, 25])[2]
    assert low.init_from == high.init_from == drafter_dir(folder, [2, 14, 25], three).name
    assert (low.lr, high.lr, low.lr_schedule, low.ledger, low.max_tokens, low.seed) == (
        3e-4, 1e-3, "constant", "", ld.PROBE["tokens"], ld.PROBE["seed"])
    assert dataclasses.replace(high, lr=low.lr) == low
    from activation_wave.core.results import load_benchmarks

    probe = (load_benchmarks().get(ld.NAME) or {}).get("lr_probe")
    if probe:  # the committed probe's choice is the stage it chose for
        assert ld.STAGES[probe["from"]]["lr"] == probe["chosen"] and probe["lrs"] == list(ld.PROBE["lrs"])


def test_the_probe_takes_the_high_lr_only_when_its_loss_is_lower_beyond_noise():
    import numpy as np

    rng = np.random.default_rng(0)
    base = 4.0 + rng.normal(0, 0.3, 88)  # batches differ; the pairing removes that
    lower = ld.probe_verdict([base, base - 0.05 + rng.normal(0, 0.01, 88)])
    assert lower["chosen"] == 1e-3 and lower["batches"] == 44 and lower["delta_high_minus_low"]["hi"] < 0
    same = ld.probe_verdict([base, base + rng.normal(0, 0.01, 88)])
    assert same["chosen"] == 3e-4 and same["delta_high_minus_low"]["lo"] < 0 < same["delta_high_minus_low"]["hi"]
    assert ld.probe_verdict([base, base + 0.2])["chosen"] == 3e-4
    # the second half of the shorter pass, so a pass cut short still pairs batch by batch
    assert ld.probe_verdict([base[:80], base[:90] - 1.0])["batches"] == 40


def test_the_responses_come_from_llamacpp_on_the_corpus_one_request_per_server():
    g = ld.generation_config(third_drafter_config(load_config("default"))).data
    assert g.sources == ("corpus",) and g.engine == "llamacpp" and g.samples_per_prompt == 0
    assert (g.engine_slots, g.engine_servers, g.engine_threads) == (1, 2, 1)
    assert g.max_new_tokens == load_config("default").third.drafter_max_new_tokens


def test_a_profile_without_a_third_model_has_no_large_drafter():
    cfg = load_config("smoke")
    cfg = dataclasses.replace(cfg, third=dataclasses.replace(cfg.third, model=""))
    assert ld.trained(cfg) is None
    with pytest.raises(ValueError, match="third.model"):
        ld.run(cfg, progress=False)
    with pytest.raises(ValueError, match="third.model"):
        ld.run_indist(cfg, progress=False)


def _run(speedup: float, lo: float, hi: float, tau: float = 1.5) -> dict:
    return {"speedup": speedup, "speedup_ci": [lo, hi], "tau": tau, "prompts": 12, "identical_to_plain": 12,
            "tokens_per_s": 10.0}


def _sizes(corpus: dict | None) -> dict:
    run = {"threads": 2, "plain": {"tokens_per_s": 30.0}, "eagle3": _run(0.31, 0.30, 0.33, 1.05)}
    if corpus:
        run[cpu.LARGE_METHOD] = corpus
    return {"large": {"by_threads": {"2": run}, "model": "qwen2.5-coder-1.5b"}}


LARGE = {"figure": 1.62, "baseline": 1.0, "tau_ci": [1.5, 1.74], "layers": [2, 14, 25], "train_prompts": 1024,
         "budget_tokens": 1_000_000, "train_cpu_min": 90.0,
         "delta_vs_toy": {"mean": 0.62, "lo": 0.5, "hi": 0.74, "p": 0.0001, "n": 32}}


def test_c1_is_restated_for_the_corpus_drafter_by_the_same_rule():
    names = [h.name for h in cpu.evaluate_hypotheses(_sizes(None), None)]
    assert names == ["C1", "C2"]  # before the rerun: no row for it
    hs = {h.name: h for h in cpu.evaluate_hypotheses(_sizes(_run(0.45, 0.42, 0.48)), None)}
    assert hs["C1 (corpus drafter)"].supported is False and "0.450x [0.420, 0.480]" in hs["C1 (corpus drafter)"].statistic
    hs = {h.name: h for h in cpu.evaluate_hypotheses(_sizes(_run(1.2, 1.05, 1.3)), None)}
    assert hs["C1 (corpus drafter)"].supported is True
    assert hs["C1"].supported is False  # the toy drafter's verdict is untouched


def test_the_ceiling_figure_marks_each_drafters_measured_run_on_its_panel():
    from activation_wave.plots import plot_ceiling

    pts = cpu.measured_points(_sizes(_run(0.45, 0.42, 0.48, 1.23)))
    assert pts == [{"target": "1.5B", "threads": 2, "label": "drafter", "tau": 1.05, "speedup": 0.31},
                   {"target": "1.5B", "threads": 2, "label": "corpus drafter", "tau": 1.23, "speedup": 0.45}]
    assert cpu.today_taus(_sizes(_run(0.45, 0.42, 0.48, 1.23))) == {"1.5B drafter": 1.05, "1.5B corpus drafter": 1.23}
    rows = [{"target": t, "threads": 2, "variant": "f16", "depth": 3, "round measured": 3.5} for t in ("1.5B", "135M")]
    fig = plot_ceiling(rows, pts)
    marked = [[(c.get_label(), tuple(c.get_offsets()[0])) for c in ax.collections if c.get_label().startswith("measured")]
              for ax in fig.axes]
    assert marked == [[("measured: drafter", (1.05, 0.31)), ("measured: corpus drafter", (1.23, 0.45))], []]
    assert "measured: corpus drafter" in [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]


STAGES = [{"stage": 1, "from": None, "tokens": 1_000_000, "tau": 1.23, "tau_ci": [1.19, 1.30], "train_cpu_min": 78.1,
           "drafter": "d1"},
          {"stage": 2, "from": 1, "tokens": 2_000_000, "tau": 1.31, "tau_ci": [1.27, 1.36], "train_cpu_min": 156.0,
           "lr": 0.003, "lr_schedule": "cosine", "drafter": "d2"},
          {"stage": 3, "from": 2, "tokens": 3_000_000, "tau": 1.36, "tau_ci": [1.31, 1.41], "train_cpu_min": 234.0,
           "lr": 0.003, "lr_schedule": "cosine", "drafter": "d3"}]


def test_stages_are_read_as_a_curve_and_extrapolated_only_while_short():
    fit = cpu.stage_fit(STAGES)
    a, b = fit["a"], fit["b"]
    assert b == pytest.approx(0.0823, abs=1e-3) and fit["b_lo"] < b < fit["b_hi"] and cpu.stage_fit(STAGES[:1]) is None
    two = cpu.stage_fit(STAGES[:2])
    assert two["b"] == pytest.approx(0.08) and two["b_lo"] is None
    assert 1.5 == pytest.approx(two["a"] + two["b"] * math.log2(cpu.stage_reach(two)))  # where the line meets 1.5
    assert cpu.stage_reach(fit, fit["b_hi"]) < cpu.stage_reach(fit) and cpu.stage_reach(fit, -0.1) is None
    short = {**LARGE, "figure": 1.36, "budget_tokens": 3_000_000, "stage_tokens": 1_000_000, "stages": STAGES,
             "train_tokens": 169_033, "loss_tokens": 81_866}
    near, far = cpu.stage_reach(fit, fit["b_hi"]), cpu.stage_reach(fit, fit["b_lo"])
    stages, toy, target, fit = cpu.stage_curve(short)
    assert stages == [{**r, "on_line": True} for r in STAGES] and toy == 1.0 and target == 1.5 and fit["b"] == pytest.approx(b)
    reached = {**short, "figure": 1.52, "stages": [*STAGES[:2], {**STAGES[2], "tau": 1.52}]}
    flat = {**short, "stages": [STAGES[0], {**STAGES[1], "tau": 1.2}], "figure": 1.2}
    probe = {"from": 3, "tokens": 170_000, "lrs": [3e-4, 1e-3], "batches": 44, "loss_second_half": [12.3, 12.1],
             "delta_high_minus_low": {"mean": -0.2, "lo": -0.25, "hi": -0.15}, "chosen": 1e-3}
    # the constant-lr stages' pace (sixth amendment): mean paired gain, stages left at that mean
    steady = [STAGES[0], *({**r, "lr": 3e-4, "lr_schedule": "constant", "delta_vs_parent": {"mean": g, "lo": 0.01, "p": 0.01,
                                                                                            "hi": 0.1}}
                           for r, g in zip(STAGES[1:], (0.07, 0.05)))]
    pace = cpu.stage_pace(steady)
    assert pace["gain"] == pytest.approx(0.06) and pace["stages_left"] == 3  # (1.5 - 1.36) / 0.06 = 2.3
    assert cpu.stage_pace(STAGES) is None and cpu.stage_pace([*steady[:2], {**steady[2], "delta_vs_parent":
                                                                            {"mean": -0.2}}])["stages_left"] is None
    # a last gain whose interval reaches 0 stalls the reading: no count of stages is read from it
    stalled = [*steady[:2], {**steady[2], "delta_vs_parent": {"mean": 0.01, "lo": -0.02, "hi": 0.04, "p": 0.5}}]
    assert cpu.stage_pace(stalled)["stalled"] and cpu.stage_pace(stalled)["stages_left"] is None
    assert not cpu.stage_pace(steady)["stalled"]
    # an entry written before the stages: one point, the headline's
    (one,), *_ = cpu.stage_curve(LARGE)
    assert (one["tokens"], one["tau"]) == (1_000_000, 1.62)
    assert cpu.stage_curve(None) == ([], None, 1.5, None)


def test_the_stage_figure_draws_points_and_the_dashed_extrapolation():
    from activation_wave.plots import plot_drafter_stages

    fig = plot_drafter_stages(STAGES, 1.0, 1.5, cpu.stage_fit(STAGES))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["stage 1: 78 CPU-min", "stage 2: 156 CPU-min", "stage 3: 234 CPU-min"]
    dashed = [ln for ln in ax.lines if ln.get_linestyle() == "--" and len(ln.get_xdata()) > 2]
    assert dashed and dashed[0].get_ydata()[-1] == pytest.approx(1.5, abs=0.01)  # it stops at the target
    # a stage that neither moves right much nor up (a plateau) puts its label below its point, not on the last one
    flat = [*STAGES, {**STAGES[2], "stage": 4, "from": 3, "tokens": 4_000_000, "tau": 1.365, "drafter": "d4"}]
    offsets = [t.xyann[1] for t in plot_drafter_stages(flat, 1.0, 1.5, cpu.stage_fit(flat)).axes[0].texts]
    assert offsets == [4, 4, 4, -12]
    assert "not trained yet" in plot_drafter_stages([], None, 1.5).axes[0].texts[0].get_text()


def test_the_llamacpp_run_uses_as_many_stages_as_the_entry_of_its_model(monkeypatch):
    from activation_wave.core import results

    monkeypatch.setattr(results, "load_benchmarks", lambda: {ld.NAME: {"model": "m", "stages": STAGES}})
    assert ld._stages_run("m") == 3 and ld._stages_run("other") == 1
    monkeypatch.setattr(results, "load_benchmarks", lambda: {ld.NAME: {"model": "m"}})  # before the stages
    assert ld._stages_run("m") == 1
    monkeypatch.setattr(results, "load_benchmarks", dict)
    assert ld._stages_run("m") == 1


BRANCHED = [STAGES[0], {**STAGES[1], "tau": 1.18, "tau_ci": [1.14, 1.22], "train_cpu_min": 151.8},
            {**STAGES[2], "from": 1, "tokens": 2_000_000, "tau": 1.30, "tau_ci": [1.25, 1.35], "train_cpu_min": 156.0,
             "lr": 0.0003, "lr_schedule": "constant"}]


def test_a_stage_that_continues_an_earlier_one_is_read_along_its_own_line():
    """The fourth amendment: stage 3 continues stage 1, not stage 2; the fit and the figure
    follow stage 1 -> stage 3, and stage 2 is shown as spent."""
    large = {**LARGE, "figure": 1.30, "tau_ci": [1.25, 1.35], "budget_tokens": 2_000_000, "stage_tokens": 1_000_000,
             "stages": BRANCHED, "train_cpu_min": 156.0, "all_stages_cpu_min": 229.9, "drafter": "d3",
             "train_tokens": 169_033, "loss_tokens": 81_866}
    assert [r["stage"] for r in cpu.stage_lineage(BRANCHED)] == [1, 3] and cpu.stage_lineage([]) == []
    paired = {**large, "stages": [*BRANCHED[:2], {**BRANCHED[2], "delta_vs_parent": {"mean": 0.073, "lo": 0.048,
                                                                                    "hi": 0.108, "p": 0.0002, "n": 32}}]}
    stages, _, _, fit = cpu.stage_curve(large)
    assert fit["b"] == pytest.approx(0.07) and [r["on_line"] for r in stages] == [True, False, True]
    from activation_wave.plots import plot_drafter_stages

    ax = plot_drafter_stages(*cpu.stage_curve(large)).axes[0]
    joins = [tuple(ln.get_xdata()) for ln in ax.lines if ln.get_linestyle() == "-" and len(ln.get_xdata()) == 2]
    assert joins == [(1.0, 2.0), (1.0, 2.0)]  # stage 2 and stage 3 each join stage 1


INDIST = {"figure": 1.31, "baseline": 1.2265, "tau_ci": [1.27, 1.36], "toy": 1.0, "budget_tokens": 1_000_000,
          "train_records": 128, "train_tokens": 23_773, "train_cpu_min": 74.2, "verdict": "beat",
          "delta_vs_corpus": {"mean": 0.08, "lo": 0.05, "hi": 0.11, "p": 0.0002, "n": 32},
          "delta_vs_toy": {"mean": 0.31, "lo": 0.27, "hi": 0.35, "p": 0.0002, "n": 32}}


def test_the_in_distribution_drafter_is_judged_by_its_registered_rule_and_read_from_its_entry():
    """The eighth amendment: one paired test against stage 1, three verdicts, C1 kept unless 1.5."""
    from activation_wave.benchmarks import large_drafter as ld
    from activation_wave.benchmarks.suite import OPT_IN, entries

    assert ld.indist_verdict({"lo": 0.01, "hi": 0.2}) == "beat"
    assert ld.indist_verdict({"lo": -0.2, "hi": -0.01}) == "lose"
    assert ld.indist_verdict({"lo": -0.01, "hi": 0.2}) == "within noise"
    assert cpu.INDIST == ld.INDIST and ld.INDIST in OPT_IN and entries()[ld.INDIST] is ld.run_indist


def test_the_ninth_amendment_adds_every_other_train_prompt_of_the_sources_answered_like_the_corpus():
    """196 added prompts on the default profile: train split only, none a base or eval prompt of the
    third drafters, answered greedily by llama.cpp with the corpus responses' engine settings."""
    from activation_wave.benchmarks.suite import OPT_IN, entries
    from activation_wave.models.prompts import load_prompts

    dcfg = third_drafter_config(load_config("default"))
    added = ld.indist_prompts(dcfg)
    base = load_prompts(dcfg.data)
    assert len(added) == 196 and {p.split for p in added} == {"train"}
    assert not {p.id for p in added} & {p.id for p in base}
    assert len([p for p in base if p.split == "train"]) + len(added) == 324
    g = ld.indist_generation_config(dcfg).data
    assert g.sources == dcfg.data.sources and g.max_prompts_per_source == 0 and g.samples_per_prompt == 0
    assert (g.engine, g.engine_slots, g.engine_servers, g.engine_threads) == ("llamacpp", 1, 2, 1)
    assert g.max_new_tokens == dcfg.data.max_new_tokens
    assert ld.INDIST_ALL in OPT_IN and entries()[ld.INDIST_ALL] is ld.run_indist_all
    smoke = load_config("smoke")
    with pytest.raises(ValueError, match="third.model"):
        ld.run_indist_all(dataclasses.replace(smoke, third=dataclasses.replace(smoke.third, model="")), progress=False)


def test_the_in_distribution_entries_name_their_rival_under_their_own_keys(monkeypatch):
    """run_indist's rival is stage 1 (corpus_drafter, delta_vs_corpus); no generic key is left."""
    from types import SimpleNamespace

    import activation_wave.draft.experiment as experiment

    common = {"figure": 1.3, "rival_drafter": "capture/x/drafters/L2", "delta_vs_rival": {"mean": 0.1}}
    plan = {"dcfg": third_drafter_config(load_config("default")), "layers": (2, 14, 25),
            "cap": SimpleNamespace(cache=None)}
    monkeypatch.setattr(ld, "_plan", lambda cfg, progress: plan)
    monkeypatch.setattr(ld, "_committed_capture", lambda p: ([], None))
    monkeypatch.setattr(experiment, "drafter_dir", lambda *a: "stage1")
    monkeypatch.setattr(ld, "_indist_entry", lambda *a, **k: dict(common))
    out = ld.run_indist(load_config("default"), progress=False)
    assert out["corpus_drafter"] == "capture/x/drafters/L2" and out["delta_vs_corpus"] == {"mean": 0.1}
    assert not {"rival_drafter", "delta_vs_rival"} & set(out) and "eighth amendment" in out["pre_registration"]


def _scored_flow(monkeypatch, dcfg, figure: float, mean: float) -> dict:
    """The amendments' flow tests' common setup: ``_plan`` gives the third drafters' config ``dcfg``,
    the default triple, the capture "third" and 128 base train records; ``_indist_entry`` records its
    arguments in the returned dict and answers ``figure`` with a paired difference of ``mean``."""
    from types import SimpleNamespace

    seen: dict = {}

    def entry(cfg, plan, cap, rival, name, **k):
        seen.update(rival=rival, name=name, cap=cap, **k)
        return {"figure": figure, "rival_drafter": rival[1], "delta_vs_rival": {"mean": mean}}

    plan = {"dcfg": dcfg, "layers": (2, 14, 25), "cap": SimpleNamespace(cache="third"), "base_train": [0] * 128}
    monkeypatch.setattr(ld, "_plan", lambda cfg, progress: plan)
    monkeypatch.setattr(ld, "_indist_entry", entry)
    return seen


def test_the_continued_drafter_continues_the_ninth_and_names_its_parent(monkeypatch, tmp_path):
    """Eleventh amendment: the continued drafter starts from the ninth's folder in the same capture,
    at CONT_STAGE; its entry names the parent (primary test) and scores the eighth beside it."""
    from pathlib import PurePosixPath
    from types import SimpleNamespace

    import activation_wave.draft.experiment as experiment
    from activation_wave.benchmarks.suite import OPT_IN, entries

    dcfg = third_drafter_config(load_config("default"))
    cache = SimpleNamespace(path=tmp_path / "cap324", name="cap324")
    ninth = ld.drafter_config(dcfg)
    cont = ld.cont_config(dcfg, cache, (2, 14, 25))
    assert cont.init_from == experiment.drafter_dir(cache, (2, 14, 25), ninth).name
    assert (cont.lr, cont.lr_schedule, cont.seed, cont.max_tokens) == (3e-4, "constant", 1, ld.STAGE_TOKENS)
    assert dataclasses.replace(cont, init_from="", **{k: getattr(ninth, k) for k in ld.CONT_STAGE}) == ninth
    seen = _scored_flow(monkeypatch, dcfg, 1.3, 0.1)
    monkeypatch.setattr(ld, "_all_responses", lambda p, progress: ([0] * 196, None))
    monkeypatch.setattr(ld, "_training_capture", lambda p, added, progress: cache)
    monkeypatch.setattr(experiment, "drafter_dir",
                        lambda c, layers, d: PurePosixPath(c if isinstance(c, str) else "cap324", "d"))
    out = ld.run_indist_cont(load_config("default"), progress=False)
    assert seen["rival"] == ("indist_all", "cap324/d") and seen["extra"] == (("indist", "third/d"),)
    assert seen["dconf"].lr_schedule == "constant" and seen["name"] == "indist_cont"
    assert out["parent_drafter"] == "cap324/d" and out["delta_vs_parent"] == {"mean": 0.1}
    assert not {"rival_drafter", "delta_vs_rival"} & set(out) and "eleventh amendment" in out["pre_registration"]
    assert out["capture"]["records"] == 324 and out["tokens_with_parent"] == 2_000_000
    assert ld.INDIST_CONT in OPT_IN and entries()[ld.INDIST_CONT] is ld.run_indist_cont


HELD = " The registered prediction (a gain of +0.02 to +0.10) held."


def test_the_sampled_drafter_trains_on_the_base_records_and_their_samples_against_the_eighths(monkeypatch, tmp_path):
    """Twelfth amendment: SAMPLES sampled answers per base train prompt, through llama.cpp (ENGINE),
    captured after the base records; stage 1's recipe; the eighth's drafter is the rival."""
    from pathlib import PurePosixPath
    from types import SimpleNamespace

    import activation_wave.draft.experiment as experiment
    from activation_wave.benchmarks.suite import OPT_IN, entries

    dcfg = third_drafter_config(load_config("default"))
    gen = ld.samples_generation_config(dcfg).data
    assert (gen.samples_per_prompt, gen.engine, gen.engine_servers) == (ld.SAMPLES, "llamacpp", 2)
    assert dataclasses.replace(gen, samples_per_prompt=0, **{k: getattr(dcfg.data, k) for k in ld.ENGINE}) == dcfg.data
    seen = _scored_flow(monkeypatch, dcfg, 1.4, 0.06)
    samples = [SimpleNamespace(response_ids=[1, 2, 3])] * (128 * ld.SAMPLES)
    monkeypatch.setattr(ld, "_sampled_responses", lambda p, progress: (samples, [tmp_path / "x-s1.jsonl"]))
    monkeypatch.setattr(ld, "_training_capture", lambda p, added, progress: SimpleNamespace(path=tmp_path / "cap640")
                        if added is samples else None)
    monkeypatch.setattr(experiment, "drafter_dir", lambda c, layers, d: PurePosixPath(c, "d"))
    out = ld.run_indist_samples(load_config("default"), progress=False)
    assert seen["rival"] == ("indist", "third/d") and seen["name"] == "indist_samples" and "dconf" not in seen
    assert out["indist_drafter"] == "third/d" and out["delta_vs_indist"] == {"mean": 0.06}
    assert not {"rival_drafter", "delta_vs_rival"} & set(out) and "twelfth amendment" in out["pre_registration"]
    assert out["capture"] == {"key": "cap640", "records": 128 + 128 * ld.SAMPLES}
    assert out["added_response_tokens"] == 3 * 128 * ld.SAMPLES
    assert out["responses_files"] == ["x-s1.jsonl"] and out["sample_temperature"] == 0.7
    assert ld.INDIST_SAMPLES in OPT_IN and entries()[ld.INDIST_SAMPLES] is ld.run_indist_samples


SAMPLED = {"figure": 1.43, "baseline": 1.339, "tau_ci": [1.37, 1.50], "toy": 1.0, "budget_tokens": 1_000_000,
           "train_records": 384, "added_responses": 256, "added_response_tokens": 22_001, "samples_per_prompt": 2,
           "sample_temperature": 0.7, "train_tokens": 71_234, "train_cpu_min": 73.1, "verdict": "beat",
           "generation_s_this_run": 840.0,
           "delta_vs_indist": {"mean": 0.09, "lo": 0.04, "hi": 0.14, "p": 0.0006, "n": 32},
           "delta_vs_toy": {"mean": 0.43, "lo": 0.35, "hi": 0.51, "p": 0.0002, "n": 32}}


def test_the_ninth_amendments_entry_keeps_the_keys_of_its_committed_run(monkeypatch, tmp_path):
    """run_indist_all through the common part it shares with the twelfth: every key of the committed
    entry that is not the scoring's own (``_indist_entry``) is still written."""
    import json
    from pathlib import PurePosixPath
    from types import SimpleNamespace

    import activation_wave.draft.experiment as experiment
    from activation_wave.core.paths import REPO_ROOT

    committed = json.loads((REPO_ROOT / "data" / "results" / "benchmarks.json").read_text())[ld.INDIST_ALL]
    plan = {"dcfg": third_drafter_config(load_config("default")), "layers": (2, 14, 25),
            "cap": SimpleNamespace(cache="third"), "base_train": [0] * 128}
    added = [SimpleNamespace(response_ids=[1, 2])] * 196
    monkeypatch.setattr(ld, "_plan", lambda cfg, progress: plan)
    monkeypatch.setattr(ld, "_all_responses", lambda p, progress: (added, tmp_path / "answers.jsonl"))
    monkeypatch.setattr(ld, "_training_capture", lambda p, a, progress: SimpleNamespace(path=tmp_path / "cap324"))
    monkeypatch.setattr(experiment, "drafter_dir", lambda c, layers, d: PurePosixPath(c, "d"))
    monkeypatch.setattr(ld, "_indist_entry", lambda *a, **k: {"figure": 1.2, "rival_drafter": "third/d",
                                                             "delta_vs_rival": {"mean": -0.2}})
    out = ld.run_indist_all(load_config("default"), progress=False)
    scoring = {"figure", "unit", "baseline", "toy", "target", "model", "layers", "drafter", "toy_drafter", "tau_ci",
               "verdict", "delta_vs_toy", "train_records", "train_tokens", "loss_tokens", "budget_tokens", "recipe",
               "train_s", "train_threads", "train_cpu_min", "eval_prompt_ids", "per_prompt_tau", "peak_rss_mib",
               "wall_s", "measured", "machine"}
    assert set(committed) - scoring <= set(out)
    assert out["capture"] == {"key": "cap324", "records": 324} and out["added_prompts"] == 196
    assert out["added_response_tokens"] == 392 and out["responses_file"] == "answers.jsonl"
    assert out["indist_drafter"] == "third/d" and "ninth amendment" in out["pre_registration"]


def test_the_small_batch_drafter_is_the_twelfths_with_small_batches_against_the_eighths(monkeypatch, tmp_path):
    """Thirteenth amendment: the twelfth's records (its samples, captured after the base records),
    stage 1's recipe with STEPS_BATCH_TOKENS and nothing else changed; the eighth's drafter is the
    rival and the twelfth's is scored beside."""
    from pathlib import PurePosixPath
    from types import SimpleNamespace

    import activation_wave.draft.experiment as experiment
    from activation_wave.benchmarks.suite import OPT_IN, entries

    dcfg = third_drafter_config(load_config("default"))
    small = ld.steps_config(dcfg)
    assert small.batch_tokens == ld.STEPS_BATCH_TOKENS < ld.RECIPE["batch_tokens"]
    assert dataclasses.replace(small, batch_tokens=ld.RECIPE["batch_tokens"]) == ld.drafter_config(dcfg)
    seen = _scored_flow(monkeypatch, dcfg, 1.45, 0.1)
    samples = [SimpleNamespace(response_ids=[1, 2])] * (128 * ld.SAMPLES)
    monkeypatch.setattr(ld, "_sampled_responses", lambda p, progress: (samples, [tmp_path / "x-s1.jsonl"]))
    twelfth_cap = SimpleNamespace(path=PurePosixPath("cap384"))
    monkeypatch.setattr(ld, "_training_capture", lambda p, added, progress: twelfth_cap if added is samples else None)
    monkeypatch.setattr(experiment, "drafter_dir", lambda c, layers, d: PurePosixPath(str(getattr(c, "path", c)),
                                                                                       str(d.batch_tokens)))
    out = ld.run_indist_steps(load_config("default"), progress=False)
    assert seen["rival"] == ("indist", "third/2048") and seen["name"] == "indist_steps"
    assert seen["cap"] is twelfth_cap and seen["dconf"] == small
    assert seen["extra"] == (("indist_samples", "cap384/2048"),)
    assert out["indist_drafter"] == "third/2048" and out["delta_vs_indist"] == {"mean": 0.1}
    assert out["capture"] == {"key": "cap384", "records": 128 + 128 * ld.SAMPLES}
    assert not {"rival_drafter", "delta_vs_rival"} & set(out) and "thirteenth amendment" in out["pre_registration"]
    assert ld.INDIST_STEPS in OPT_IN and entries()[ld.INDIST_STEPS] is ld.run_indist_steps
    assert cpu.INDIST_STEPS == ld.INDIST_STEPS


STEPS = {"figure": 1.52, "baseline": 1.339, "tau_ci": [1.44, 1.61], "toy": 1.0, "budget_tokens": 1_000_000,
         "train_records": 384, "train_tokens": 71_490, "train_cpu_min": 108.0, "verdict": "beat",
         "optimizer_steps": 5_012, "recipe": {"batch_tokens": 256}, "indist_samples": 1.19,
         "delta_vs_indist": {"mean": 0.18, "lo": 0.1, "hi": 0.26, "p": 0.0002, "n": 32},
         "delta_vs_indist_samples": {"mean": 0.33, "lo": 0.25, "hi": 0.41, "p": 0.0002, "n": 32},
         "delta_vs_toy": {"mean": 0.52, "lo": 0.44, "hi": 0.61, "p": 0.0002, "n": 32}}




def _design(per: str, taus: list[float], lo: float, hi: float, rival: str = "delta_vs_indist") -> dict:
    return {"figure": round(sum(taus) / len(taus) - 0.03, 4), "tau_ci": [min(taus), max(taus)], "train_cpu_min": 70.0,
            "per_prompt_tau": {per: taus, "toy": [1.0] * len(taus)},
            rival: {"mean": (lo + hi) / 2, "lo": lo, "hi": hi, "p": 0.01, "n": len(taus)}}


@pytest.mark.parametrize(("lo", "hi", "word"), [(0.05, 0.2, "above 0"), (-0.2, -0.05, "below 0"),
                                                (-0.02, 0.04, "within noise of 0")])
def test_each_design_is_read_by_its_registered_comparison_with_one_word(lo, hi, word):
    """The lab record's sentence "paired difference +0.13 (...): <word>." reads right for every
    word; the headline tau is the mean over prompts (the entry's pooled figure is not used)."""
    bench = {cpu.INDIST_ALL: _design("indist_all", [1.2, 1.4, 1.6], lo, hi)}
    v = cpu.design_results(bench)
    assert v["lab_indist_all_word"] == word and v["lab_indist_all_tau"] == pytest.approx(1.4)
    assert (v["lab_indist_all_dlo"], v["lab_indist_all_dhi"], v["lab_indist_all_n"]) == (lo, hi, 3)
    assert "lab_indist_tau" not in v  # designs not measured give no values


def test_the_best_design_is_the_highest_mean_over_prompts_placed_under_the_break_even():
    bench = {cpu.INDIST: _design("indist", [1.3, 1.4], 0.05, 0.2, "delta_vs_corpus"),
             cpu.INDIST_STEPS: {**_design("indist_steps", [1.1, 1.5], -0.2, -0.05), "figure": 1.9}}
    best = cpu.best_design_values(bench)
    assert best["best_tau"] == pytest.approx(1.35) and best["n_designs"] == 2 and best["best_n"] == 2
    assert best["best_what"] == "the 128 study train prompts" and math.isnan(best["best_gap"])  # no ceiling given
    frame = cpu.designs_frame(bench)
    assert list(frame["outcome tau (mean over prompts)"]) == [1.35, 1.3] and list(frame["prompts"]) == [2, 2]
    assert cpu.best_design_values({})["n_designs"] == 0 and cpu.designs_frame({}).empty
    assert cpu.per_prompt_mean({"per_prompt_tau": {"x": [1.0, 2.0]}}, "x") == (1.5, 2)
