"""The recipe page's helpers (study.chapters.drafter_recipe) on a synthetic results file."""

from __future__ import annotations

from activation_wave.study.chapters import drafter_recipe as dr


def _doc():
    arm = {"overrides": {"head_init": "target"}, "tau": 1.6, "lo": 1.55, "hi": 1.65, "n_seeds": 2, "cpu_s": 900.0}
    return {"base": {"cpu_s": 600.0, "n_seeds": 2, "tau": 1.5}, "prompt_ids": list(range(96)),
            "arms": [{**arm, "name": "head-target", "delta": 0.08, "delta_lo": 0.05, "delta_hi": 0.11, "p_holm": 0.001},
                     {**arm, "name": "hard", "delta": -0.01, "delta_lo": -0.03, "delta_hi": 0.01, "p_holm": 0.6},
                     {**arm, "name": "combined", "delta": 0.1, "delta_lo": 0.07, "delta_hi": 0.13, "p_holm": None,
                      "post_hoc": True}]}


def test_rows_carry_the_verdict_and_label_cost_as_secondary():
    rows = dr.arm_rows(_doc())
    assert [r["R1 (by the Holm p)"] for r in rows] == ["helps", "within noise", "post hoc (no test)"]
    assert rows[0]["delta 95% CI (unadjusted)"] == "[0.050, 0.110]" and rows[1]["delta 95% CI (unadjusted)"] == "[-0.030, +0.010]"
    assert rows[0]["extra CPU-min vs base (secondary)"] == 5.0


def test_agreement_values_without_a_file_are_marked_not_measured():
    assert dr.agreement_values(None)["ag_engine"] == "not measured"


def test_no_arm_helps_on_a_handful_of_prompts():
    from activation_wave.benchmarks.recipe import combine, helps

    row = {"name": "a", "overrides": {"lr": 1}, "delta": 0.1, "p_holm": 0.001, "n_prompts": 2}
    assert not helps(row) and combine([row]) == ({}, [])
    assert helps({**row, "n_prompts": 96})


def test_the_screen_reads_within_noise_when_no_arm_helps_and_none_clears_zero():
    arm = lambda n, d, lo, hi, p: {"name": n, "delta": d, "delta_lo": lo, "delta_hi": hi, "p_holm": p,  # noqa: E731
                                   "n_prompts": 96, "n_seeds": 2}
    (r1,) = dr.hypotheses({"arms": [arm("a", 0.01, -0.01, 0.03, 0.4), arm("b", -0.1, -0.2, -0.05, 0.001)]})
    from activation_wave.study.findings import word

    assert r1.supported is False and r1.interval == (-0.01, 0.03) and word(r1) == "within noise"
    (r1,) = dr.hypotheses({"arms": [arm("b", -0.1, -0.2, -0.05, 0.001)]})
    assert word(r1) == "not supported"


def _confirm(run=True):
    curve = lambda a, b: [{"epoch": e, "cpu_s": 600.0 * e, "tau_offline": a + b * e} for e in (1, 2, 4)]  # noqa: E731
    return {"run": run, "from": ["head-target", "lr-constant"], "n_seeds": 2,
            "arms": {"today": {"tau": 1.62, "curve": curve(1.5, 0.05), "fit": {"a": 1.3, "b": 0.1}},
                     "combined": {"tau": 1.71, "curve": curve(1.6, 0.05), "fit": {"a": 1.4, "b": 0.1}}},
            "r2": {"delta": 0.09, "delta_lo": 0.06, "delta_hi": 0.12, "p": 0.0002, "n_prompts": 96,
                   "verdict": "supported"},
            "r3": {"mark": 1.74, "today_cpu_min": None, "combined_cpu_min": 38.0, "half_of_today": None}}


