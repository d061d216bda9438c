"""What every finding shares: the verdicts, the `Finding` record, the thresholds the rules use
(each rule's text quotes them) and the small helpers the rules are written with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from forgetbench.rows import UTILITY_RATIO, Row, number, reference

Verdict = Literal["holds", "does not hold", "not measurable here"]
HOLDS: Verdict = "holds"
FAILS: Verdict = "does not hold"
UNMEASURABLE: Verdict = "not measurable here"

# "Most utility": the leaderboard's bar, model utility >= 0.9 x the finetuned model's.
MOST_UTILITY = UTILITY_RATIO
# TOFU's threshold: a KS p-value above it means the forget-set truth ratios cannot be told apart
# from the retain model's.
FORGET_QUALITY_PASS = 0.05
# A forget-quality move along a trajectory counts when log10 p changes by at least this much;
# smaller moves are the KS test's own jitter between neighbouring snapshots.
ZIGZAG_DECADES = 0.1
# Utility has collapsed when the final model keeps at most this share of the finetuned utility.
COLLAPSED = 0.5
# Membership inference is near chance when |AUC - 0.5| is at most this.
MIA_BAND = 0.1
# Formats: a method counts as having unlearned the QA format when it removed at least half of the
# finetuned-over-retain gap on forget-set ROUGE-L; it "keeps answering in other formats" when the
# share of the gap left on the other formats exceeds the QA share by at least FORMAT_GAP. Formats
# whose finetuned and retain scores differ by less than MIN_FORMAT_SPREAD have no gap to measure
# (at tiny scale that is one or two questions). Shares are clipped to [0, 1]: a format pushed past
# the retain model, or above the finetuned one, by a question or two must not outweigh the rest.
QA_UNLEARNED = 0.5
FORMAT_GAP = 0.1
MIN_FORMAT_SPREAD = 0.1

# Generalisation probes: a method's forgetting "stops at the sentences" when the mean share of the
# entailed probes' gap it closed is at least PROBE_SHORTFALL below its share of the forget set's.
PROBE_SHORTFALL = 0.1

GRADIENT_ASCENT = "grad_ascent"
ZIGZAG_METHODS = ("grad_diff", "dpo", "npo")


@dataclass(frozen=True)
class Finding:
    source: str
    claim: str
    rule: str
    verdict: Verdict
    numbers: tuple[str, ...]


def _f(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g}" if 0 < abs(value) < 1e-3 else f"{value:.3f}"


def _finetuned_utility(rows: Sequence[Row], split: str) -> float | None:
    row = reference(rows, split)
    return number(row, "model_utility") if row else None


def _has(rows: Sequence[Row], split: str, key: str) -> bool:
    return any(r["split"] == split and number(r, key) is not None for r in rows)


def _all(verdicts: Sequence[bool]) -> Verdict:
    if not verdicts:
        return UNMEASURABLE
    return HOLDS if all(verdicts) else FAILS


def _most(verdicts: Sequence[bool]) -> Verdict:
    """Holds when more than half of the cases hold."""
    if not verdicts:
        return UNMEASURABLE
    return HOLDS if 2 * sum(verdicts) > len(verdicts) else FAILS
