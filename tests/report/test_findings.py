"""Each finding's rule on hand-made results.json rows: holds, does not hold, not measurable."""

from __future__ import annotations

from typing import Any

import pytest

from forgetbench.report.findings import (
    check_findings,
    forget01_easier,
    forgetting_stops_at_the_sentences,
    formats_keep_knowledge,
    ga_collapses_utility,
    ga_loses_utility_fastest,
    mia_near_chance,
    no_baseline_passes_forget10,
    zigzag_trade_off,
)
from forgetbench.report.findings_common import FAILS, HOLDS, UNMEASURABLE


def _row(split: str, method: str, step: int = 0, epoch: float = 0.0, **scores: Any) -> dict:
    # Keys with a slash are written with "__" here: formats__mcqa__forget -> formats/mcqa/forget.
    return {
        "split": split,
        "method": method,
        "step": step,
        "epoch": epoch,
        **{k.replace("__", "/"): v for k, v in scores.items()},
    }


def _trajectory(split: str, method: str, points: list[tuple[float, float | None]]) -> list[dict]:
    """Snapshots at epochs 1, 2, ... with (model utility, forget quality)."""
    return [
        _row(split, method, 5 * (i + 1), float(i + 1), model_utility=u, forget_quality=q)
        for i, (u, q) in enumerate(points)
    ]


FINETUNED = _row("forget10", "finetuned", model_utility=0.8, forget_quality=1e-4)


def test_gradient_ascent_fastest_holds_and_fails_by_the_steepest_epoch():
    # GA: 0.8 -> 0.7 -> 0.1: steepest 0.6/epoch. NPO: 0.8 -> 0.5 -> 0.45: steepest 0.3/epoch.
    rows = [FINETUNED, *_trajectory("forget10", "grad_ascent", [(0.7, 1e-4), (0.1, 1e-3)])]
    rows += _trajectory("forget10", "npo", [(0.5, 1e-4), (0.45, 1e-3)])
    finding = ga_loses_utility_fastest(rows)
    assert finding.verdict == HOLDS
    assert finding.numbers == ("forget10: grad_ascent 0.600/epoch, npo 0.300/epoch",)
    # NPO losing 0.8 -> 0.1 in its first epoch (0.7/epoch) is faster than GA's 0.6.
    rows[-2] = {**rows[-2], "model_utility": 0.1}
    assert ga_loses_utility_fastest(rows).verdict == FAILS
    # Without gradient ascent there is nothing to compare.
    assert ga_loses_utility_fastest(rows[:1] + rows[3:]).verdict == UNMEASURABLE


def test_zigzag_counts_direction_changes_of_large_enough_moves():
    # grad_diff: log10 FQ -4 -> -3 -> -3.5 -> -2: up, down, up = 2 reversals (zig-zags).
    up_down = [(0.7, 1e-3), (0.6, 10**-3.5), (0.5, 1e-2)]
    # npo: -4 -> -3 -> -2.95 -> -2: the 0.05-decade move is jitter; up, up = no reversal.
    steady = [(0.7, 1e-3), (0.6, 10**-2.95), (0.5, 1e-2)]
    rows = [FINETUNED, *_trajectory("forget10", "grad_diff", up_down)]
    rows += _trajectory("forget10", "npo", steady)
    finding = zigzag_trade_off(rows)
    assert finding.verdict == HOLDS  # one of two trajectories: at least half
    assert "2 reversal(s)" in finding.numbers[0] and "0 reversal(s)" in finding.numbers[1]
    rows += _trajectory("forget10", "dpo", steady)
    assert zigzag_trade_off(rows).verdict == FAILS  # one of three
    # Two points (finetuned + one snapshot) cannot zig-zag: not measurable.
    assert zigzag_trade_off([FINETUNED, *_trajectory("forget10", "npo", steady[:1])]).verdict == (
        UNMEASURABLE
    )


