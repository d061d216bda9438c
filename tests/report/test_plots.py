"""Each plot function alone: SVG out, deterministic, literal labels, and no crash on sparse rows."""

from __future__ import annotations

import math

import pytest
from synthetic import synthetic_results

from forgetbench.report import figure, meta_plot, plots, robustness

PLOTS = [
    plots.forget_quality_plane,
    plots.subscore_curves,
    plots.format_grid,
    plots.mia_curves,
    robustness.robustness_bars,
]


@pytest.mark.parametrize("draw", PLOTS, ids=lambda f: f.__name__)
def test_plot_is_inline_svg_and_deterministic(draw):
    rows = synthetic_results()["rows"]
    svg = draw(rows, "forget10")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<dc:date>" not in svg and "matplotlib.org" not in svg
    assert draw(rows, "forget10") == svg


@pytest.mark.parametrize("draw", PLOTS, ids=lambda f: f.__name__)
def test_plot_survives_dollar_signs_and_sparse_rows(draw):
    rows = [
        {"split": "s", "method": "finetuned", "step": 0, "model_utility": 0.5},
        {"split": "s", "method": "a$b$c", "step": 5, "forget_quality": 0.1, "mia/loss": None},
        {"split": "s", "method": "a$b$c", "step": 10, "epoch": None, "formats/cloze/forget": 0.2},
    ]
    assert draw(rows, "s").startswith("<svg")


def test_ids_are_prefixed_per_figure():
    rows = synthetic_results()["rows"]
    svg = plots.forget_quality_plane(rows, "forget10")
    assert 'id="figure_1"' not in svg and 'id="fq-plane-forget10-figure_1"' in svg
    assert 'href="#fq-plane-forget10-' in svg


def test_formats_and_attacks_in_the_papers_order():
    rows = [{"formats/zzz/forget": 1.0, "formats/cloze/retain": 1.0, "formats/mcqa/forget": 1.0}]
    assert plots.format_names(rows) == ["mcqa", "cloze", "zzz"]
    rows = [{"mia/zlib": 0.5, "mia/loss": 0.6, "mia/gradnorm": 0.7, "mia/min_k": None}]
    assert plots.mia_attacks(rows) == ["loss", "zlib", "gradnorm"]


def test_mia_attacks_are_the_auc_keys_only():
    from forgetbench.report.plots import mia_attacks

    rows = [
        {"split": "s", "method": "m", "mia/lira": 0.6, "mia/loss": 0.7, "mia/members": 20,
         "mia/nonmembers": 20, "mia/loss/tpr@1%fpr": None, "mia/lira/tpr@0.1%fpr": 0.1},
    ]  # fmt: skip
    assert mia_attacks(rows) == ["loss", "lira"]


def test_meta_eval_labels_are_spread_one_line_apart_in_the_points_order():
    # 0.90, 0.91, 0.92 crowd together: each label one gap (0.032) above the one below.
    assert meta_plot._spread([0.5, 0.9, 0.91, 0.92]) == pytest.approx([0.5, 0.9, 0.932, 0.964])
    # Running past the top (1.0 + 0.032 > 1.02): the column moves down by the overshoot.
    assert meta_plot._spread([0.99, 1.0]) == pytest.approx([0.988, 1.02])
    assert meta_plot._spread([]) == []


def test_every_method_has_its_own_colour_and_marker():
    rows = [{"split": "s", "method": f"m{i}", "step": 5} for i in range(20)]
    styles = figure.method_styles(rows)
    assert len({s["color"] for s in list(styles.values())[:18]}) == 18  # a study's 15 and more
    assert len({(s["color"], s["marker"]) for s in styles.values()}) == 20
    assert all(s["color"] != "#7f7f7f" for s in styles.values())  # the retain model's grey


def _cielab(colour: str) -> tuple[float, float, float]:
    """sRGB hex -> CIELAB (D65), by the CIE formulas, for perceived colour distance."""
    from matplotlib.colors import to_rgb

    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    matrix = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
    white = (0.95047, 1.0, 1.08883)
    x, y, z = (sum(m * c for m, c in zip(row, linear, strict=True)) / w
               for row, w in zip(matrix, white, strict=True))  # fmt: skip

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_methods_that_share_a_marker_differ_clearly_in_colour():
    # Fifteen built-in methods and a few of the user's own: two lines with the same marker must
    # not also look the same colour (CIE76 distance; ~2.3 is just noticeable, the old palette had
    # brown beside maroon and pink beside magenta at 27 on one marker).
    rows = [{"split": "s", "method": f"m{i}", "step": 5} for i in range(21)]
    styles = list(figure.method_styles(rows).values())
    for i, a in enumerate(styles):
        for b in styles[i + 1 :]:
            if a["marker"] == b["marker"]:
                distance = math.dist(_cielab(a["color"]), _cielab(b["color"]))
                assert distance >= 35, (a, b, distance)


def test_the_forget_quality_plane_zooms_only_when_a_method_broke_the_model():
    # Bar at 0.837 (0.9 x 0.93): every point near it -> one panel.
    assert plots._focus([0.85, 0.9, 0.93], 0.837) is None
    # grad_ascent at utility 0: the zoom runs from a little left of the bar past the last point.
    low, high = plots._focus([0.0, 0.85, 0.93], 0.837)
    assert 0.8 < low < 0.837 and 0.93 < high < 0.96
    assert plots._focus([0.0, 0.9], None) is None  # no finetuned utility, no bar


def test_a_recovery_of_zero_is_marked_not_drawn_as_a_missing_bar():
    # A method that forgot everything and got nothing back (int8 on grad_ascent: 0.0) must not
    # look like "nothing was forgotten to recover" (no value at all).
    def rows(recovered):
        row = {"split": "s", "method": "grad_ascent", "step": 5, "attack/none/rougeL": 0.01,
               "attack/int8/rougeL": 0.01, "attack/int8/recovered_rougeL": recovered}  # fmt: skip
        return [row]

    marked = robustness.robustness_bars(rows(0.0), "s")
    missing = robustness.robustness_bars(rows(None), "s")
    assert marked.count("<use") == missing.count("<use") + 1
