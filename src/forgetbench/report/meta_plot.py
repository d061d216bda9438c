"""The meta-evaluation's figure (which metrics can be trusted), as inline SVG like the study's
plots (forgetbench.report.figure: same style, same determinism)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.patches import Patch

from forgetbench.report.figure import _PALETTE, _new_figure, _no_data, _style, _svg, _text


def _spread(
    ys: Sequence[float], *, gap: float = 0.032, low: float = 0.0, high: float = 1.02
) -> list[float]:
    """Label heights for ascending `ys`: each at its point's height or one `gap` above the label
    below it, the whole column shifted down if it runs past `high` (not below `low`)."""
    placed: list[float] = []
    for y in ys:
        placed.append(max(y, placed[-1] + gap) if placed else max(y, low))
    overshoot = placed[-1] - high if placed else 0.0
    if overshoot > 0:
        placed = [max(low + i * gap, p - overshoot) for i, p in enumerate(placed)]
    return placed


def meta_eval_plot(metrics: Sequence[Any]) -> str:
    """Faithfulness (x) against robustness (y), one point per metric (open-unlearning's Fig. 4),
    once any metric has a robustness; until then one bar of faithfulness per metric, best on top.
    `metrics` are meta_eval.json's rows (`forgetbench.results.MetaMetric`)."""
    rated = [m for m in metrics if m.faithfulness is not None]
    with _style():
        if any(m.robustness is not None for m in rated):
            # Laid out by hand: the labels' column sits outside the axes, where a constrained
            # layout would shrink the plot to make room for every arrow.
            fig = _new_figure(8.4, 5.4, layout=None)
            ax = fig.add_axes((0.08, 0.1, 0.6, 0.85))
            points = sorted(
                ((m.faithfulness, m.robustness, _text(m.metric)) for m in rated
                 if m.robustness is not None),
                key=lambda p: (p[1], p[0]),
            )  # fmt: skip
            for x, y, _ in points:
                ax.plot([x], [y], "o", color=_PALETTE[0])
            # Faithful metrics crowd the right edge at AUC 1: every label goes to a column right of
            # the axes, spread to one text line apart in the points' order, with a line to its point.
            for (x, y, label), at in zip(points, _spread([y for _, y, _ in points]), strict=True):
                ax.annotate(label, (x, y), xytext=(1.04, at), textcoords=("axes fraction", "data"),
                            fontsize=7, va="center", annotation_clip=False,
                            arrowprops={"arrowstyle": "-", "color": "#bbbbbb", "lw": 0.6})  # fmt: skip
            ax.axvline(0.5, color="#bbbbbb", linestyle=":", linewidth=1)
            ax.set_xlim(0, 1.02)
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("Faithfulness (AUC, positive vs negative pool)")
            ax.set_ylabel("Robustness (harmonic mean of relearning and quantisation)")
        else:
            fig = _new_figure(6.8, 0.9 + 0.24 * max(len(rated), 1))
            ax = fig.add_subplot()
            ordered = sorted(rated, key=lambda m: m.faithfulness)
            ys = list(range(len(ordered)))
            colours = [_PALETTE[0] if m.direction == "higher" else _PALETTE[1] for m in ordered]
            ax.barh(ys, [m.faithfulness for m in ordered], color=colours, height=0.7)
            ax.set_yticks(ys)
            ax.set_yticklabels([_text(m.metric) for m in ordered], fontsize=7)
            ax.axvline(0.5, color="#555555", linestyle="--", linewidth=1)
            ax.set_xlim(0, 1)
            ax.set_xlabel("Faithfulness (AUC: positive pool ranked above negative pool)")
            ax.set_ylabel("Forget-set metric")
            if ordered:
                kinds = [("higher", "higher = knows the forget set"), ("lower", "lower = knows")]
                handles = [
                    Patch(color=_PALETTE[0 if d == "higher" else 1], label=label)
                    for d, label in kinds
                    if any(m.direction == d for m in ordered)
                ]
                ax.legend(handles=handles, fontsize=7, loc="lower right")
            else:
                _no_data(ax)
        ax.grid(True, alpha=0.3)
        return _svg(fig, "meta-eval")
