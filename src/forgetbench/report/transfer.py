"""The report's cross-format matrix and sequence-of-requests sections (study.unlearn_formats,
study.sequence; docs/transfer.md), drawn from results.json's `cross_format` and `sequence` lists.

Cross-format: per method and split, a heatmap of the forget-set gap closed, train format (rows)
by evaluation format (columns): (finetuned - unlearnt) / (finetuned - retain) of the format's
forget score, 0 = the finetuned model's score, 1 = the retain model's, above 1 past it; with each
unlearnt model's utility beside it, and the findings in words. Sequence: per method, forget
quality and utility against the number of requests, the sequential runs beside one-shot
unlearning of the same union."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from forgetbench.report.figure import _new_figure, _style, _svg, _text
from forgetbench.report.tables import format_cell
from forgetbench.rows import Row, number, reference

# A finetuned-to-retain difference smaller than this leaves nothing to close (the format does
# not separate the two models): the cell is left empty rather than dividing by noise.
MIN_GAP = 1e-3
HEATMAP_CAPTION = (
    "Rows: the format the forget set (and the retain set, for methods that read one) was "
    "presented in while unlearning. Columns: the format the forget set is evaluated in (QA = "
    "TOFU's forget ROUGE-L; the others their formats/<format>/forget score). A cell is the share "
    "of the forget-set gap closed, (finetuned − unlearnt) / (finetuned − retain model): 0 = as "
    "the finetuned model, 1 = as the retain model, above 1 past it; empty where the two "
    "references differ by less than 0.001. Right: each unlearnt model's utility (the retain "
    "model's and the finetuned model's as lines)."
)
SEQUENCE_CAPTION = (
    "x: the number of requests applied one after another to the same model (request k forgets "
    "the questions split k adds to split k−1, with the same method and budget). Left: forget "
    "quality (KS p-value, log scale) on the union of every request so far, against the retain "
    "model of that union; right: model utility. Solid: the sequence; dashed: the same method "
    "unlearning the union in one request from the finetuned model; grey: the retain model."
)
# The forget score of each format's evaluation, by the name the report shows: QA is TOFU's forget
# ROUGE-L, the others their `formats/<file>/forget` score (each higher when the model knows more).
EVAL_KEYS = {
    "QA": "forget/rougeL",
    "cloze": "formats/cloze/forget",
    "MCQA": "formats/mcqa/forget",
    "analogy": "formats/analogy_qa/forget",
    "comprehension": "formats/comprehension_qa/forget",
    "analogy MCQA": "formats/analogy_mcqa/forget",
    "comprehension MCQA": "formats/comprehension_mcqa/forget",
    "odd one out": "formats/odd_one_out/forget",
}
_FORMAT_TITLES = {
    "qa": "QA",
    "cloze": "cloze",
    "mcqa": "MCQA",
    "analogy": "analogy",
    "comprehension": "comprehension",
}


def eval_columns(rows: Sequence[Row]) -> list[tuple[str, str]]:
    """(title, score key) of every evaluation format some row scores."""
    return [(t, k) for t, k in EVAL_KEYS.items() if any(number(r, k) is not None for r in rows)]


def gap_closed(value: float | None, finetuned: float | None, retain: float | None) -> float | None:
    """(finetuned - value) / (finetuned - retain); None without the three or without a gap."""
    if value is None or finetuned is None or retain is None:
        return None
    gap = finetuned - retain
    return None if abs(gap) < MIN_GAP else (finetuned - value) / gap


def matrix(
    cross: Sequence[Row], rows: Sequence[Row], split: str, method: str
) -> dict[str, Any] | None:
    """One method's matrix on one split: train formats, eval columns, gap closed per cell and
    utility per train format; None without its rows or references."""
    own = [r for r in cross if r["split"] == split and r["method"] == method]
    finetuned, retain = reference(rows, split, "finetuned"), reference(rows, split, "retain")
    if not own or finetuned is None or retain is None:
        return None
    columns = eval_columns([*own, finetuned])
    cells = [
        [gap_closed(number(r, k), number(finetuned, k), number(retain, k)) for _, k in columns]
        for r in own
    ]
    return {
        "train": [str(r.get("unlearn_format", "qa")) for r in own],
        "columns": [t for t, _ in columns],
        "cells": cells,
        "utility": [number(r, "model_utility") for r in own],
        "finetuned_utility": number(finetuned, "model_utility"),
        "retain_utility": number(retain, "model_utility"),
    }


def heatmap(data: dict[str, Any], split: str, method: str) -> str:
    """The matrix as a heatmap (gap closed, 0 to 1 on a diverging scale centred on 0.5) with the
    utility of each row's model as bars beside it."""
    train, columns = data["train"], data["columns"]
    values = np.array([[math.nan if v is None else v for v in line] for line in data["cells"]])
    with _style():
        fig = _new_figure(1.2 + 1.0 * len(columns) + 2.2, 1.4 + 0.55 * len(train))
        grid = fig.add_gridspec(1, 2, width_ratios=[len(columns), 2.2])
        ax, side = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
        image = ax.imshow(values, cmap="RdYlGn", vmin=-0.25, vmax=1.25, aspect="auto")
        ax.set_xticks(range(len(columns)), [_text(c) for c in columns], rotation=30, ha="right")
        ax.set_yticks(range(len(train)), [_text(_FORMAT_TITLES.get(t, t)) for t in train])
        ax.set_xlabel("evaluated in")
        ax.set_ylabel("unlearnt in")
        for i in range(len(train)):
            for j in range(len(columns)):
                v = values[i, j]
                ax.text(j, i, "—" if math.isnan(v) else f"{v:.2f}", ha="center", va="center",
                        fontsize=8)  # fmt: skip
        fig.colorbar(image, ax=ax, label="forget-set gap closed", shrink=0.8)
        ax.set_title(_text(f"{method} — {split}"))
        utility = [0.0 if u is None else u for u in data["utility"]]
        side.barh(range(len(train)), utility, color="#1f77b4")
        side.set_ylim(len(train) - 0.5, -0.5)
        side.set_yticks([])
        for value, style in ((data["retain_utility"], ":"), (data["finetuned_utility"], "--")):
            if value is not None:
                side.axvline(value, color="#7f7f7f", linestyle=style, linewidth=1)
        side.set_xlabel("model utility")
        return _svg(fig, f"cross-format-{split}-{method}")