def test_break_even_taus_read_measured_rounds_and_skip_the_unmeasured():
    from activation_wave.study.chapters import cpu_payoff as cpu
    from activation_wave.study.chapters import performance as perf

    ceiling = {"targets": {"135M": {"model": "m", "by_threads": {"1": {
        "extraction_cost": {"steps": 0.05}, "draft_call_cost": {"f16": {"steps": 0.1}},
        "round_cost_measured": {"f16": {"3": 5.08}}, "round_cost_predicted": {"f16": {"3": 5.0}},
        "agreement": {"f16": {"3": 0.01}}, "ceiling": {"f16": {"3": 0.79}}, "verify_cost_by_k": {}, "verify_slope": 0.7,
        "plain_step_ms": {"verify": 30.0}, "identical_to_plain": {}}}}}}
    bench = {"speculative_decoding": {"tau_t0": 1.84, "speedup_vs_plain_t0": 1.0042,
                                      "cost_model": {"predicted_chain_t0": {"break_even_tau": 2.08}}},
             cpu.CEILING: ceiling}
    # our loop's from its measured round (tau / speedup), not the cost model's; llama.cpp's from the
    # ceiling run's measured depth-3 round: the same numbers the cost page gives (one number per quantity)
    assert dr.break_even_taus(bench) == {"our PyTorch loop": round(1.84 / 1.0042, 4), "llama.cpp, 1 thread": 5.08}
    assert dr.break_even_taus(bench)["our PyTorch loop"] == round(perf.observed_break_even(bench["speculative_decoding"]), 4)
    assert dr.break_even_taus(bench)["llama.cpp, 1 thread"] == cpu.ceiling_values(ceiling)["be_small_1"]
    assert dr.break_even_taus({"llamacpp": {}}) == {}
    # the projection aims at those break-evens only: targets of the work are not marks
    assert dr.projection_marks(bench) == {"break-even, our PyTorch loop": round(1.84 / 1.0042, 4),
                                          "break-even, llama.cpp, 1 thread": 5.08}


def test_confirm_figure_draws_curves_fits_and_lines():
    import matplotlib
    matplotlib.use("Agg")
    from activation_wave.plots import plot_recipe_confirm

    fig = plot_recipe_confirm(_confirm(), break_even={"llama.cpp": 3.8})
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert "today (measured)" in labels and "combined (measured)" in labels
    assert any("extrapolated" in lab for lab in labels) and "break-even: llama.cpp" in labels
    fit = next(line for line in ax.get_lines() if line.get_label().startswith("combined: fit"))
    assert max(fit.get_ydata()) <= 3.8 + 1e-6 and ax.get_xscale() == "log"


def test_doctests_of_the_page_and_the_benchmark():
    """The docstring examples of the page's helpers (verdict, R1's hypotheses row) and of the
    benchmark's (shrunk, cpu_minutes_to) hold."""
    import doctest

    from activation_wave.benchmarks import recipe

    for module in (dr, recipe):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_arm_rows_render_as_the_page_shows_them():
    import pandas as pd

    from activation_wave.core.tables import format_table

    assert "head-target" in format_table(pd.DataFrame(dr.arm_rows(_doc()))).to_html()


def test_planned_arms_count_the_profiles_registered_arms():
    from activation_wave.core.config import BenchConfig, StudyConfig

    cfg = StudyConfig(profile="smoke", model="perm-llama", bench=BenchConfig(recipe_arms=("hard", "ttt-1", "combined")))
    assert dr.planned_arms(cfg) == 2


def _scaling(b=0.08):
    """Chapter 9's data-scaling entry for a recipe whose tau grows by ``b`` per doubling of data,
    and a decoding benchmark whose drafter (today's data, 320,000 positions) took 40 CPU-minutes
    and measured the same tau online and offline."""
    import math

    pts = [{"fraction": 1.0, "samples_per_prompt": k, "loss_tokens": 40_000 * (k + 1), "train_wall_s": 300.0 * (k + 1),
            "tau_offline": 1.5 + b * math.log2(k + 1) + (0.002 if k == 1 else 0.0)} for k in (0, 1, 3, 7)]
    pts.append({"fraction": 0.5, "samples_per_prompt": 0, "loss_tokens": 20_000, "train_wall_s": 150.0,
                "tau_offline": 1.0})  # a share of the prompts: another lever, left out of the fit
    spec = {"tau_t0": 2.0, "speedup_vs_plain_t0": 1.0, "spec": {"depth": 3},
            "drafter_eval_offline": {"tau_offline": 2.0}, "drafter_training": {"train_wall_s": 1200.0, "threads": 2}}
    return {"drafter_data_scaling": {"points": pts}, "speculative_decoding": spec}


