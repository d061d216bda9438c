"""`forgetbench compare --benchmark muse|wmdp`: MUSE or WMDP scores from several files side by side,
forgetbench's results.json (every model of the study) and open-unlearning's evaluation files (one
model each), on forgetbench's keys and scales (`data/open_unlearning_evals.py` maps theirs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forgetbench.criteria import MMLU_KEY, MUSE_KEYS, WMDP_SUBSETS, is_muse, is_wmdp
from forgetbench.data.open_unlearning_evals import (
    LMEVAL_METRICS,
    MUSE_METRICS,
    read_open_unlearning_eval,
)
from forgetbench.errors import DataError
from forgetbench.results import RESULTS_FILE, load_results
from forgetbench.rows import final, methods, number, reference, splits

MUSE_ORDER = (
    MUSE_KEYS["verbmem_f"],
    MUSE_KEYS["knowmem_f"],
    MUSE_KEYS["privleak"],
    MUSE_KEYS["knowmem_r"],
    *(f"muse/mia/{a}" for a in ("loss", "zlib", "min_k", "min_k_plus_plus", "gradnorm")),
)
WMDP_ORDER = (*(f"wmdp/{s}" for s in WMDP_SUBSETS), "wmdp/all", MMLU_KEY)
# Where the two tools' numbers differ by convention rather than by model (docs/metrics.md).
CONVENTIONS = {
    "muse": [
        "open-unlearning's ROUGE is shown x100, as MUSE and forgetbench report it; it stems words "
        "(rouge_score's use_stemmer=True) where MUSE's code and forgetbench do not",
        "open-unlearning's Min-K% leaves out each document's last token; MUSE's code and "
        "forgetbench keep it, so muse/mia/min_k and muse/privleak can differ slightly",
    ],
    "wmdp": ["open-unlearning's numbers are lm-evaluation-harness's `acc` (the same scorer)"],
}


def _their_names(benchmark: str) -> dict[str, str]:
    if benchmark == "muse":
        return {key: name for name, (key, _) in MUSE_METRICS.items()}
    return {key: name for name, key in LMEVAL_METRICS.items()}


def _our_columns(path: Path, benchmark: str) -> list[dict[str, Any]]:
    """One column per model of a results.json: each split's finetuned and retain models, then
    every method at its last step."""
    folder = path.parent if path.name == RESULTS_FILE else path
    rows = [row.model_dump() for row in load_results(folder).rows]
    holds = is_muse if benchmark == "muse" else is_wmdp
    if not holds(rows):
        raise DataError(
            f"{folder / RESULTS_FILE} holds no {benchmark.upper()} scores",
            f"give the results of a '--benchmark {benchmark}' study",
        )
    columns = []
    for split in splits(rows):
        found = [reference(rows, split, m) for m in ("finetuned", "retain")]
        found += [final(rows, split, m) for m in methods(rows)]
        for row in (r for r in found if r is not None):
            values = {k: v for k in _order(benchmark) if (v := number(row, k)) is not None}
            if values:
                columns.append({"source": str(path), "tool": "forgetbench", "split": split,
                                "model": str(row["method"]), "step": int(row.get("step", 0)),
                                "values": values})  # fmt: skip
    return columns


def _order(benchmark: str) -> tuple[str, ...]:
    return MUSE_ORDER if benchmark == "muse" else WMDP_ORDER


def _is_ours(path: Path) -> bool:
    return path.is_dir() or path.name == RESULTS_FILE


def compare_released(paths: list[Path], benchmark: str) -> dict[str, Any]:
    """Every file's models as columns over forgetbench's keys (rows), with open-unlearning's name
    of each key, the metrics only open-unlearning has, and the conventions that differ."""
    columns: list[dict[str, Any]] = []
    theirs_only: list[dict[str, Any]] = []
    for path in paths:
        if _is_ours(path):
            columns += _our_columns(path, benchmark)
            continue
        found, values, extra = read_open_unlearning_eval(path)
        if found != benchmark:
            raise DataError(
                f"{path} is open-unlearning's {found.upper()} evaluation, not {benchmark.upper()}'s",
                f"compare it with --benchmark {found}",
            )
        columns.append({"source": str(path), "tool": "open-unlearning", "split": None,
                        "model": path.parent.name or path.name, "step": None,
                        "values": values})  # fmt: skip
        theirs_only += [{"source": str(path), "name": k, "value": v} for k, v in extra.items()]
    keys = [k for k in _order(benchmark) if any(k in c["values"] for c in columns)]
    names = _their_names(benchmark)
    return {
        "benchmark": benchmark,
        "keys": keys,
        "their_names": {k: names.get(k) for k in keys},
        "columns": columns,
        "theirs_only": theirs_only,
        "conventions": CONVENTIONS[benchmark],
    }
