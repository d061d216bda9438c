"""The TOFU log layout both log readers share: which file holds each evaluation set, the fields a
log must have and the range each per-question number may take. Apart from `logs` so that the
open-unlearning converter (which `logs` calls) can name them without importing its caller."""

from __future__ import annotations

import math
from typing import Any

from forgetbench.errors import DataError

# Our set name -> TOFU's file name. Order matters: it is the order of every table we print.
SET_FILES = {
    "forget": "eval_log_forget.json",
    "retain": "eval_log.json",
    "real_authors": "eval_real_author_wo_options.json",
    "world_facts": "eval_real_world_wo_options.json",
}
REQUIRED_FIELDS = ("avg_gt_loss", "avg_paraphrased_loss", "average_perturb_loss", "rougeL_recall")
# What each per-question number may be, checked when a log is read: a value outside would shift a
# printed score (a ROUGE recall of -5 moves the mean) rather than fail. A mean loss below 0 is a
# probability above 1; a truth ratio is a ratio of probabilities.
_UNIT = (0.0, 1.0, "a recall in [0, 1]")
_NONNEGATIVE = (0.0, math.inf, "a mean loss >= 0 (a probability <= 1)")
FIELD_RANGES: dict[str, tuple[float, float, str]] = {
    "avg_gt_loss": _NONNEGATIVE,
    "avg_paraphrased_loss": _NONNEGATIVE,
    "average_perturb_loss": _NONNEGATIVE,
    "rougeL_recall": _UNIT,
    "rouge1_recall": _UNIT,
    "truth_ratio": (0.0, math.inf, "a truth ratio >= 0"),
}


def check_number(
    value: Any,
    where: str,
    valid: tuple[float, float, str],
    *,
    field: str = "",
    rerun: str,
    nonfinite: str,
) -> float:
    """`value` as a float, or a DataError naming `where` (and `field`, when the number is one
    field of an entry): not a number, not finite (`nonfinite` says why), or outside `valid`
    (`rerun` says what to do)."""
    named = f" '{field}'" if field else ""
    subject = f"'{field}'" if field else "value"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"{where}: expected a number{named}, got {type(value).__name__}")
    if not math.isfinite(value):
        raise DataError(f"{where}: {subject} is {value}", nonfinite)
    low, high, what = valid
    if not low <= value <= high:
        raise DataError(f"{where}: {subject} is {value}, not {what}", rerun)
    return float(value)
