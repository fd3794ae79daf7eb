"""The recipe page's helpers (study.chapters.drafter_recipe) on a synthetic results file."""

from __future__ import annotations

from activation_wave.study.chapters import drafter_recipe as dr


def _doc():
    arm = {"overrides": {"head_init": "target"}, "tau": 1.6, "lo": 1.55, "hi": 1.65, "n_seeds": 2, "cpu_s": 900.0}
    return {"base": {"cpu_s": 600.0, "n_seeds": 2}, "prompt_ids": list(range(96)),
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
    assert "still to run" in text
    assert "has not run yet" in dr.status_text(None, 20)


def test_agreement_values_without_a_file_are_marked_not_measured():
    assert dr.agreement_values(None)["ag_engine"] == "not measured"


def test_no_arm_helps_on_a_handful_of_prompts():
    from activation_wave.benchmarks.recipe import combine, helps

    row = {"name": "a", "overrides": {"lr": 1}, "delta": 0.1, "p_holm": 0.001, "n_prompts": 2}
    assert not helps(row) and combine([row]) == ({}, [])
    assert helps({**row, "n_prompts": 96})