def findings(data: dict[str, Any], method: str) -> list[str]:
    """The matrix in words: for each train format other than QA, the share of the QA gap (and of
    its own format's gap) it closed, and its utility beside QA unlearning's."""
    out = []
    columns = data["columns"]
    rows = dict(zip(data["train"], zip(data["cells"], data["utility"], strict=True), strict=True))
    qa_col = columns.index("QA") if "QA" in columns else None
    qa_utility = rows["qa"][1] if "qa" in rows else None
    for fmt, (cells, utility) in rows.items():
        if fmt == "qa":
            continue
        title = _FORMAT_TITLES.get(fmt, fmt)
        parts = []
        if qa_col is not None and cells[qa_col] is not None:
            parts.append(f"{100 * cells[qa_col]:.0f} % of the QA gap")
        own = columns.index(title) if title in columns else None
        if own is not None and cells[own] is not None:
            parts.append(f"{100 * cells[own]:.0f} % of its own {title} gap")
        if not parts:
            continue
        text = f"Unlearning in {title} removes {' and '.join(parts)} for {method}"
        if utility is not None and qa_utility is not None:
            text += f" (utility {utility:.3f}; {qa_utility:.3f} when unlearning in QA)"
        out.append(text + ".")
    return out


def sequence_plot(seq: Sequence[Row], method: str) -> str:
    """Forget quality and utility against the number of requests for one method: the sequence,
    one-shot unlearning of each union, and the retain model."""
    with _style():
        fig = _new_figure(8.4, 3.6)
        panels = fig.subplots(1, 2)
        for ax, key, title in (
            (panels[0], "forget_quality", "Forget quality (union so far)"),
            (panels[1], "model_utility", "Model utility"),
        ):
            for mode, name, style in (
                ("sequential", method, {"color": "#1f77b4", "linestyle": "-", "marker": "o"}),
                ("one-shot", method, {"color": "#ff7f0e", "linestyle": "--", "marker": "s"}),
                ("reference", "retain", {"color": "#7f7f7f", "linestyle": ":", "marker": "D"}),
            ):
                points = sorted(
                    (int(r["request"]), v)
                    for r in seq
                    if r.get("mode") == mode and r["method"] == name
                    and (v := number(r, key)) is not None and (v > 0 or key != "forget_quality")
                )  # fmt: skip
                if points:
                    xs, ys = zip(*points, strict=True)
                    label = {"reference": "retain model"}.get(mode, mode)
                    ax.plot(xs, ys, label=label, **style)
            if key == "forget_quality":
                ax.set_yscale("log")
            ax.set_xlabel("requests so far")
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            ax.xaxis.get_major_locator().set_params(integer=True)
        panels[0].legend(fontsize=8, loc="best")
        fig.suptitle(_text(f"Sequential unlearning — {method}"))
        return _svg(fig, f"sequence-{method}")


