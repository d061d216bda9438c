"""The report's meta-evaluation section (which metrics can be trusted), from meta_eval.json: the
pools, the table of each metric's faithfulness and robustness, and its figure
(`report/meta_plot.py`)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from forgetbench.report import tables
from forgetbench.report.meta_plot import meta_eval_plot
from forgetbench.results import MetaEval


def meta_eval_section(meta: MetaEval | None) -> dict[str, Any] | None:
    """The meta-evaluation section: pools, table and plot; None without a meta_eval.json."""
    if meta is None:
        return None

    def cell(m: Any, key: str) -> str:
        value = getattr(m, key)
        return tables.format_cell(value) if value is not None else "—"

    body = [
        [
            m.metric,
            m.direction,
            tables.format_cell(m.faithfulness),
            cell(m, "robustness") if m.robustness is not None else (m.robustness_note or "—"),
            cell(m, "relearning"),
            cell(m, "quantisation"),
            len(m.attacked),
            f"{m.positives} / {m.negatives}",
            tables.format_cell(m.positive_mean),
            tables.format_cell(m.negative_mean),
        ]
        for m in meta.metrics
    ]
    head = ["metric", "knows if", "faithfulness (AUC)", "robustness", "relearning R",
            "quantisation Q", "attacked models", "pools (+ / −)"]  # fmt: skip
    robust = meta.robustness or {}
    return {
        "split": meta.split,
        "scale": meta.scale,
        "sizes": meta.pool_sizes(),
        "models": [[m.pool, m.label, m.split, m.seed, m.epochs, f"{m.lr:g}"] for m in meta.models],
        "head": [*head, "positive mean", "negative mean"],
        "body": body,
        "robust": any(m.robustness is not None for m in meta.metrics),
        "attacked_methods": ", ".join(robust.get("methods", [])),
        "utility_kept": robust.get("utility_kept"),
        "not_judged": list(meta.not_judged.items()),
        "svg": Markup(meta_eval_plot(meta.metrics)),
    }
