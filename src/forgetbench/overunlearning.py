"""Over-unlearning: forgetting past what a model that never saw the forget set shows, judged on
a results row against its split's retain model's row (docs/report.md#over-unlearning). The
leaderboard (`rows.leaderboard`) tests each entry at its chosen step; MUSE's criteria
(`criteria.py`) use the same bars. Pure arithmetic over rows, below every layer that reads it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def _number(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


# Over-unlearning (docs/report.md#over-unlearning): forgetting past what a model that never saw
# the forget set shows. Fixed before any study's numbers were looked at: forget-set ROUGE-L
# below half the retain model's, PrivLeak beyond +50 (ten times MUSE's +-5 "no leak" band), or
# half the forget-set generations more degenerate than the retain model's.
OVER_ROUGE_RATIO = 0.5
OVER_PRIVLEAK = 50.0
OVER_DEGENERATE = 0.5


def over_unlearning(
    row: Mapping[str, Any], retain: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The over-unlearning tests `row` fails, each {"test", "value", "retain", "bar", "text"}
    with the numbers that show it; empty when none does (or none can be judged)."""
    found: list[dict[str, Any]] = []
    rouge, target = _number(row, "forget/rougeL"), _number(retain or {}, "forget/rougeL")
    if (
        rouge is not None
        and target is not None
        and target > 0
        and rouge < OVER_ROUGE_RATIO * target
    ):
        text = (f"forget ROUGE-L {rouge:.3f} < {OVER_ROUGE_RATIO:g} x the retain model's "
                f"{target:.3f}")  # fmt: skip
        found.append(_test("forget_rougeL", rouge, target, OVER_ROUGE_RATIO * target, text))
    leak = _number(row, "privleak")
    if leak is not None and leak > OVER_PRIVLEAK:
        text = f"PrivLeak {leak:+.1f} > {OVER_PRIVLEAK:+g} (the retain model's is 0)"
        found.append(_test("privleak", leak, 0.0, OVER_PRIVLEAK, text))
    share = _number(row, "forget/degenerate")
    base = _number(retain or {}, "forget/degenerate") or 0.0
    if share is not None and share >= base + OVER_DEGENERATE:
        text = (f"{share:.0%} of forget-set generations degenerate (the retain model's: "
                f"{base:.0%})")  # fmt: skip
        found.append(_test("degenerate", share, base, base + OVER_DEGENERATE, text))
    return found


def _test(test: str, value: float, retain: float, bar: float, text: str) -> dict[str, Any]:
    return {"test": test, "value": value, "retain": retain, "bar": bar, "text": text}