def test_data_projection_uses_one_cost_one_scale_and_gives_intervals():
    proj = dr.data_projection(_scaling(), {"near": 1.9, "far": 3.5, "done": 1.6, "beyond": 4.5})
    assert len(proj["curve"]) == 4 and abs(proj["fit"]["b"] - 0.08) < 2e-3
    assert proj["today_cost"]["cpu_min"] == 40.0 and proj["tau_max"] == 4
    near, far, done, beyond = proj["marks"]
    # tau 1.9 is about 0.16 / 0.08 = 2 doublings above today's fit: about 4x today's data, 4 x 40 CPU-minutes
    assert 3.5 < near["data_multiple"] < 4.5 and abs(near["cpu_min"] - 40.0 * near["data_multiple"]) < 1e-9
    assert near["multiple_lo"] < near["data_multiple"] < near["multiple_hi"] and not near["reached"]
    assert far["cpu_min"] > 1e7 and done["reached"]
    assert not beyond["reachable"] and beyond["cpu_min"] is None and "unreachable at depth 3" == beyond["time_text"]
    rows = dr.projection_rows(proj)
    assert rows[2]["x today's data [95% CI]"] == "reached by today's drafter"
    assert rows[1]["training time (extrapolated) [95% CI]"].split(" [")[0].endswith("CPU-years")
    assert rows[3]["x today's data [95% CI]"] == "unreachable: above tau_max = 4"
    v = dr.projection_values(proj)
    assert v["proj_cpu_min"] == 40.0 and abs(v["proj_b"] - 0.08) < 2e-3 and v["proj_tau_max"] == 4 and v["proj_n"] == 4
    assert dr.data_projection({}, {"x": 2.0}) is None and dr.projection_values(None)["proj_n"] == 0


def test_data_projection_of_a_curve_that_does_not_rise_predicts_never():
    proj = dr.data_projection(_scaling(b=-0.01), {"x": 2.0})
    assert proj["marks"][0]["cpu_min"] is None
    assert dr.projection_rows(proj)[0]["training time (extrapolated) [95% CI]"].startswith("never")


def test_projection_figure_marks_the_crossings_and_the_marks_beyond_the_chart():
    import matplotlib
    matplotlib.use("Agg")
    from activation_wave.plots import plot_recipe_projection

    proj = dr.data_projection(_scaling(), {"near": 1.9, "far": 3.5, "beyond": 4.5})
    ax = plot_recipe_projection(proj, max_doublings=10).axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert any(t.endswith("CPU-minutes") or "CPU-hours" in t for t in texts)
    assert any("beyond the chart" in t for t in texts) and ax.get_xscale() == "log"
    labels = [line.get_label() for line in ax.get_lines()]
    assert "today's recipe (measured)" in labels and "far: online tau 3.50, offline 3.50" in labels
    assert not any(lab.startswith("beyond") for lab in labels)  # above tau_max: not drawn


def test_a_mark_above_todays_online_tau_gets_an_extrapolated_time():
    bench = _scaling()
    bench["speculative_decoding"] |= {"tau_t0": 1.84, "speedup_vs_plain_t0": 1.0}
    m = dr.data_projection(bench, {"t": 1.9})["marks"][0]
    assert not m["reached"] and m["cpu_min"] is not None and m["data_multiple"] is not None
    assert dr.data_projection({}, {"t": 1.9}) is None

