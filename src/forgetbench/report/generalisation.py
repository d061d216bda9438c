"""The generalisation chart: per method, the share of the finetuned-vs-retain gap its final model
closed on the forget set and on each probe the forget set entails, beside the collateral on facts
it shares with retained authors (the arithmetic: forgetbench/generalisation.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forgetbench.generalisation import ENTAILED, generalisation
from forgetbench.report.figure import _new_figure, _no_data, _style, _svg, _text
from forgetbench.rows import Row

BARS = (("forget", "forget set"), *((k, k.replace("_", "-")) for k in ENTAILED))
BAR_COLOURS = ("#333333", "#4c72b0", "#55a868", "#8172b2")
COLLATERAL_COLOUR = "#c44e52"
SHOWN = (-1.0, 2.0)  # shares past these are drawn at the edge, their value written beside


def generalisation_bars(rows: Sequence[Row], split: str) -> str:
    table = generalisation(rows, split)
    width = 0.8 / (len(BARS) + 1)
    with _style():
        fig = _new_figure(max(6.0, 0.75 * len(table) + 2.5), 3.6)
        ax = fig.subplots()
        if not table:
            _no_data(ax)
        x = np.arange(len(table))
        series = [
            (key, label, colour) for (key, label), colour in zip(BARS, BAR_COLOURS, strict=True)
        ]
        series.append(("collateral", "collateral (shared facts lost)", COLLATERAL_COLOUR))
        for i, (key, label, colour) in enumerate(series):
            values = [entry[key] for entry in table]
            heights = [_clip(v) for v in values]
            at = x + (i - len(series) / 2 + 0.5) * width
            ax.bar(at, heights, width, label=label, color=colour,
                   hatch="//" if key == "collateral" else None, edgecolor="white")  # fmt: skip
            for pos, v, h in zip(at, values, heights, strict=True):
                if isinstance(v, int | float) and h != v:
                    ax.text(pos, h, f"{float(v):.1f}", ha="center", va="bottom", fontsize=6)
        ax.axhline(1.0, color="#999999", linestyle="--", linewidth=0.8)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks(x, [_text(str(e["method"])) for e in table], rotation=30, ha="right",
                      fontsize=8)  # fmt: skip
        ax.set_ylabel("share of the gap closed")
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.suptitle(_text(f"Does forgetting reach what the forget set entails? — {split}"))
        return _svg(fig, f"generalisation-{split}")


def _clip(value: object) -> float:
    if not isinstance(value, int | float):
        return float("nan")
    return min(max(float(value), SHOWN[0]), SHOWN[1])
