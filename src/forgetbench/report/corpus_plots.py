"""The document benchmarks' figures (MUSE, WMDP), drawn as the TOFU ones are (`report/plots.py`):
each score over the unlearning steps, one line per method beside the finetuned and retain
models' values, and the forget-utility plane, each method's path from the finetuned model through
its evaluated steps. Every function takes the results.json rows and one split."""

from __future__ import annotations

from collections.abc import Sequence

from forgetbench.report.figure import (
    _new_figure,
    _no_data,
    _panel_grid,
    _style,
    _svg,
    _text,
    method_styles,
)
from forgetbench.report.plots import _REFERENCE_STYLE, _figure_legend, _method_lines, _series
from forgetbench.rows import Row, number, reference, trajectory

# (key, title) of what each benchmark's figures draw; utility is the plane's x axis.
MUSE_CURVES = (
    ("muse/verbmem_f", "VerbMem forget"),
    ("muse/knowmem_f", "KnowMem forget"),
    ("muse/knowmem_r", "KnowMem retain (utility)"),
)
MUSE_PLANE = (("muse/verbmem_f", "VerbMem forget"), ("muse/knowmem_f", "KnowMem forget"))
MUSE_UTILITY = ("muse/knowmem_r", "KnowMem retain")
WMDP_TITLES = {"bio": "WMDP-Bio", "cyber": "WMDP-Cyber", "chem": "WMDP-Chem",
                      "all": "WMDP (all)"}  # fmt: skip
MMLU = ("mmlu/all", "MMLU (utility)")
# Reference lines: the finetuned model (where unlearning starts) black, the retain model (the
# target) grey, both dashed so a method's line reads apart from them.
_LINES = {"finetuned": "#000000", "retain": "#7f7f7f"}