def test_screen_values_count_the_verdicts_and_name_the_arms_that_help():
    """The answer's sentence "Of N one-factor changes ..., k helped (<names>: <delta> ...), h hurt and
    m were within noise" is filled from R1's own words, for a screen where an arm helps and one where none does."""
    v = dr.screen_values({**_doc(), "shrunk": ["vocab-full"], "confirm": {"run": False}})
    assert (v["n_arms"], v["n_helps"], v["n_hurts"], v["n_noise"]) == (2, 1, 0, 1)  # the post-hoc arm is no verdict
    assert v["helps_names"] == "head-target" and (v["help_delta"], v["help_lo"], v["help_hi"]) == (0.08, 0.05, 0.11)
    assert v["n_prompts"] == 96 and v["n_shrunk"] == 1 and v["stage2_word"] == "did not run"
    none = dr.screen_values({**_doc(), "arms": _doc()["arms"][1:], "confirm": {"run": True}})
    assert none["helps_names"] == "none" and none["n_helps"] == 0 and none["stage2_word"] == "ran"
    assert none["help_delta"] != none["help_delta"]  # NaN: no helping arm to quote
    assert dr.screen_values(None)["n_arms"] == 0


def test_equal_cost_and_efficiency_read_the_curves_and_costs():
    base = {"curve": [{"cpu_s": 60.0, "tau_offline": 1.3}, {"cpu_s": 120.0, "tau_offline": 1.4}], "cpu_s": 800.0}
    arm = {"name": "d", "delta": 0.08, "p_holm": 0.002, "cpu_s": 400.0,
           "curve": [{"cpu_s": 100.0, "tau_offline": 1.3}, {"cpu_s": 200.0, "tau_offline": 1.5}]}
    v = dr.equal_cost_values({"base": base, "arms": [arm]})
    assert v["eq_arm"] == "d" and abs(v["eq_arm_tau"] - 1.34) < 1e-9 and v["eq_word"] == "below" and v["eq_minutes"] == 2.0
    up = {**arm, "curve": [{"cpu_s": 100.0, "tau_offline": 1.4}, {"cpu_s": 200.0, "tau_offline": 1.6}]}
    assert dr.equal_cost_values({"base": base, "arms": [up]})["eq_word"] == "above"
    assert dr.equal_cost_values(None)["eq_word"] == "-"
    doc = {"base": {"cpu_s": 800.0}, "arms": [
        {"name": "cheap-bad", "cpu_s": 100.0, "delta": -0.1, "p_holm": 0.001},
        {"name": "half", "cpu_s": 400.0, "delta": 0.0, "p_holm": 0.9},
        {"name": "combined", "cpu_s": 50.0, "delta": 0.2, "p_holm": None, "post_hoc": True}]}
    assert dr.efficiency_values(doc) == {"eff_arm": "half", "eff_share": 0.5}
    assert dr.efficiency_values(None)["eff_arm"] == "-"


def test_power_and_seed_tables_list_what_the_page_discusses():
    arms = [{"name": "v", "delta": 0.014, "p_holm": 0.08, "mde_holm": 0.020, "mde": 0.015},
            {"name": "w", "delta": 0.001, "p_holm": 0.9, "mde_holm": 0.03, "mde": 0.02}]
    assert [r["arm"] for r in dr.power_rows({"arms": arms})] == ["v"] and dr.mde_range({"arms": arms}) == (0.02, 0.03)
    sens = [{"name": "a", "changed": True, "verdict": "within noise", "registered_verdict": "hurts", "delta": -0.05,
             "delta_lo": -0.11, "delta_hi": 0.0, "p_holm": 0.32, "n_boot": 1000}, {"name": "b", "changed": False}]
    assert dr.seed_rows({"seed_sensitivity": sens}) == [{"arm": "a", "R1": "hurts", "seeds resampled": "within noise",
                                                        "delta": -0.05, "95% CI": "[-0.110, +0.000]", "p (Holm)": 0.32}]
    assert dr.seed_values({"seed_sensitivity": sens}) == {"seed_changed": 1, "seed_n": 2, "seed_n_boot": 1000}