def test_no_baseline_passes_forget10_unless_one_keeps_utility_and_forgets():
    # Bar: 0.9 x 0.8 = 0.72. GA reaches p = 0.3 but at utility 0.1; NPO keeps 0.75 at p = 0.01.
    rows = [FINETUNED, *_trajectory("forget10", "grad_ascent", [(0.1, 0.3)])]
    rows += _trajectory("forget10", "npo", [(0.75, 0.01)])
    assert no_baseline_passes_forget10(rows).verdict == HOLDS
    rows += _trajectory("forget10", "rmu", [(0.73, 0.06)])  # p > 0.05 and utility >= 0.72
    finding = no_baseline_passes_forget10(rows)
    assert finding.verdict == FAILS
    assert "passes: rmu step 5, forget quality 0.060, utility 0.730" in finding.numbers
    assert no_baseline_passes_forget10([_row("forget01", "finetuned")]).verdict == UNMEASURABLE


def test_forget01_easier_compares_matched_utility_forget_quality_per_method():
    rows = [FINETUNED, _row("forget01", "finetuned", model_utility=0.8, forget_quality=1e-3)]
    # Both methods keep utility >= 0.72 on both splits; NPO and GA each have a higher p on forget01.
    rows += _trajectory("forget01", "npo", [(0.75, 0.2)]) + _trajectory(
        "forget10", "npo", [(0.75, 0.01)]
    )
    rows += _trajectory("forget01", "grad_ascent", [(0.75, 0.1)])
    rows += _trajectory("forget10", "grad_ascent", [(0.75, 0.05)])
    assert forget01_easier(rows).verdict == HOLDS
    # GA harder on forget01 (0.001 < 0.05): one of two methods is not "more than half".
    rows[-2] = {**rows[-2], "forget_quality": 0.001}
    assert forget01_easier(rows).verdict == FAILS
    assert forget01_easier([FINETUNED, *_trajectory("forget10", "npo", [(0.7, 0.1)])]).verdict == (
        UNMEASURABLE
    )
    # Splits of the same size (the tiny miniature's single forget author) are not compared.
    same = [{**r, "forget/questions": 20} if r["method"] == "finetuned" else r for r in rows]
    finding = forget01_easier(same)
    assert finding.verdict == UNMEASURABLE
    assert finding.numbers == ("forget01 and forget10 both hold 20 forget questions",)


def _format_rows(method_qa: float, method_formats: dict[str, float]) -> list[dict]:
    # Finetuned: QA 0.9, every format 0.8; retain: QA 0.1, every format 0.3 (gap 0.8 and 0.5).
    formats = ("mcqa", "cloze")
    finetuned = _row("forget10", "finetuned", forget__rougeL=0.9,
                     **{f"formats__{f}__forget": 0.8 for f in formats})  # fmt: skip
    retain = _row("forget10", "retain", forget__rougeL=0.1,
                  **{f"formats__{f}__forget": 0.3 for f in formats})  # fmt: skip
    final = _row("forget10", "npo", 10, 2.0, forget__rougeL=method_qa,
                 **{f"formats__{f}__forget": v for f, v in method_formats.items()})  # fmt: skip
    return [finetuned, retain, final]


def test_formats_keep_knowledge_when_other_formats_keep_more_of_the_gap_than_qa():
    # QA: (0.1 - 0.1) / 0.8 = 0 of the gap left; mcqa (0.7 - 0.3) / 0.5 = 0.8, cloze
    # (0.5 - 0.3) / 0.5 = 0.4: mean 0.6, at least 0.1 above QA's 0.
    finding = formats_keep_knowledge(_format_rows(0.1, {"mcqa": 0.7, "cloze": 0.5}))
    assert finding.verdict == HOLDS
    assert finding.numbers == (
        "npo on forget10: QA 0.000 of the gap left, other formats 0.600 (cloze 0.400, mcqa 0.800)",
    )
    # Formats forgotten as much as QA: mean share 0.02 (0.31 -> 0.02, 0.3 -> 0), not 0.1 above.
    assert formats_keep_knowledge(_format_rows(0.1, {"mcqa": 0.31, "cloze": 0.3})).verdict == FAILS
    # QA still 0.7 -> (0.7-0.1)/0.8 = 0.75 of its gap: not unlearned, nothing to measure.
    assert formats_keep_knowledge(_format_rows(0.7, {"mcqa": 0.7, "cloze": 0.5})).verdict == (
        UNMEASURABLE
    )


