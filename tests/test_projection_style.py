"""The projection style (plots/_style.py): the figures a class projects keep every label at least
PROJECTION_PX pixels on a page PROJECTION_VIEWPORT wide. Here: every text of each projected
figure, as its plotting function draws it on a figure of its own, is at least the style's smallest
font for that figure's width; a figure drawn into someone else's axes is left as it was. The browser
check (scripts/check_book.py) measures the drawn width of the same figures on the built book."""

from __future__ import annotations

import io
import struct

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.text import Text

from activation_wave.plots import _style
from activation_wave.plots.drafters import plot_key_figure, plot_tau
from activation_wave.plots.layer_figures import plot_cka, plot_entropy_depth, plot_filter_comparison, plot_selection_map

IDS = list(range(31))
SETS = {"eagle3-default": [2, 15, 27], "combined": [7, 27, 29], "last-k": [28, 29, 30]}
COMP = [(0, 2), (3, 10), (11, 21), (22, 30)]
rng = np.random.default_rng(0)
CURVE = np.linspace(4.0, 5.4, 31)

#: One call per projected figure (the page's figure id -> its plotting call with the page's kind of data).
FIGURES = {
    "fig-key": lambda: plot_key_figure(IDS, SETS, list(SETS), [1.32, 1.30, 1.28], [1.29, 1.27, 1.25],
                                       [1.35, 1.33, 1.31], compartments=COMP, entropy=CURVE,
                                       xlabel="mean accepted length per target pass (tau)"),
    "fig-entropy-depth": lambda: plot_entropy_depth(IDS, {"response positions": CURVE, "every position": CURVE - 1}),
    "fig-cka": lambda: plot_cka(IDS, np.corrcoef(rng.normal(size=(31, 64))) ** 2, compartments=COMP),
    "fig-sink-entropy": lambda: plot_filter_comparison(IDS, {"all tokens": CURVE, "no first token": CURVE + 0.1}),
    "fig-selection-map": lambda: plot_selection_map(IDS, SETS, compartments=COMP, entropy=CURVE),
    "fig-tau-sets": lambda: plot_tau(list(SETS), [1.32, 1.30, 1.28], [1.29, 1.27, 1.25], [1.35, 1.33, 1.31]),
}


def test_every_projected_figure_has_a_check_here():
    assert set(FIGURES) == {f for figs in _style.PROJECTED.values() for f in figs}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_projected_figure_text_is_at_least_the_styles_smallest_font(name):
    fig = FIGURES[name]()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")  # as the book saves it: cropped to what it draws
    width_px = struct.unpack(">I", buf.getvalue()[16:20])[0]
    least = _style.projection_pt(width_px / fig.dpi, fig.dpi)  # what the browser check assumes of this image
    texts = [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    assert texts
    small = sorted({(round(t.get_fontsize(), 2), t.get_text()[:30]) for t in texts if t.get_fontsize() < least - 1e-9})
    plt.close(fig)
    assert not small, f"{name}: text below {least:.2f} pt: {small[:5]}"
    # drawn at the page's column width (or its own, if narrower), its smallest text is the style's pixels
    shrink = min(1.0, _style.CONTENT_PX / width_px)
    assert min(t.get_fontsize() for t in texts) * fig.dpi / 72 * shrink >= _style.PROJECTION_PX - 0.2


def test_the_style_reaches_its_pixels_on_the_page():
    # a label of the smallest font, in the image's pixels, times the shrink of an image wider than the column
    for width in (4.0, 6.4, 12.0):
        pt = _style.projection_pt(width)
        shrink = min(1.0, _style.CONTENT_PX / (width * 100))
        assert pt * 100 / 72 * shrink == pytest.approx(_style.PROJECTION_PX)


def test_a_figure_drawn_into_other_axes_keeps_its_fonts():
    fig, ax = plt.subplots(figsize=(12, 3))
    plot_tau(["a", "b"], [1.2, 1.3], [1.1, 1.2], [1.3, 1.4], ax=ax)
    sizes = {t.get_fontsize() for t in fig.findobj(Text) if t.get_text()}
    plt.close(fig)
    assert max(sizes) < _style.projection_pt(12.0)


def _check_book():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "check_book.py"
    spec = importlib.util.spec_from_file_location("check_book", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_book"] = module
    spec.loader.exec_module(module)
    return module


def test_the_browser_check_measures_a_projected_figure_as_drawn(tmp_path):
    cb = _check_book()
    fig = plot_tau(["a", "b"], [1.2, 1.3], [1.1, 1.2], [1.3, 1.4])
    (tmp_path / "chapters").mkdir()
    fig.set_size_inches(13, 3)
    fig.savefig(tmp_path / "chapters" / "key.png", dpi=100)
    plt.close(fig)
    natural = 1300
    assert cb.png_dpi(tmp_path / "chapters" / "key.png") == pytest.approx(100, abs=0.1)
    shown = [{"src": "key.png", "figure": "fig-key", "natural": natural, "rendered": _style.CONTENT_PX}]
    measured: list[str] = []
    assert cb.projection_problems(tmp_path, "chapters/intro.html", shown, 1280, measured) == []
    assert measured and measured[0].startswith("fig-key 12.0 px")
    narrower = [dict(shown[0], rendered=_style.CONTENT_PX * 0.8)]  # the column shrank: labels under 12 px
    problems = cb.projection_problems(tmp_path, "chapters/intro.html", narrower, 1280, [])
    assert problems and "9.6 px" in problems[0]
    assert cb.projection_problems(tmp_path, "chapters/intro.html", [], 1280, []) == [
        "projected figure fig-key: not on the page"]
    assert cb.projection_problems(tmp_path, "chapters/intro.html", narrower, 1024, []) == []  # other widths: not checked
