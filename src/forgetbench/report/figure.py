"""What every figure of the report shares: a bare matplotlib Figure in the default style, each
method's colour, marker and line style (the same in every figure), labels drawn literally, the
mark of a panel with nothing to draw, and the figure written as inline SVG.

Output is deterministic: matplotlib's default style (not the user's matplotlibrc), text drawn as
paths (no font files needed by the browser), no date in the metadata, and a fixed `svg.hashsalt`
per figure, so the same results give byte-identical SVG. Element ids are prefixed with the
figure's name so several figures can share one HTML page without id clashes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib
import matplotlib.style
from matplotlib.figure import Figure

from forgetbench.rows import Row, methods

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# tab10 without its grey (which the reference models use), then nine darker or lighter hues: a
# study has fifteen methods and each needs its own colour. The markers cycle with a period (7)
# prime to the palette's (18), so colour and marker together stay distinct for 126 methods; the
# second nine are ordered so that methods sharing a marker differ most in colour (CIELAB
# distance >= 35 among the first 21 methods, tests/report/test_plots.py).
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
    "#b8860b",
    "#000080",
    "#800000",
    "#2f4f4f",
    "#fb9a99",
    "#006d2c",
    "#c51b8a",
    "#6a3d9a",
    "#66c2a5",
)
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_LINESTYLES = ("-", "--", "-.", ":")


def method_styles(rows: Sequence[Row]) -> dict[str, dict[str, str]]:
    """Colour, marker and line style of every unlearning method, the same in every figure."""
    return {
        method: {
            "color": _PALETTE[i % len(_PALETTE)],
            "marker": _MARKERS[i % len(_MARKERS)],
            "linestyle": _LINESTYLES[(i // len(_PALETTE)) % len(_LINESTYLES)],
        }
        for i, method in enumerate(methods(rows))
    }


@contextmanager
def _style() -> Iterator[None]:

    # The default style, whatever the user's matplotlibrc says, so output depends on results alone.
    with matplotlib.style.context("default"), matplotlib.rc_context({"svg.fonttype": "path"}):
        yield


def _new_figure(width: float, height: float, *, layout: str | None = "constrained") -> Figure:
    # A bare Figure, never pyplot: no global figure registry, no GUI backend, nothing to close.

    return Figure(figsize=(width, height), layout=layout)


def _panel_grid(
    count: int, *, width: float, margin: float, sharey: bool = False
) -> tuple[Figure, Any, list[Any]]:
    """A figure for `count` panels of `width` inches, at most three to a line, with `margin`
    inches beside them for the legend: the figure, its grid of axes (for the legend) and the
    `count` panels, the grid's spare axes hidden."""
    cols = min(count, 3) or 1
    lines = -(-count // cols) or 1
    fig = _new_figure(width * cols + margin, 2.9 * lines + 0.6)
    axes = fig.subplots(lines, cols, sharey=sharey, squeeze=False)
    panels = [ax for line in axes for ax in line]
    for ax in panels[count:]:
        ax.set_visible(False)
    return fig, axes, panels[:count]


def _svg(fig: Figure, name: str) -> str:

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


def _no_data(ax: Axes) -> None:
    ax.text(
        0.5, 0.5, "not computed", ha="center", va="center", color="#999999", transform=ax.transAxes
    )
