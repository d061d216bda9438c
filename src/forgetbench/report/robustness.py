"""The robustness table and chart: per attacked model, what each attack brought back (knowledge
recovered on the B half of the forget set), for the terminal and the HTML report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from forgetbench.report.figure import _new_figure, _no_data, _style, _svg, _text, method_styles
from forgetbench.rows import Row, final, methods, number, reference

# Attack variants in the order they are shown; `quantize` is one variant per scheme.
VARIANTS = ("relearn", "int8", "int4", "nf4", "incontext")
VARIANT_TITLES = {
    "relearn": "relearn (A half)",
    "int8": "int8",
    "int4": "int4",
    "nf4": "NF4",
    "incontext": "in-context facts",
}
REFERENCES = ("finetuned", "retain")


def variants(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The variants any row was attacked with, in display order."""
    return [v for v in VARIANTS if any(f"attack/{v}/rougeL" in row for row in rows)]


def _two(row: Mapping[str, Any], variant: str) -> str:
    rouge = row.get(f"attack/{variant}/recovered_rougeL")
    prob = row.get(f"attack/{variant}/recovered_probability")
    if rouge is None and prob is None:
        return "—"
    show = lambda v: "—" if v is None else f"{v:+.2f}"  # noqa: E731
    return f"{show(rouge)} / {show(prob)}"


def robustness_rows(named: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(header, cells) with one row per attacked model (references first): its unattacked B-half
    ROUGE-L and probability, knowledge recovered as ROUGE-L / probability per variant, and the
    plain relearning variant's steps back to the finetuned ROUGE-L."""
    shown = variants(list(named.values()))
    header = ["model", "B ROUGE-L", "B prob.", *(VARIANT_TITLES[v] for v in shown)]
    full = any("attack/relearn_full/budget_steps" in row for row in named.values())
    if full:
        header.append("steps to relearn")
    order = [n for n in REFERENCES if n in named] + [n for n in named if n not in REFERENCES]
    cells = []
    for name in order:
        row = named[name]
        line = [
            name,
            _number(row.get("attack/none/rougeL")),
            _number(row.get("attack/none/probability")),
            *(_two(row, v) for v in shown),
        ]
        if full:
            steps, budget = (
                row.get("attack/relearn_full/steps"),
                row.get("attack/relearn_full/budget_steps"),
            )
            line.append(
                "—" if budget is None else str(steps) if steps is not None else f"> {budget}"
            )
        cells.append(line)
    return header, cells


def _number(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


CAPTION = (
    "Knowledge recovered on the B half of the forget set (questions no attack trains on or shows), "
    "as ROUGE-L / probability: (attacked - unlearned) / (finetuned - unlearned); 0 = the attack "
    "brought nothing back, 1 = it restored the finetuned model's score, — = nothing was "
    "forgotten to recover (within 0.001 of the finetuned model). The retain model, which never "
    "saw the forget set, is the control. Steps to relearn: optimizer steps of relearning on the "
    "whole forget set until forget ROUGE-L is back to attack.relearn_target x the finetuned "
    "model's ('> N': not within the budget)."
)


def print_attack_table(named: Mapping[str, Mapping[str, Any]], attacks: Sequence[str]) -> None:
    header, cells = robustness_rows(named)
    table = Table(title=f"Robustness attacks ({', '.join(attacks)})", caption=CAPTION)
    for i, column in enumerate(header):
        table.add_column(column, justify="left" if i == 0 else "right")
    for line in cells:
        table.add_row(*line)
    Console(width=140).print(table)


def robustness_bars(rows: Sequence[Row], split: str) -> str:
    """Knowledge recovered on the forget set's B half (ROUGE-L): one panel per attack, one bar
    per model (the retain model as the grey control, then each method's final step); 0 is the
    unattacked unlearned model, 1 (dashed) the finetuned model. The axis is [-1, 1]: a ratio
    over a tiny denominator can reach -4, which would flatten every other bar, so a value past
    either end is drawn to the end with a triangle and its number."""
    models = {m: final(rows, split, m) for m in methods(rows)}
    if (retain := reference(rows, split, "retain")) is not None:
        models = {"retain": retain, **models}
    attacked = {m: r for m, r in models.items() if r is not None and "attack/none/rougeL" in r}
    shown = variants(list(attacked.values())) or ["relearn"]
    styles = method_styles(rows)
    names = list(attacked)
    with _style():
        fig = _new_figure(11.5, max(3.2, 1.5 + 0.24 * len(names)))
        axes = fig.subplots(1, len(shown), sharey=True, squeeze=False)[0]
        for ax, variant in zip(axes, shown, strict=True):
            for i, name in enumerate(names):
                value = number(attacked[name], f"attack/{variant}/recovered_rougeL")
                if value is None:
                    continue
                color = "#7f7f7f" if name == "retain" else styles[name]["color"]
                shown_value = min(1.0, max(-1.0, value))
                ax.barh(i, shown_value, height=0.7, color=color)
                if abs(shown_value) < 0.005:
                    # A bar too short to see: the attack brought nothing back (a method that
                    # forgot everything often shows this). Marked, so it is not read as missing.
                    ax.plot(0.0, i, marker="|", color=color, markersize=9, markeredgewidth=2)
                if shown_value != value:
                    ax.plot(shown_value, i, marker=">" if value > 0 else "<", color="#000000",
                            markersize=6, clip_on=False)  # fmt: skip
                    ax.text(shown_value * 0.95, i, f"{value:+.1f}", fontsize=7, va="center",
                            ha="right" if value > 0 else "left")  # fmt: skip
            ax.axvline(0.0, color="#000000", linewidth=0.8)
            ax.axvline(1.0, color="#000000", linestyle="--", linewidth=1)
            ax.set_xlim(-1.05, 1.05)
            ax.set_xticks([-1, -0.5, 0, 0.5, 1])
            ax.tick_params(labelsize=8)
            ax.set_title(_text(VARIANT_TITLES[variant]), fontsize=9)
            ax.grid(True, axis="x", alpha=0.3)
            if not attacked:
                _no_data(ax)
        labels = ["retain (control)" if n == "retain" else _text(n) for n in names]
        axes[0].set_yticks(range(len(names)), labels, fontsize=8)
        axes[0].invert_yaxis()  # the control on top, then the methods in study order
        fig.supxlabel("Knowledge recovered (ROUGE-L on the B half; 1 = the finetuned model's)",
                      fontsize=9)  # fmt: skip
        fig.suptitle(_text(f"Robustness: what each attack brings back — {split}"))
        return _svg(fig, f"robustness-{split}")
