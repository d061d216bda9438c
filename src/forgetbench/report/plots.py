"""The report's figures, each returned as an SVG string ready to inline in the HTML page.

Every function takes the results.json rows and one split and draws from them alone. Output is
deterministic: matplotlib's default style (not the user's matplotlibrc), text drawn as paths (no
font files needed by the browser), no date in the metadata, and a fixed `svg.hashsalt` per figure,
so the same results give byte-identical SVG. Element ids are prefixed with the figure's name so
several figures can share one HTML page without id clashes.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from forgetbench.report.tables import (
    UTILITY_RATIO,
    Row,
    final,
    has_key,
    methods,
    number,
    reference,
    trajectory,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SETS = (
    ("forget", "Forget"),
    ("retain", "Retain"),
    ("real_authors", "Real Authors"),
    ("world_facts", "World Facts"),
)
SUBSCORES = (("rougeL", "ROUGE-L"), ("probability", "Probability"), ("truth_ratio", "Truth ratio"))
# Joshi et al. (2024)'s formats, in their order; formats we do not know are drawn after these.
FORMATS = (
    "mcqa",
    "cloze",
    "analogy_qa",
    "analogy_mcqa",
    "odd_one_out",
    "comprehension_qa",
    "comprehension_mcqa",
)
MIA_ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus", "reference", "lira", "rmia")
# `mia/<name>` keys that are counts, not attacks' AUCs.
MIA_COUNTS = ("members", "nonmembers")
# tab10 without its grey, which the reference models use.
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)
_LINESTYLES = ("-", "--", "-.", ":")
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


def method_styles(rows: Sequence[Row]) -> dict[str, dict[str, str]]:
    """Colour and line style of every unlearning method, the same in every figure."""
    return {
        method: {
            "color": _PALETTE[i % len(_PALETTE)],
            "linestyle": _LINESTYLES[(i // len(_PALETTE)) % len(_LINESTYLES)],
        }
        for i, method in enumerate(methods(rows))
    }


def forget_quality_plane(rows: Sequence[Row], split: str) -> str:
    """TOFU Figs. 5-7: model utility (x) against forget quality on a log axis (y). Each method's
    trajectory runs from the finetuned model through its evaluated steps; an arrow marks the last."""
    with _style():
        fig = _new_figure(6.8, 4.8)
        ax = fig.add_subplot()
        ax.set_yscale("log")
        styles = method_styles(rows)
        for method, style in styles.items():
            points = [
                (u, q)
                for r in trajectory(rows, split, method)
                if (u := number(r, "model_utility")) is not None
                and (q := number(r, "forget_quality")) is not None
                and q > 0
            ]
            if not points:
                continue
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", markersize=4, label=_text(method), **style)
            if len(points) > 1:
                ax.annotate(
                    "",
                    xy=points[-1],
                    xytext=points[-2],
                    arrowprops={"arrowstyle": "-|>", "color": style["color"], "lw": 1.5},
                )
        for name in ("finetuned", "retain", "base"):
            row = reference(rows, split, name)
            utility = number(row, "model_utility") if row else None
            quality = number(row, "forget_quality") if row else None
            if utility is not None and quality is not None and quality > 0:
                ax.plot([utility], [quality], linestyle="none", zorder=5, **_REFERENCE_STYLE[name])
        finetuned = reference(rows, split)
        if finetuned is not None and (utility := number(finetuned, "model_utility")) is not None:
            ax.axvline(UTILITY_RATIO * utility, color="#999999", linestyle=":", linewidth=1)
        ax.set_xlabel("Model utility")
        ax.set_ylabel("Forget quality (KS p-value, log scale)")
        ax.set_title(_text(f"Forget quality vs model utility — {split}"))
        ax.grid(True, alpha=0.3)
        _legend(ax)
        return _svg(fig, f"fq-plane-{split}")


def subscore_curves(rows: Sequence[Row], split: str) -> str:
    """TOFU Fig. 8: ROUGE-L, probability and truth ratio (rows) on Forget, Retain, Real Authors and
    World Facts (columns) against the unlearning step, one line per method; the retain model's value
    is the dashed grey line."""
    with _style():
        fig = _new_figure(14, 8.6)
        axes = fig.subplots(len(SUBSCORES), len(SETS), sharex=True, squeeze=False)
        styles = method_styles(rows)
        retain = reference(rows, split, "retain")
        for i, (metric, metric_title) in enumerate(SUBSCORES):
            for j, (set_name, set_title) in enumerate(SETS):
                ax = axes[i][j]
                key = f"{set_name}/{metric}"
                drawn = False
                for method, style in styles.items():
                    points = _series(trajectory(rows, split, method), "step", key)
                    if points:
                        ax.plot(
                            *zip(*points, strict=True),
                            marker="o",
                            markersize=3,
                            label=_text(method),
                            **style,
                        )
                        drawn = True
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
        _figure_legend(fig, axes)
        fig.suptitle(_text(f"TOFU sub-scores over unlearning — {split}"))
        return _svg(fig, f"subscores-{split}")


def format_spider(rows: Sequence[Row], split: str) -> str:
    """Joshi et al. (2024) Fig. 1: one axis per format. Forget-side scores on the left, retain-side on
    the right (when present); finetuned, each method's final step and the retain model as polygons."""
    import numpy as np

    names = format_names(rows)
    sides = [
        s for s in ("forget", "retain") if any(has_key(rows, f"formats/{f}/{s}") for f in names)
    ]
    series: list[tuple[str, Row | None, dict[str, Any]]] = [
        ("finetuned", reference(rows, split), {"color": "#000000", "linestyle": "--"}),
        *((m, final(rows, split, m), s) for m, s in method_styles(rows).items()),
        ("retain", reference(rows, split, "retain"), {"color": "#7f7f7f", "linestyle": ":"}),
    ]
    with _style():
        fig = _new_figure(6.2 * max(len(sides), 1), 6.4)
        angles = np.linspace(0, 2 * math.pi, max(len(names), 1), endpoint=False).tolist()
        for k, side in enumerate(sides or ["forget"]):
            ax = fig.add_subplot(1, max(len(sides), 1), k + 1, projection="polar")
            top = 1.0
            for label, row, style in series:
                values = [number(row, f"formats/{f}/{side}") if row else None for f in names]
                if all(v is None for v in values):
                    continue
                radii = [math.nan if v is None else v for v in values]
                top = max(top, *(v for v in values if v is not None))
                ax.plot(
                    angles + angles[:1],
                    radii + radii[:1],
                    marker="o",
                    markersize=3,
                    label=_text(label),
                    **style,
                )
            ax.set_xticks(angles)
            ax.set_xticklabels([_text(n) for n in names] if names else [""], fontsize=8)
            ax.set_ylim(0, top)
            ax.set_title(_text(f"{side} side — {split}"), pad=18)
        handles, labels = fig.axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(
                handles, labels, loc="outside lower center", ncol=min(len(labels), 5), frameon=False
            )
        return _svg(fig, f"formats-{split}")


