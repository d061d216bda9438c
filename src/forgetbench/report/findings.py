"""The seed papers' qualitative findings, checked against a study's results.json rows.

Each finding is a claim, a rule that decides it from the rows (its thresholds are
`findings_common`'s constants, and the rule's text, shown in the report, quotes them), the study's numbers behind the
verdict, and the verdict: "holds", "does not hold", or "not measurable here" when the rows lack
what the rule needs (a method, a split, forget quality, formats). Nothing here is typed in by
hand: the same rows always give the same verdicts. TOFU's findings are `findings_tofu`'s, the later
papers' `findings_later`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from forgetbench.generalisation import MIN_GAP
from forgetbench.report.findings_common import (
    COLLAPSED,
    FORGET_QUALITY_PASS,
    FORMAT_GAP,
    MIA_BAND,
    MIN_FORMAT_SPREAD,
    MOST_UTILITY,
    PROBE_SHORTFALL,
    QA_UNLEARNED,
    ZIGZAG_DECADES,
    Finding,
)
from forgetbench.report.findings_later import (
    forgetting_stops_at_the_sentences,
    formats_keep_knowledge,
    ga_collapses_utility,
    mia_near_chance,
)
from forgetbench.report.findings_tofu import (
    forget01_easier,
    ga_loses_utility_fastest,
    no_baseline_passes_forget10,
    zigzag_trade_off,
)
from forgetbench.rows import Row


def check_findings(rows: Sequence[Row]) -> list[Finding]:
    """Every finding, in the order of the papers."""
    return [check(rows) for check in CHECKS]


CHECKS: tuple[Callable[[Sequence[Row]], Finding], ...] = (
    ga_loses_utility_fastest,
    zigzag_trade_off,
    no_baseline_passes_forget10,
    forget01_easier,
    formats_keep_knowledge,
    forgetting_stops_at_the_sentences,
    mia_near_chance,
    ga_collapses_utility,
)


def findings_rules() -> dict[str, Any]:
    """The thresholds the rules use, by name, for the report."""
    return {
        "most utility (x finetuned)": MOST_UTILITY,
        "forget quality pass (KS p)": FORGET_QUALITY_PASS,
        "zig-zag move (decades of p)": ZIGZAG_DECADES,
        "collapsed utility (x finetuned)": COLLAPSED,
        "MIA near chance (|AUC - 0.5|)": MIA_BAND,
        "QA unlearned (gap removed)": QA_UNLEARNED,
        "formats gap over QA": FORMAT_GAP,
        "least format spread": MIN_FORMAT_SPREAD,
        "probes' shortfall (gap closed)": PROBE_SHORTFALL,
        "least probe gap (probability)": MIN_GAP,
    }
