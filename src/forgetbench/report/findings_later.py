"""The later papers' findings, each decided from a study's rows: formats keep knowledge (Joshi
et al. 2024), forgetting stops at the sentences (RWKU, UGBench), membership inference near chance
and gradient ascent collapsing utility (LUME)."""

from __future__ import annotations

from collections.abc import Sequence

from forgetbench.generalisation import ENTAILED, generalisation
from forgetbench.report.findings_common import (
    COLLAPSED,
    FAILS,
    FORMAT_GAP,
    GRADIENT_ASCENT,
    HOLDS,
    MIA_BAND,
    MIN_FORMAT_SPREAD,
    PROBE_SHORTFALL,
    QA_UNLEARNED,
    UNMEASURABLE,
    Finding,
    _all,
    _f,
    _finetuned_utility,
    _has,
    _most,
)
from forgetbench.rows import Row, final, methods, number, reference, splits


def formats_keep_knowledge(rows: Sequence[Row]) -> Finding:
    rule = (
        f"for each method's final model, the share of the finetuned-over-retain gap left on "
        f"forget-set QA (ROUGE-L) and on each other format (formats/<f>/forget), clipped to "
        f"[0, 1] (formats whose two references differ by < {MIN_FORMAT_SPREAD:g} left out); among "
        f"the models that removed >= {QA_UNLEARNED:g} of the QA gap, holds when more than half keep a mean share on the "
        f"other formats at least {FORMAT_GAP:g} above their QA share"
    )
    numbers, keeps = [], []
    for split in splits(rows):
        finetuned, retain = reference(rows, split), reference(rows, split, "retain")
        if finetuned is None or retain is None:
            continue
        formats = sorted(k for k in finetuned if k.startswith("formats/") and k.endswith("/forget"))
        for method in methods(rows):
            row = final(rows, split, method)
            if row is None:
                continue
            qa = _gap_left(row, finetuned, retain, "forget/rougeL")
            if qa is None or qa > QA_UNLEARNED:
                continue
            shares = {
                k.split("/")[1]: s
                for k in formats
                if (s := _gap_left(row, finetuned, retain, k)) is not None
            }
            if not shares:
                continue
            mean = sum(shares.values()) / len(shares)
            keeps.append(mean - qa >= FORMAT_GAP)
            numbers.append(
                f"{method} on {split}: QA {_f(qa)} of the gap left, other formats {_f(mean)} "
                f"(" + ", ".join(f"{f} {_f(s)}" for f, s in shares.items()) + ")"
            )
    verdict = _most(keeps)
    return Finding(
        "Data transformations (Joshi et al. 2024)",
        "An unlearned model keeps answering forgotten facts in other formats.",
        rule,
        verdict,
        tuple(numbers),
    )


def _gap_left(row: Row, finetuned: Row, retain: Row, key: str) -> float | None:
    """(value - retain) / (finetuned - retain) in [0, 1]: 1 = as the finetuned model, 0 = as the
    retain model."""
    value, top, bottom = number(row, key), number(finetuned, key), number(retain, key)
    if value is None or top is None or bottom is None or abs(top - bottom) < MIN_FORMAT_SPREAD:
        return None
    return min(max((value - bottom) / (top - bottom), 0.0), 1.0)