def sequence_table(seq: Sequence[Row], method: str) -> dict[str, Any]:
    """Per request: the union's split, forget quality and utility of the sequence and of one-shot
    unlearning, and how much of the earlier requests' forget ROUGE-L came back."""

    def find(mode: str, k: int) -> Row | None:
        hits = [r for r in seq if r.get("mode") == mode and r["method"] == method
                and r.get("request") == k]  # fmt: skip
        return hits[0] if hits else None

    body = []
    for k in sorted({int(r["request"]) for r in seq if r["method"] == method}):
        sequential, shot = find("sequential", k), find("one-shot", k)
        if sequential is None:
            continue
        body.append(
            [
                k,
                sequential["split"],
                format_cell(number(sequential, "forget_quality")),
                format_cell(number(shot, "forget_quality") if shot else None),
                format_cell(number(sequential, "model_utility")),
                format_cell(number(shot, "model_utility") if shot else None),
                format_cell(number(sequential, "sequence/earlier/relearned_rougeL")),
            ]
        )
    head = ["request", "union", "forget quality", "one-shot forget quality", "utility",
            "one-shot utility", "earlier requests' ROUGE-L regained"]  # fmt: skip
    return {"head": head, "body": body}


def transfer_sections(
    rows: Sequence[Row], cross: Sequence[Row], seq: Sequence[Row]
) -> dict[str, Any] | None:
    """What the template shows for both sections; None when the results have neither."""
    if not cross and not seq:
        return None
    matrices = []
    for split in dict.fromkeys(r["split"] for r in cross):
        for method in dict.fromkeys(r["method"] for r in cross if r["split"] == split):
            data = matrix(cross, rows, split, method)
            if data is None:
                continue
            matrices.append(
                {
                    "id": f"cross-format-{split}-{method}",
                    "split": split,
                    "method": method,
                    "svg": heatmap(data, split, method),
                    "findings": findings(data, method),
                }
            )
    sequences = [
        {
            "id": f"sequence-{method}",
            "method": method,
            "svg": sequence_plot(seq, method),
            "table": sequence_table(seq, method),
        }
        for method in dict.fromkeys(r["method"] for r in seq if r.get("mode") == "sequential")
    ]
    return {
        "matrices": matrices,
        "heatmap_caption": HEATMAP_CAPTION,
        "sequences": sequences,
        "sequence_caption": SEQUENCE_CAPTION,
    }