def present(
    rows: Sequence[Row], split: str, panels: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The panels with a value in some row of `split`."""
    return [
        (key, title)
        for key, title in panels
        if any(r["split"] == split and number(r, key) is not None for r in rows)
    ]


def score_curves(
    rows: Sequence[Row], split: str, panels: Sequence[tuple[str, str]], *, title: str,
    name: str, chance: float | None = None,
) -> str:  # fmt: skip
    """One panel per score (`panels`: key, title) against the unlearning step, one line per
    method from the finetuned model; the finetuned and retain models' values are dashed lines
    (black, grey), `chance` a dotted one."""
    styles = method_styles(rows)
    with _style():
        fig, axes, drawn_on = _panel_grid(len(panels), width=3.4, margin=1.8)
        for ax, (key, panel_title) in zip(drawn_on, panels, strict=True):
            drawn = _method_lines(ax, rows, split, styles, key)
            for model, colour in _LINES.items():
                row = reference(rows, split, model)
                if row is not None and (value := number(row, key)) is not None:
                    ax.axhline(value, color=colour, linestyle="--", linewidth=1,
                               label=f"{model} model")  # fmt: skip
                    drawn = True
            if chance is not None:
                ax.axhline(chance, color="#bbbbbb", linestyle=":", linewidth=1, label="chance")
            if not drawn:
                _no_data(ax)
            # From 0 (a score at 0 is a method that destroyed the text), accuracies up to 1.
            ax.set_ylim(0, 1.02 if chance is not None else None)
            ax.set_title(_text(panel_title))
            ax.set_xlabel("Unlearning step")
            ax.grid(True, alpha=0.3)
        _figure_legend(fig, axes)
        fig.suptitle(_text(f"{title} — {split}"))
        return _svg(fig, f"{name}-{split}")


def trade_off_plane(
    rows: Sequence[Row], split: str, panels: Sequence[tuple[str, str]],
    utility: tuple[str, str], *, title: str, name: str, y_label: str,
    chance: float | None = None, limits: tuple[float, float] | None = None,
) -> str:  # fmt: skip
    """One panel per forget score (`panels`, up) against the utility score (`utility`, across):
    each method's path from the finetuned model through its evaluated steps, its last step
    ringed; the finetuned model a black star, the retain model a grey diamond. Unlearning should
    move a method down toward the retain model (or `chance`, dotted) without moving left."""
    styles = method_styles(rows)
    x_key, x_title = utility
    with _style():
        fig = _new_figure(3.4 * len(panels) + 1.8, 3.6)
        axes = fig.subplots(1, len(panels), sharex=True, sharey=limits is not None,
                            squeeze=False)[0]  # fmt: skip
        for ax, (key, panel_title) in zip(axes, panels, strict=True):
            drawn = False
            for method, style in styles.items():
                points = _series(trajectory(rows, split, method), x_key, key)
                if not points:
                    continue
                ax.plot(*zip(*points, strict=True), markersize=4, label=_text(method), **style)
                ax.plot(*points[-1], linestyle="none", marker="o", markersize=10,
                        markerfacecolor="none", markeredgecolor=style["color"])  # fmt: skip
                drawn = True
            for model in _LINES:
                row = reference(rows, split, model)
                points = _series([row], x_key, key) if row is not None else []
                if points:
                    ax.plot(*points[0], linestyle="none", zorder=5, **_REFERENCE_STYLE[model])
                    drawn = True
            if chance is not None:
                ax.axhline(chance, color="#bbbbbb", linestyle=":", linewidth=1, label="chance")
                ax.axvline(chance, color="#bbbbbb", linestyle=":", linewidth=1)
            if not drawn:
                _no_data(ax)
            if limits is not None:
                ax.set_xlim(*limits)
                ax.set_ylim(*limits)
            ax.set_title(_text(panel_title))
            ax.set_xlabel(_text(x_title))
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(y_label)
        _figure_legend(fig, [axes])
        fig.suptitle(_text(f"{title} — {split}"))
        return _svg(fig, f"{name}-{split}")


def muse_figures(rows: Sequence[Row], split: str) -> list[tuple[str, str]]:
    """MUSE's two figures on `split` as (kind, SVG): the scores over the unlearning steps and the
    forget-utility plane (VerbMem and KnowMem on the forget set against KnowMem on the retain
    set); a figure without any of its scores is left out."""
    figures = []
    curves = present(rows, split, MUSE_CURVES)
    if curves:
        svg = score_curves(rows, split, curves, title="MUSE over unlearning", name="muse-curves")
        figures.append(("curves", svg))
    plane = present(rows, split, MUSE_PLANE)
    if plane and present(rows, split, (MUSE_UTILITY,)):
        svg = trade_off_plane(
            rows, split, plane, MUSE_UTILITY, title="MUSE forget vs utility", name="muse-plane",
            y_label="on the forget set (ROUGE-L x100)",
        )  # fmt: skip
        figures.append(("plane", svg))
    return figures


def wmdp_figures(
    rows: Sequence[Row], split: str, subsets: Sequence[str], chance: float
) -> list[tuple[str, str]]:
    """WMDP's two figures on `split` as (kind, SVG): each subset's accuracy (all included) against
    MMLU, one panel per subset, and every accuracy and MMLU over the unlearning steps."""
    panels = [(f"wmdp/{s}", WMDP_TITLES.get(s, s)) for s in subsets]
    figures = []
    if present(rows, split, (MMLU,)):
        svg = trade_off_plane(
            rows, split, panels, ("mmlu/all", "MMLU accuracy"), title="WMDP accuracy vs utility",
            name="wmdp", y_label="WMDP accuracy", chance=chance, limits=(0.0, 1.02),
        )  # fmt: skip
        figures.append(("plane", svg))
    curves = present(rows, split, [*panels, MMLU])
    if curves:
        svg = score_curves(
            rows, split, curves, title="WMDP over unlearning", name="wmdp-curves", chance=chance
        )
        figures.append(("curves", svg))
    return figures