def _probe_rows(paraphrase: float) -> list[dict]:
    def probes(forget, para, rev, hop, shared):
        return {"forget__probability": forget, "probes__paraphrase__probability": para,
                "probes__reverse__probability": rev, "probes__two_hop__probability": hop,
                "probes__shared__probability": shared}  # fmt: skip

    return [
        _row("forget10", "finetuned", **probes(0.9, 0.8, 0.5, 0.4, 0.8)),
        _row("forget10", "retain", **probes(0.1, 0.0, 0.1, 0.0, 0.8)),
        _row("forget10", "npo", 10, 1.0, **probes(0.1, paraphrase, 0.3, 0.2, 0.6)),
    ]


def test_forgetting_stops_at_the_sentences_when_the_probes_keep_more_of_their_gap():
    # forget: (0.9 - 0.1) / 0.8 = 1; paraphrase (0.8 - 0.4) / 0.8 = 0.5, reverse (0.5 - 0.3) / 0.4
    # = 0.5, two_hop (0.4 - 0.2) / 0.4 = 0.5: mean 0.5, 0.5 short of the forget set's 1.
    finding = forgetting_stops_at_the_sentences(_probe_rows(0.4))
    assert finding.verdict == HOLDS
    assert finding.numbers == (
        "npo on forget10: forget set 1.000 of the gap closed, probes 0.500 (paraphrase 0.500, "
        "reverse 0.500, two_hop 0.500); collateral 0.250",
    )
    # Paraphrase forgotten past the retain model (1.75): mean (1.75 + 0.5 + 0.5) / 3 = 0.917,
    # less than 0.1 short: the forgetting reached the probes.
    assert forgetting_stops_at_the_sentences(_probe_rows(-0.6)).verdict == FAILS
    assert forgetting_stops_at_the_sentences(_probe_rows(0.4)[:2]).verdict == UNMEASURABLE


def test_mia_near_chance_names_the_methods_inside_the_band():
    rows = [FINETUNED, _row("forget10", "retain", mia__loss=0.55)]
    rows += [
        _row("forget10", "npo", 10, 2.0, mia__loss=0.58),
        _row("forget10", "idk", 10, 2.0, mia__loss=0.9),
    ]
    finding = mia_near_chance(rows)
    assert finding.verdict == HOLDS
    assert finding.numbers[-1] == "near chance everywhere: npo"
    rows[2] = {**rows[2], "mia/loss": 0.61}  # |0.61 - 0.5| > 0.1
    assert mia_near_chance(rows).verdict == FAILS
    assert mia_near_chance([FINETUNED]).verdict == UNMEASURABLE


def test_mia_near_chance_skips_a_measure_the_finetuned_model_is_at_chance_on():
    # LUME's documents on the miniature: no model trains on them, the finetuned one included
    # (0.52), so every method is "near chance" there for nothing; the forget set's MIA is read.
    finetuned = {**FINETUNED, "lume/mia/loss": 0.52, "mia/loss": 1.0}
    rows = [finetuned, _row("forget10", "npo", 10, 2.0, lume__mia__loss=0.5, mia__loss=0.9)]
    finding = mia_near_chance(rows)
    assert finding.verdict == FAILS
    assert (
        finding.numbers[0]
        == "forget10: lume/mia/loss skipped, the finetuned model is at 0.520 on it"
    )
    assert finding.numbers[1].startswith("forget10 (mia/loss; ")


def test_gradient_ascent_collapse_is_half_the_finetuned_utility_or_less():
    rows = [FINETUNED, *_trajectory("forget10", "grad_ascent", [(0.6, None), (0.4, None)])]
    assert ga_collapses_utility(rows).verdict == HOLDS  # 0.4 = 0.5 x 0.8
    rows[-1] = {**rows[-1], "model_utility": 0.41}
    assert ga_collapses_utility(rows).verdict == FAILS
    assert ga_collapses_utility([FINETUNED]).verdict == UNMEASURABLE


@pytest.mark.parametrize("rows", [[FINETUNED], [_row("forget05", "retain")]])
def test_every_finding_is_decided_even_on_almost_empty_results(rows):
    verdicts = {f.verdict for f in check_findings(rows)}
    assert verdicts == {UNMEASURABLE}
