"""The report's TOFU and LUME figures, each returned as an SVG string ready to inline in the HTML
page: forget quality against utility, the sub-scores and membership inference over unlearning,
the scores per format.

Every function takes the results.json rows and one split and draws from them alone. The style,
each method's colours and the deterministic, id-scoped SVG are `report/figure.py`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from forgetbench.config_names import FORMATS
from forgetbench.report.figure import (
    _new_figure,
    _no_data,
    _panel_grid,
    _style,
    _svg,
    _text,
    method_styles,
)
from forgetbench.rows import (
    REFERENCE_METHODS,
    UTILITY_RATIO,
    Row,
    final,
    has_key,
    methods,
    number,
    reference,
    trajectory,
)

SETS = (
    ("forget", "Forget"),
    ("retain", "Retain"),
    ("real_authors", "Real Authors"),
    ("world_facts", "World Facts"),
)
SUBSCORES = (("rougeL", "ROUGE-L"), ("probability", "Probability"), ("truth_ratio", "Truth ratio"))
# Formats we do not know are drawn after config_names.FORMATS.
MIA_ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus", "reference", "lira", "rmia")
# `mia/<name>` keys that are counts, not attacks' AUCs.
MIA_COUNTS = ("members", "nonmembers")
_REFERENCE_STYLE = {
    "finetuned": {"color": "#000000", "marker": "*", "markersize": 15, "label": "finetuned"},
    "retain": {"color": "#7f7f7f", "marker": "D", "markersize": 9, "label": "retain"},
    "base": {"color": "#c7c7c7", "marker": "s", "markersize": 8, "label": "base"},
}


def format_names(rows: Sequence[Row]) -> list[str]:
    """Formats with a `formats/<format>/<side>` score anywhere in `rows`, known ones first."""
    found = {
        k.split("/")[1] for r in rows for k in r if k.startswith("formats/") and k.count("/") == 2
    }
    return [f for f in FORMATS if f in found] + sorted(found.difference(FORMATS))


def mia_attacks(rows: Sequence[Row]) -> list[str]:
    """Attacks with a `mia/<attack>` AUC anywhere in `rows`, known ones first (not the
    `mia/<attack>/tpr@...` keys under them, nor the item counts)."""
    found = {
        k.split("/", 1)[1] for r in rows for k in r if k.startswith("mia/") and k.count("/") == 1
    }
    found -= set(MIA_COUNTS)
    found = {a for a in found if has_key(rows, f"mia/{a}")}
    return [a for a in MIA_ATTACKS if a in found] + sorted(found.difference(MIA_ATTACKS))


def forget_quality_plane(rows: Sequence[Row], split: str) -> str:
    """TOFU Figs. 5-7: model utility (x) against forget quality on a log axis (y). Each method's
    trajectory runs from the finetuned model through its evaluated steps; the last is ringed, with
    an arrow on the last move.

    When some points lie far left of the leaderboard's utility bar (a method that broke the
    model), a narrow panel shows every point and a wide one the region around the bar, where the
    methods the leaderboard ranks live: on one axis they would crowd into a sliver."""
    styles = method_styles(rows)
    paths = {m: _plane_points(trajectory(rows, split, m)) for m in styles}
    references = {
        name: points[0]
        for name in REFERENCE_METHODS
        if (row := reference(rows, split, name)) and (points := _plane_points([row]))
    }
    finetuned = reference(rows, split)
    utility = number(finetuned, "model_utility") if finetuned else None
    bar = None if utility is None else UTILITY_RATIO * utility
    xs = [x for path in paths.values() for x, _ in path] + [x for x, _ in references.values()]
    focus = _focus(xs, bar)
    with _style():
        fig = _new_figure(11.5, 5.2)
        if focus is None:
            axes = [fig.add_subplot()]
        else:
            left, right = fig.subplots(1, 2, width_ratios=(1, 2.3))
            axes = [right, left]  # the legend comes from the first: the wide panel
        for ax in axes:
            ax.set_yscale("log")
            for method, style in styles.items():
                points = paths[method]
                if not points:
                    continue
                ax.plot(*zip(*points, strict=True), markersize=5, label=_text(method), **style)
                # The last step ringed: an arrow of zero length (a run that did not move) or one
                # outside the zoomed panel would leave it unmarked.
                ax.plot(*points[-1], linestyle="none", marker="o", markersize=11,
                        markerfacecolor="none", markeredgecolor=style["color"])  # fmt: skip
                if len(points) > 1 and points[-1] != points[-2]:
                    ax.annotate(
                        "",
                        xy=points[-1],
                        xytext=points[-2],
                        arrowprops={"arrowstyle": "-|>", "color": style["color"], "lw": 1.5},
                    )
            for name, point in references.items():
                ax.plot(*point, linestyle="none", zorder=5, **_REFERENCE_STYLE[name])
            if bar is not None:
                ax.axvline(bar, color="#555555", linestyle=":", linewidth=1.2,
                           label=f"{UTILITY_RATIO:g} × finetuned utility")  # fmt: skip
                ax.text(bar, 0.98, f" {UTILITY_RATIO:g} × finetuned utility ", rotation=90,
                        ha="right", va="top", fontsize=8, color="#555555",
                        transform=ax.get_xaxis_transform())  # fmt: skip
            ax.set_xlabel("Model utility")
            ax.grid(True, alpha=0.3)
        axes[-1].set_ylabel("Forget quality (KS p-value, log scale)")
        if focus is not None:
            low, high = focus
            axes[0].set_xlim(low, high)
            inside = [y for path in [*paths.values(), references.values()] for x, y in path
                      if low <= x <= high]  # fmt: skip
            if inside:
                axes[0].set_ylim(min(inside) / 3, max(inside) * 3)
            axes[0].set_title(_text(f"Around the utility bar — {split}"), fontsize=10)
            axes[1].set_title("Every step", fontsize=10)
            axes[1].axvspan(low, high, color="#000000", alpha=0.05, linewidth=0)
        else:
            axes[0].set_title(_text(f"Forget quality vs model utility — {split}"))
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)
        return _svg(fig, f"fq-plane-{split}")


def _plane_points(path: Sequence[Row]) -> list[tuple[float, float]]:
    """(model utility, forget quality) of each row that has both, forget quality > 0 (log axis)."""
    return [
        (u, q)
        for r in path
        if (u := number(r, "model_utility")) is not None
        and (q := number(r, "forget_quality")) is not None
        and q > 0
    ]


def _focus(xs: Sequence[float], bar: float | None) -> tuple[float, float] | None:
    """The x range of the zoomed panel: from a little left of the utility bar to the rightmost
    point; None when every point already lies near the bar (one panel is enough)."""
    if bar is None or not xs:
        return None
    high = max(xs)
    margin = max(0.25 * (high - bar), 0.02)
    low = bar - margin
    if min(xs) >= low - margin:
        return None
    return low, high + 0.1 * margin


def subscore_curves(rows: Sequence[Row], split: str) -> str:
    """TOFU Fig. 8: ROUGE-L, probability and truth ratio (rows) on Forget, Retain, Real Authors and
    World Facts (columns) against the unlearning step, one line per method; the retain model's value
    is the dashed grey line."""
    with _style():
        fig = _new_figure(11.5, 8.2)
        # One y range for every panel: the sub-scores all lie in [0, 1], and a panel that picked
        # its own range would show a 0.01 dip as a collapse beside one that falls to 0.
        axes = fig.subplots(len(SUBSCORES), len(SETS), sharex=True, sharey=True, squeeze=False)
        styles = method_styles(rows)
        retain = reference(rows, split, "retain")
        for i, (metric, metric_title) in enumerate(SUBSCORES):
            for j, (set_name, set_title) in enumerate(SETS):
                ax = axes[i][j]
                key = f"{set_name}/{metric}"
                drawn = _method_lines(ax, rows, split, styles, key)
                if retain is not None and (value := number(retain, key)) is not None:
                    ax.axhline(
                        value, color="#7f7f7f", linestyle="--", linewidth=1, label="retain model"
                    )
                    drawn = True
                if not drawn:
                    _no_data(ax)
                if i == 0:
                    ax.set_title(set_title)
                if j == 0:
                    ax.set_ylabel(metric_title)
                if i == len(SUBSCORES) - 1:
                    ax.set_xlabel("Unlearning step")
                ax.grid(True, alpha=0.3)
        axes[0][0].set_ylim(0, max(1.0, _highest(axes)) * 1.03)
        _figure_legend(fig, axes)
        fig.suptitle(_text(f"TOFU sub-scores over unlearning — {split}"))
        return _svg(fig, f"subscores-{split}")


def format_grid(rows: Sequence[Row], split: str) -> str:
    """Joshi et al. (2024) Fig. 1 as a grid: one column per format, one row per model (finetuned,
    retain, each method's final step), the score in each cell; the forget side on the left, the
    retain side on the right (when present). Fifteen methods overlaid on a radar chart hide each
    other; a grid shows every number."""

    names = format_names(rows)
    sides = [
        s for s in ("forget", "retain") if any(has_key(rows, f"formats/{f}/{s}") for f in names)
    ] or ["forget"]
    models = [
        ("finetuned", reference(rows, split)),
        ("retain", reference(rows, split, "retain")),
        *((m, final(rows, split, m)) for m in methods(rows)),
    ]
    models = [
        (label, row)
        for label, row in models
        if row is not None
        and any(number(row, f"formats/{f}/{s}") is not None for f in names for s in sides)
    ]
    with _style():
        fig = _new_figure(11.5, 1.9 + 0.3 * max(len(models), 1))
        axes = fig.subplots(1, len(sides), sharey=True, squeeze=False)[0]
        image = None
        for ax, side in zip(axes, sides, strict=True):
            grid = np.array(
                [[number(row, f"formats/{f}/{side}") for f in names] for _, row in models]
                or [[None]],
                dtype=float,
            )
            # pcolormesh, not imshow: imshow embeds a PNG in the SVG, a data: URL the page loads.
            image = ax.pcolormesh(np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap="viridis")
            for (i, j), value in np.ndenumerate(grid):
                if not np.isnan(value):
                    ax.text(j + 0.5, i + 0.5, f"{value:.2f}", ha="center", va="center",
                            fontsize=7, color="black" if value > 0.6 else "white")  # fmt: skip
            ax.set_xticks([j + 0.5 for j in range(len(names))], [_text(n) for n in names],
                          rotation=30, ha="right", fontsize=8)  # fmt: skip
            ax.set_yticks([i + 0.5 for i in range(len(models))],
                          [_text(label) for label, _ in models], fontsize=8)  # fmt: skip
            ax.set_title(_text(f"{side} side"), fontsize=10)
            if not models:
                _no_data(ax)
        axes[0].invert_yaxis()  # the finetuned model on top; the panels share the y axis
        if image is not None and models:
            bar = fig.colorbar(image, ax=list(axes), shrink=0.8, label="score")
            bar.solids.set_rasterized(False)  # matplotlib rasterises a long colour bar: a PNG
        fig.suptitle(_text(f"Scores per format — {split}"))
        return _svg(fig, f"formats-{split}")


def mia_curves(rows: Sequence[Row], split: str, *, attacks: Sequence[str] | None = None) -> str:
    """LUME Figs. 3-4: membership-inference AUC (one panel per attack; all attacks present unless
    `attacks` is given) and model utility against the unlearning step (LUME plots epochs; every
    trajectory plot of the report shares the step axis), one line per method. The retain model
    is the dashed grey line; 0.5 AUC (dotted) is a coin toss."""
    attacks = list(mia_attacks(rows) if attacks is None else attacks)
    panels = [(f"mia/{a}", f"MIA AUC ({a})") for a in attacks]
    if has_key(rows, "model_utility"):
        panels.append(("model_utility", "Model utility"))
    styles = method_styles(rows)
    # Steps (`_method_lines`), as in every other trajectory plot: one x unit across the report.
    retain = reference(rows, split, "retain")
    with _style():
        # AUCs and utility all lie in [0, 1]: one y range, so panels compare at a glance.
        fig, axes, drawn_on = _panel_grid(len(panels), width=3.3, margin=1.6, sharey=True)
        for ax, (key, title) in zip(drawn_on, panels, strict=True):
            drawn = _method_lines(ax, rows, split, styles, key)
            if retain is not None and (value := number(retain, key)) is not None:
                ax.axhline(
                    value, color="#7f7f7f", linestyle="--", linewidth=1, label="retain model"
                )
            if key.startswith("mia/"):
                ax.axhline(0.5, color="#bbbbbb", linestyle=":", linewidth=1)
            if not drawn:
                _no_data(ax)
            ax.set_title(_text(title))
            ax.set_xlabel("Unlearning step")
            ax.grid(True, alpha=0.3)
        axes[0][0].set_ylim(0, max(1.0, _highest(axes)) * 1.03)
        _figure_legend(fig, axes)
        fig.suptitle(_text(f"Membership inference and utility over unlearning — {split}"))
        return _svg(fig, f"mia-{split}")


# --- the trajectory panels' helpers ----------------------------------------------------------


def _series(path: Sequence[Row], x_key: str, y_key: str) -> list[tuple[float, float]]:
    return [
        (x, y)
        for r in path
        if (x := number(r, x_key)) is not None and (y := number(r, y_key)) is not None
    ]


def _method_lines(
    ax: Any, rows: Sequence[Row], split: str, styles: dict[str, dict[str, Any]], key: str
) -> bool:
    """Each method's `key` against the unlearning step, one line per method in its style;
    whether any was drawn."""
    drawn = False
    for method, style in styles.items():
        points = _series(trajectory(rows, split, method), "step", key)
        if points:
            ax.plot(*zip(*points, strict=True), markersize=3, label=_text(method), **style)
            drawn = True
    return drawn


def _figure_legend(fig: Figure, axes: Any) -> None:
    """One legend for a grid, right of the panels: the union of every panel's labels, in
    first-seen order."""
    seen: dict[str, Any] = {}
    for line in axes:
        for ax in line:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
    if seen:
        fig.legend(
            list(seen.values()), list(seen), loc="outside right upper", fontsize=8, frameon=False
        )


def _highest(axes: Any) -> float:
    """The largest y value drawn on any panel of `axes` (lines and horizontal rules), 0 if none."""

    found = [
        float(np.nanmax(y))
        for line in axes
        for ax in line
        for drawn in ax.get_lines()
        if len(y := np.asarray(drawn.get_ydata(), dtype=float)) and not np.isnan(y).all()
    ]
    return max(found, default=0.0)
