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
    assert [r["R1"] for r in rows] == ["helps", "within noise", "post hoc (no test)"]
    assert rows[0]["delta 95% CI"] == "[0.050, 0.110]" and rows[1]["delta 95% CI"] == "[-0.030, +0.010]"
    assert rows[0]["extra CPU-min vs base (secondary)"] == 5.0


def test_status_counts_screened_arms_and_names_the_helpers():
    text = dr.status_text(_doc(), 20)
    assert text.startswith("2 of the 20 pre-registered arms") and "help under R1: head-target." in text
    assert "still to run" in text and "interim: Holm runs over the 2 arms measured so far" in text
    assert "has not run yet" in dr.status_text(None, 20)
    assert dr.headline(_doc(), planned=20).endswith("interim: 18 of the 20 pre-registered arms are still to run, "
                                                    "then the combined recipe (stage 2)")
    assert "interim" not in dr.headline(_doc(), planned=2)


def test_status_names_the_shrunk_arms_and_what_is_left_of_a_complete_screen():
    doc = {**_doc(), "shrunk": ["vocab-full", "epochs-20"], "combined": {"run": False},
           "confirm": {"run": False, "pending": True, "why": "no combined arm"}}
    text = dr.status_text(doc, 2)
    assert "shrunk by the pre-registered order (2 arms dropped: vocab-full, epochs-20)" in text
    assert text.endswith("The combination (R2) and the adoption are still to run.")
    done = {**doc, "combined": {"run": False, "why": "no arm helps"},
            "confirm": {"run": False, "why": "no arm helps under R1"}}
    assert "still to run" not in dr.status_text(done, 2)
    assert dr.confirm_text(doc).startswith("Stage 2 has not run yet")
    assert dr.confirm_text(done) == "Stage 2 did not run: no arm helps under R1."
    assert dr.headline(done, planned=2).endswith("so stage 2 did not run and today's recipe stays")


def test_agreement_values_without_a_file_are_marked_not_measured():
    assert dr.agreement_values(None)["ag_engine"] == "not measured"


def test_no_arm_helps_on_a_handful_of_prompts():
    from activation_wave.benchmarks.recipe import combine, helps

    row = {"name": "a", "overrides": {"lr": 1}, "delta": 0.1, "p_holm": 0.001, "n_prompts": 2}
    assert not helps(row) and combine([row]) == ({}, [])
    assert helps({**row, "n_prompts": 96})


def _confirm(run=True):
    curve = lambda a, b: [{"epoch": e, "cpu_s": 600.0 * e, "tau_offline": a + b * e} for e in (1, 2, 4)]  # noqa: E731
    return {"run": run, "from": ["head-target", "lr-constant"], "n_seeds": 2,
            "arms": {"today": {"tau": 1.62, "curve": curve(1.5, 0.05), "fit": {"a": 1.3, "b": 0.1}},
                     "combined": {"tau": 1.71, "curve": curve(1.6, 0.05), "fit": {"a": 1.4, "b": 0.1}}},
            "r2": {"delta": 0.09, "delta_lo": 0.06, "delta_hi": 0.12, "p": 0.0002, "n_prompts": 96,
                   "verdict": "supported"},
            "r3": {"mark": 1.74, "today_cpu_min": None, "combined_cpu_min": 38.0, "half_of_today": None}}


def test_confirm_text_states_r2_with_interval_and_n_and_r3_in_minutes():
    text = dr.confirm_text({"confirm": _confirm()})
    assert text.startswith("R2 (supported): the combined recipe (head-target, lr-constant) reaches tau 1.710")
    assert "delta +0.090 [0.060, 0.120], p 0.0002, n = 96 prompts, 2 seeds each" in text
    assert "today's curve reaches tau 1.74 after never, within the curve measured" in text
    assert "the combined one after 38 CPU-minutes." in text
    assert dr.confirm_text({}) == "Stage 2 has not run: it follows a complete screen."


