"""The generalisation arithmetic (forgetbench/generalisation.py) on hand-written rows."""

import pytest

from forgetbench.generalisation import (
    collateral,
    gap_closed,
    generalisation,
    has_probes,
    reference_gaps,
)


def _row(method, step, forget, paraphrase, reverse, two_hop, shared):
    return {
        "split": "forget10", "method": method, "step": step, "forget/probability": forget,
        "probes/paraphrase/probability": paraphrase, "probes/reverse/probability": reverse,
        "probes/two_hop/probability": two_hop, "probes/shared/probability": shared,
    }  # fmt: skip


ROWS = [
    _row("finetuned", 0, 0.9, 0.8, 0.5, 0.30, 0.8),
    _row("retain", 0, 0.1, 0.0, 0.1, 0.28, 0.8),
    _row("npo", 5, 0.5, 0.4, 0.45, 0.2, 0.6),
    _row("npo", 10, 0.1, 0.6, 0.5, 0.1, 0.2),
]


def test_the_share_of_each_gap_closed_and_the_collateral_by_hand():
    last = ROWS[3]
    # forget: (0.9 - 0.1) / (0.9 - 0.1) = 1; paraphrase: (0.8 - 0.6) / 0.8 = 0.25;
    # reverse: (0.5 - 0.5) / 0.4 = 0; two_hop: a gap of 0.02 is no gap.
    assert gap_closed(ROWS, last, "forget") == pytest.approx(1.0)
    assert gap_closed(ROWS, last, "paraphrase") == pytest.approx(0.25)
    assert gap_closed(ROWS, last, "reverse") == pytest.approx(0.0)
    assert gap_closed(ROWS, last, "two_hop") is None
    # shared: (0.8 - 0.2) / 0.8 of the finetuned model's knowledge lost.
    assert collateral(ROWS, last) == pytest.approx(0.75)
    assert collateral(ROWS, ROWS[2]) == pytest.approx(0.25)
    (entry,) = generalisation(ROWS, "forget10")  # the final step only
    assert entry["step"] == 10 and entry["paraphrase"] == pytest.approx(0.25)
    gaps = reference_gaps(ROWS, "forget10")
    assert gaps["forget"] == pytest.approx(0.8) and gaps["shared"] == pytest.approx(0.0)
    assert has_probes(ROWS) and not has_probes([{"split": "s", "method": "m"}])


def test_no_retain_row_or_no_probe_scores_give_no_number():
    assert gap_closed(ROWS[:1] + ROWS[2:], ROWS[3], "forget") is None
    bare = {"split": "forget10", "method": "npo", "step": 1, "forget/probability": 0.5}
    assert gap_closed(ROWS, bare, "reverse") is None and collateral(ROWS, bare) is None
