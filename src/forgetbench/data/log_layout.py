"""The TOFU log layout both log readers share: which file holds each evaluation set, the fields a
log must have and the range each per-question number may take. Apart from `logs` so that the
open-unlearning converter (which `logs` calls) can name them without importing its caller."""

from __future__ import annotations

import math

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