def test_break_even_taus_read_measured_rounds_and_skip_the_unmeasured():
    bench = {"speculative_decoding": {"tau_t0": 1.84, "speedup_vs_plain_t0": 1.0042,
                                      "cost_model": {"predicted_chain_t0": {"break_even_tau": 2.08}}},
             "llamacpp_1.5b": {"small": {"by_threads": {"1": {"eagle3": {"round_costs": {"round_in_plain_steps": 5.08}}}}}}}
    # our loop's from its measured round (tau / speedup), not the cost model's; llama.cpp's from chapter 11
    assert dr.break_even_taus(bench) == {"our PyTorch loop": round(1.84 / 1.0042, 4), "llama.cpp, 1 thread": 5.08}
    assert dr.break_even_taus({"llamacpp": {}}) == {}


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
    """The docstring examples of the page's helpers (headline, status, verdict, strength of
    today's drafters) and of the benchmark's (shrunk, cpu_minutes_to) hold."""
    import doctest

    from activation_wave.benchmarks import recipe

    for module in (dr, recipe):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_arm_rows_render_as_the_page_shows_them():
    import pandas as pd

    from activation_wave.core.tables import format_table

    assert "head-target" in format_table(pd.DataFrame(dr.arm_rows(_doc()))).to_html()


def test_screen_headline_counts_the_profiles_registered_arms(tmp_path):
    import json

    from activation_wave.core.config import BenchConfig, StudyConfig

    cfg = StudyConfig(profile="smoke", model="perm-llama", bench=BenchConfig(recipe_arms=("hard", "ttt-1", "combined")))
    assert dr.planned_arms(cfg) == 2
    assert dr.screen_headline(cfg, tmp_path) == "nothing has been measured yet"
    folder = tmp_path / "smoke" / "perm-llama"
    folder.mkdir(parents=True)
    (folder / "recipe.json").write_text(json.dumps(_doc()))
    assert dr.screen_headline(cfg, tmp_path) == dr.headline(_doc(), planned=2)
    assert "interim" not in dr.screen_headline(cfg, tmp_path)


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
    text = dr.projection_text(proj)
    assert "40.0 CPU-minutes per drafter" in text and "offline scale" in text and "lower bounds" not in text
    assert dr.data_projection({}, {"x": 2.0}) is None and "not been measured" in dr.projection_text(None)


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


def test_marks_are_the_targets_then_each_engines_break_even():
    bench = {"llamacpp_1.5b": {"small": {"by_threads": {"1": {"eagle3": {"round_costs": {"round_in_plain_steps": 3.8}}}}}}}
    assert dr.projection_marks(bench) == {**dr.TARGETS, "break-even, llama.cpp, 1 thread": 3.8}
    assert "has not run" in dr.best_reached({})


def test_efficiency_names_the_cheapest_arm_that_is_not_worse():
    doc = {"base": {"cpu_s": 800.0}, "arms": [
        {"name": "cheap-bad", "cpu_s": 100.0, "delta": -0.1, "p_holm": 0.001},
        {"name": "half", "cpu_s": 400.0, "delta": 0.0, "p_holm": 0.9},
        {"name": "combined", "cpu_s": 50.0, "delta": 0.2, "p_holm": None, "post_hoc": True}]}
    text = dr.efficiency_text(doc)
    assert "is half, at 50%" in text and text.endswith("within noise of the base's")
    doc["arms"][1].update(delta=0.05, p_holm=0.01)
    assert dr.efficiency_text(doc).endswith("(half) is met")
    assert dr.efficiency_text(None) == "the screen has not run"


def test_reach_text_states_the_targets_and_the_extrapolated_time():
    bench = _scaling()
    bench["speculative_decoding"] |= {"tau_t0": 1.84, "speedup_vs_plain_t0": 1.0}
    text = dr.reach_text(bench)
    assert text.startswith("today's benchmark drafter reaches an online tau of 1.84 and 1.00x the plain loop")
    assert "tau 1.9 would take about" in text and "today's data" in text and "generation not counted" in text
    assert dr.reach_text({}, None) == "the decoding benchmark has not run"