def mia_curves(rows: Sequence[Row], split: str, *, attacks: Sequence[str] | None = None) -> str:
    """LUME Figs. 3-4: membership-inference AUC (one panel per attack; all attacks present unless
    `attacks` is given) and model utility against the epoch, one line per method. The retain model
    is the dashed grey line; 0.5 AUC (dotted) is a coin toss."""
    attacks = list(mia_attacks(rows) if attacks is None else attacks)
    panels = [(f"mia/{a}", f"MIA AUC ({a})") for a in attacks]
    if has_key(rows, "model_utility"):
        panels.append(("model_utility", "Model utility"))
    styles = method_styles(rows)
    paths = {m: trajectory(rows, split, m) for m in styles}
    on_epochs = all(number(r, "epoch") is not None for path in paths.values() for r in path)
    x_key = "epoch" if on_epochs else "step"
    retain = reference(rows, split, "retain")
    with _style():
        ncols = min(3, max(len(panels), 1))
        nrows = max(math.ceil(len(panels) / ncols), 1)
        fig = _new_figure(4.6 * ncols, 3.6 * nrows + 0.8)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for index, ax in enumerate(a for line in axes for a in line):
            if index >= len(panels):
                ax.set_visible(False)
                continue
            key, title = panels[index]
            drawn = False
            for method, style in styles.items():
                points = _series(paths[method], x_key, key)
                if points:
                    ax.plot(
                        *zip(*points, strict=True),
                        marker="o",
                        markersize=3,
                        label=_text(method),
                        **style,
                    )
                    drawn = True
            if retain is not None and (value := number(retain, key)) is not None:
                ax.axhline(
                    value, color="#7f7f7f", linestyle="--", linewidth=1, label="retain model"
                )
            if key.startswith("mia/"):
                ax.axhline(0.5, color="#bbbbbb", linestyle=":", linewidth=1)
            if not drawn:
                _no_data(ax)
            ax.set_title(_text(title))
            ax.set_xlabel("Epoch" if on_epochs else "Unlearning step")
            ax.grid(True, alpha=0.3)
        _figure_legend(fig, axes)
        fig.suptitle(_text(f"Membership inference and utility per epoch — {split}"))
        return _svg(fig, f"mia-{split}")