def forgetting_stops_at_the_sentences(rows: Sequence[Row]) -> Finding:
    rule = (
        f"for each method's final model that closed >= {QA_UNLEARNED:g} of the finetuned-vs-retain "
        f"forget-set probability gap, the mean share it closed on the paraphrase, reverse and "
        f"two-hop probes; holds when more than half of them close at least {PROBE_SHORTFALL:g} "
        f"less of the probes' gaps than of the forget set's"
    )
    numbers, short = [], []
    for split in splits(rows):
        for entry in generalisation(rows, split):
            forget = entry["forget"]
            probes = [v for k in ENTAILED if isinstance(v := entry[k], float)]
            if not isinstance(forget, float) or forget < QA_UNLEARNED or not probes:
                continue
            mean = sum(probes) / len(probes)
            short.append(forget - mean >= PROBE_SHORTFALL)
            collateral = entry["collateral"]
            numbers.append(
                f"{entry['method']} on {split}: forget set {_f(forget)} of the gap closed, "
                f"probes {_f(mean)} ("
                + ", ".join(f"{k} {_f(entry[k])}" for k in ENTAILED)  # type: ignore[arg-type]
                + f"); collateral {_f(collateral if isinstance(collateral, float) else None)}"
            )
    verdict = _most(short)
    return Finding(
        "Generalisation probes (RWKU, Jin et al. 2024; UGBench 2025)",
        "Forgetting stops at the trained sentences: what the forget set entails (the same facts "
        "asked in other words, backwards, or through another fact) is forgotten less.",
        rule,
        verdict,
        tuple(numbers),
    )


def mia_near_chance(rows: Sequence[Row]) -> Finding:
    rule = (
        f"the LOSS-attack AUC of each method's final model (LUME's documents, lume/mia/loss, "
        f"else the forget set's mia/loss, skipping one on which the finetuned model itself is "
        f"near chance: it measures no membership there, as LUME's documents on the miniature, "
        f"which no model trains on); near chance when |AUC - 0.5| <= {MIA_BAND:g}; holds "
        f"when at least one method is near chance on every split it ran on"
    )
    numbers, near = [], {}
    for split in splits(rows):
        finetuned = reference(rows, split)
        key = None
        for candidate in ("lume/mia/loss", "mia/loss"):
            if not _has(rows, split, candidate):
                continue
            own = number(finetuned, candidate) if finetuned else None
            if own is not None and abs(own - 0.5) <= MIA_BAND:
                numbers.append(
                    f"{split}: {candidate} skipped, the finetuned model is at {_f(own)} on it"
                )
                continue
            key = candidate
            break
        if key is None:
            continue
        retain = reference(rows, split, "retain")
        line = []
        for method in methods(rows):
            row = final(rows, split, method)
            auc = number(row, key) if row else None
            if auc is None:
                continue
            inside = abs(auc - 0.5) <= MIA_BAND
            near[method] = near.get(method, True) and inside
            line.append(f"{method} {_f(auc)}{' (near chance)' if inside else ''}")
        if line:
            retain_auc = number(retain, key) if retain else None
            numbers.append(f"{split} ({key}; retain model {_f(retain_auc)}): " + ", ".join(line))
    chance = [m for m, ok in near.items() if ok]
    if chance:
        numbers.append("near chance everywhere: " + ", ".join(chance))
    verdict = UNMEASURABLE if not near else HOLDS if chance else FAILS
    return Finding(
        "LUME (Ramakrishna et al. 2025)",
        "Some unlearning methods keep membership inference near chance.",
        rule,
        verdict,
        tuple(numbers),
    )


def ga_collapses_utility(rows: Sequence[Row]) -> Finding:
    rule = (
        f"gradient ascent's final model keeps at most {COLLAPSED:g} x the finetuned model's "
        f"utility on every split it ran on"
    )
    numbers, verdicts = [], []
    for split in splits(rows):
        row = final(rows, split, GRADIENT_ASCENT)
        base = _finetuned_utility(rows, split)
        utility = number(row, "model_utility") if row else None
        if row is None or base is None or utility is None or base <= 0:
            continue
        verdicts.append(utility <= COLLAPSED * base)
        numbers.append(
            f"{split}: step {row['step']} utility {_f(utility)} = {_f(utility / base)} x "
            f"finetuned {_f(base)}"
        )
    return Finding(
        "LUME (Ramakrishna et al. 2025)",
        "Gradient ascent collapses model utility.",
        rule,
        _all(verdicts),
        tuple(numbers),
    )