def robustness_bars(rows: Sequence[Row], split: str) -> str:
    """Knowledge recovered on the forget set's B half (ROUGE-L) per attack (groups) and method
    (bars, each method's final step), the retain model as the grey control bar; 0 is the
    unattacked unlearned model, 1 (dashed) the finetuned model."""
    from forgetbench.report.robustness import VARIANT_TITLES, variants

    models = {m: final(rows, split, m) for m in methods(rows)}
    if (retain := reference(rows, split, "retain")) is not None:
        models = {"retain": retain, **models}
    attacked = {m: r for m, r in models.items() if r is not None and "attack/none/rougeL" in r}
    shown = variants(list(attacked.values()))
    styles = method_styles(rows)
    with _style():
        fig = _new_figure(max(6.0, 1.4 * len(shown) * max(len(attacked), 1) / 4 + 3), 4.4)
        ax = fig.subplots()
        width = 0.8 / max(len(attacked), 1)
        for i, (name, row) in enumerate(attacked.items()):
            xs, ys = [], []
            for j, variant in enumerate(shown):
                value = number(row, f"attack/{variant}/recovered_rougeL")
                if value is not None:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(value)
            color = "#7f7f7f" if name == "retain" else styles[name]["color"]
            label = "retain (control)" if name == "retain" else name
            ax.bar(xs, ys, width=width, color=color, label=_text(label))
        ax.axhline(0.0, color="#000000", linewidth=0.8)
        ax.axhline(1.0, color="#000000", linestyle="--", linewidth=1, label="finetuned model")
        ax.set_xticks(range(len(shown)), [_text(VARIANT_TITLES[v]) for v in shown])
        ax.set_xlabel("Attack")
        ax.set_ylabel("Knowledge recovered (ROUGE-L, B half)")
        ax.grid(True, axis="y", alpha=0.3)
        if not attacked:
            _no_data(ax)
        _figure_legend(fig, [[ax]])
        fig.suptitle(_text(f"Robustness: what each attack brings back — {split}"))
        return _svg(fig, f"robustness-{split}")


# --- drawing helpers -------------------------------------------------------------------------


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib
    import matplotlib.style

    # The default style, whatever the user's matplotlibrc says, so output depends on results alone.
    with matplotlib.style.context("default"), matplotlib.rc_context({"svg.fonttype": "path"}):
        yield


def _new_figure(width: float, height: float, *, layout: str | None = "constrained") -> Figure:
    # A bare Figure, never pyplot: no global figure registry, no GUI backend, nothing to close.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout=layout)


def _svg(fig: Figure, name: str) -> str:
    import matplotlib

    prefix = slug(name)
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": prefix}):
        fig.savefig(
            buffer,
            format="svg",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML declaration and DOCTYPE: the SVG sits inline
    return _scope_ids(svg, prefix)


def _scope_ids(svg: str, prefix: str) -> str:
    """Prefix every element id (and every reference to one) so inline SVGs do not collide."""
    ids = set(re.findall(r'(?<=\s)id="([^"]+)"', svg))
    svg = re.sub(r'(?<=\s)id="([^"]+)"', lambda m: f'id="{prefix}-{m[1]}"', svg)

    def ref(match: re.Match[str]) -> str:
        return f"{match[1]}{prefix}-{match[2]}" if match[2] in ids else match[0]

    return re.sub(r'(href="#|url\(#)([^")]+)', ref, svg)


def slug(text: str) -> str:
    """`text` reduced to characters that are safe in an HTML id and an XML name."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def _text(text: str) -> str:
    # Dataset strings are shown literally: an unescaped '$' would switch matplotlib to mathtext.
    return text.replace("$", r"\$")


def _series(path: Sequence[Row], x_key: str, y_key: str) -> list[tuple[float, float]]:
    return [
        (x, y)
        for r in path
        if (x := number(r, x_key)) is not None and (y := number(r, y_key)) is not None
    ]


def _no_data(ax: Axes) -> None:
    ax.text(
        0.5, 0.5, "not computed", ha="center", va="center", color="#999999", transform=ax.transAxes
    )


def _legend(ax: Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")


def _figure_legend(fig: Figure, axes: Any) -> None:
    """One legend for a grid: the union of every panel's labels, in first-seen order."""
    seen: dict[str, Any] = {}
    for line in axes:
        for ax in line:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
    if seen:
        fig.legend(
            list(seen.values()),
            list(seen),
            loc="outside lower center",
            ncol=min(len(seen), 6),
            frameon=False,
        )


# --- meta-evaluation ---------------------------------------------------------------------------


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
                from matplotlib.patches import Patch

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
