"""Validity gates: whether a study's reference models can support a ranking at all.

A leaderboard of unlearning methods means something only when there was something to unlearn and
the metric can see it go. Before anything is ranked, each split's finetuned model is checked
against its retain model (the target of unlearning):

- `distinguishable`: forget quality of the finetuned model is below `DISTINGUISHABLE_BAR`. Forget
  quality is a KS p-value against the retain model; when the finetuned model is not already far
  from the retain model (TOFU's Llama-2: 1e-19, the miniature: 1e-4), every method "reaches" the
  target without doing anything, and forget quality ranks noise.
- `learnt`: the finetuned model answers the forget set clearly better than the retain model, by
  ROUGE-L or by answer probability (`LEARNT_MARGIN`, absolute). A model that never learnt the
  forget set has nothing to forget.
- `utility`: the finetuned model's model utility is above zero. At zero the matched-utility rule
  (0.9 x the finetuned utility) lets every step through, so methods that destroy the model rank
  as if they kept it.

A check that cannot be made (no retain model or log for the split, a score missing) is
`unknown`: said, never silently passed. A study is `valid` only when every check of every split
passes; a failed check is reported first, the leaderboard is not presented as a ranking and the
papers' findings are not judged on it. Pure arithmetic over results.json rows, like `rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from forgetbench.lume_gate import check_record, lume_final_gate
from forgetbench.rows import Row, number, reference, splits

# The finetuned model's forget quality must be below this to be told apart from the retain
# model: the usual significance level. TOFU's finetuned Llama-2 sits at 1e-19 (forget10) to 1e-5
# (forget01); the miniature's at 1e-4 (tiny) and 1e-11..4e-3 (small).
DISTINGUISHABLE_BAR = 0.05
# How far above the retain model the finetuned model's forget ROUGE-L or probability must be.
# TOFU's Llama-2 (forget10): ROUGE-L 0.98 vs 0.40; the tiny miniature: 1.00 vs 0.42.
LEARNT_MARGIN = 0.1
# The nine numbers TOFU's model utility is the harmonic mean of: one at zero makes it zero.
_UTILITY_INPUTS = tuple(
    f"{s}/{m}"
    for s in ("retain", "real_authors", "world_facts")
    for m in ("probability", "rougeL", "truth_ratio")
)
# What to do about any failed check: the recipes that make a model learn.
_TRAIN_MORE = (
    "finetune longer or at a higher learning rate (train.epochs, train.lr); for a small model "
    "use the small-model recipe in docs/your-model.md"
)


def _distinguishable(split: str, finetuned: Row, retain: Row | None) -> dict[str, Any]:
    quality = number(finetuned, "forget_quality")
    if quality is None:
        return check_record(
            "distinguishable",
            "unknown",
            f"{split}: the finetuned model has no forget quality (no retain model or retain log "
            "to compare it with)",
            "no method can be judged on forget quality",
            f"train a retain model, or give study.retain_logs.{split}=LOG",
        )
    if quality < DISTINGUISHABLE_BAR:
        return check_record(
            "distinguishable",
            "pass",
            f"{split}: finetuned forget quality {quality:.3g} < {DISTINGUISHABLE_BAR:g}",
            forget_quality=quality,
            bar=DISTINGUISHABLE_BAR,
        )
    return check_record(
        "distinguishable",
        "fail",
        f"{split}: the finetuned model's forget quality is {quality:.3g}, not below "
        f"{DISTINGUISHABLE_BAR:g}: its forget-set answers cannot be told apart from the retain "
        "model's",
        "this study cannot rank methods: every method starts at the target, so forget quality "
        "measures noise",
        _TRAIN_MORE,
        forget_quality=quality,
        bar=DISTINGUISHABLE_BAR,
    )


def _learnt(split: str, finetuned: Row, retain: Row | None) -> dict[str, Any]:
    if retain is None:
        return check_record(
            "learnt",
            "unknown",
            f"{split}: no retain model or retain log to compare the finetuned model's forget-set "
            "answers with",
            "whether the finetuned model learnt the forget set is not known",
            f"train a retain model, or give study.retain_logs.{split}=LOG",
        )
    gaps = {}
    for key in ("forget/rougeL", "forget/probability"):
        mine, theirs = number(finetuned, key), number(retain, key)
        if mine is not None and theirs is not None:
            gaps[key] = (mine, theirs, mine - theirs)
    if not gaps:
        return check_record(
            "learnt",
            "unknown",
            f"{split}: no forget ROUGE-L or probability for both the finetuned and the retain "
            "model",
            "whether the finetuned model learnt the forget set is not known",
            "evaluate the forget set for both models",
        )
    said = ", ".join(
        f"{key.split('/')[1]} {mine:.3f} vs {theirs:.3f}" for key, (mine, theirs, _) in gaps.items()
    )
    numbers = {
        f"{role}_{key.split('/')[1]}": value
        for key, (mine, theirs, _) in gaps.items()
        for role, value in (("finetuned", mine), ("retain", theirs))
    }
    if any(gap >= LEARNT_MARGIN for _, _, gap in gaps.values()):
        return check_record(
            "learnt",
            "pass",
            f"{split}: finetuned vs retain on the forget set: {said}",
            margin=LEARNT_MARGIN,
            **numbers,
        )
    return check_record(
        "learnt",
        "fail",
        f"{split}: the finetuned model answers the forget set no better than the retain model "
        f"({said}; it must be {LEARNT_MARGIN:g} above on one)",
        "this study cannot rank methods: the finetuned model never learnt the forget set, so "
        "there is nothing to unlearn",
        _TRAIN_MORE,
        margin=LEARNT_MARGIN,
        **numbers,
    )


def _utility(split: str, finetuned: Row) -> dict[str, Any]:
    utility = number(finetuned, "model_utility")
    if utility is None:
        return check_record(
            "utility",
            "unknown",
            f"{split}: the finetuned model has no model utility",
            "the matched-utility rule cannot apply; methods are ranked on forget quality alone",
            "evaluate the retain, Real Authors and World Facts sets",
        )
    if utility > 0:
        return check_record(
            "utility",
            "pass",
            f"{split}: finetuned model utility {utility:.4f} > 0",
            model_utility=utility,
        )
    zeros = [k for k in _UTILITY_INPUTS if number(finetuned, k) == 0]
    why = f" ({', '.join(zeros)} {'is' if len(zeros) == 1 else 'are'} 0)" if zeros else ""
    return check_record(
        "utility",
        "fail",
        f"{split}: the finetuned model's model utility is 0{why}",
        "this study cannot rank methods: at zero utility every step 'keeps' it, so a method that "
        "destroys the model ranks as one that spares it",
        "start from a model that already answers general questions (a pretrained model, not "
        "random weights), then " + _TRAIN_MORE,
        model_utility=utility,
    )


def check_validity(rows: Sequence[Row]) -> dict[str, Any]:
    """results.json's `validity` block: per split, each check's status (`pass`, `fail`,
    `unknown`), what was found, what it means and what to do, with the numbers; `valid` is true
    only when every check passed, `failed` lists the failed checks as `split/name`. With LUME
    scores, `lume_final` says per split whether LUME's final score measures anything here
    (`forgetbench.lume_gate`; apart from the checks, it withholds no ranking)."""
    block = _validity_block(
        rows,
        lambda split, finetuned, retain: [
            _distinguishable(split, finetuned, retain),
            _learnt(split, finetuned, retain),
            _utility(split, finetuned),
        ],
    )
    lume = lume_final_gate(rows)
    return {**block, "lume_final": lume} if lume else block


def _validity_block(
    rows: Sequence[Row], checks_of: Callable[[str, Row, Row | None], list[dict[str, Any]]]
) -> dict[str, Any]:
    """The `validity` block over every split with a finetuned row: `checks_of(split, finetuned,
    retain)` gives the split's checks; a split is valid when each passed, the study when every
    split is."""
    found: dict[str, Any] = {}
    for split in splits(rows):
        finetuned = reference(rows, split, "finetuned")
        if finetuned is None:
            continue
        checks = checks_of(split, finetuned, reference(rows, split, "retain"))
        found[split] = {"valid": all(c["status"] == "pass" for c in checks), "checks": checks}
    return {
        "valid": bool(found) and all(s["valid"] for s in found.values()),
        "failed": failed_checks({"splits": found}),
        "splits": found,
    }


def failed_checks(validity: Mapping[str, Any] | None) -> list[str]:
    """`split/name` of every failed check, each once (a document benchmark's gaps are several
    `learnt` checks of one split)."""
    if not validity:
        return []
    failed = (
        f"{split}/{c['name']}"
        for split, s in validity.get("splits", {}).items()
        for c in s.get("checks", [])
        if c.get("status") == "fail"
    )
    return list(dict.fromkeys(failed))


def problems(validity: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The checks that did not pass (failed first, then unknown), as stored."""
    if not validity:
        return []
    checks = [c for s in validity.get("splits", {}).values() for c in s.get("checks", [])]
    return [c for c in checks if c.get("status") == "fail"] + [
        c for c in checks if c.get("status") == "unknown"
    ]


def passed(validity: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The checks that passed, as stored."""
    if not validity:
        return []
    checks = [c for s in validity.get("splits", {}).values() for c in s.get("checks", [])]
    return [c for c in checks if c.get("status") == "pass"]


def ranks(validity: Mapping[str, Any] | None) -> bool:
    """Whether the study's methods may be ranked: no check failed (results files written before
    the gates existed carry no block and keep their leaderboard)."""
    return not failed_checks(validity)


def _gap(
    split: str,
    key: str,
    margin: float,
    what: str,
    finetuned: Row,
    retain: Row | None,
    fix: str | None = None,
) -> dict[str, Any]:
    mine, theirs = number(finetuned, key), None if retain is None else number(retain, key)
    if retain is None:
        return check_record(
            "learnt",
            "unknown",
            f"{split}: no retain model or retain log to compare the finetuned model's {what} "
            "with, so its gap to a retain model cannot be checked",
            "whether the finetuned model learnt the forget set is not known, and scores "
            "relative to a retain model (MUSE's PrivLeak) are left out",
            f"evaluate your retain model with 'forgetbench eval --out DIR' on the same data and "
            f"give --retain-log DIR (study.retain_logs.{split}=DIR)",
            key=key,
            finetuned=mine,
        )
    if mine is None or theirs is None:
        return check_record(
            "learnt",
            "unknown",
            f"{split}: no {what} ({key}) for both the finetuned and the retain model",
            "whether the finetuned model learnt the forget set is not known",
            "train a retain model beside the finetuned one",
        )
    numbers = {"finetuned": mine, "retain": theirs, "margin": margin}
    if mine - theirs >= margin:
        return check_record(
            "learnt",
            "pass",
            f"{split}: finetuned {what} {mine:.3g} vs retain {theirs:.3g} (at least {margin:g} "
            "apart)",
            key=key,
            **numbers,
        )
    return check_record(
        "learnt",
        "fail",
        f"{split}: the finetuned model's {what} is {mine:.3g}, the retain model's {theirs:.3g}: "
        f"not {margin:g} above it, so the model did not learn what it is asked to forget",
        "this study cannot rank methods: there is nothing measurable to unlearn",
        fix or _TRAIN_MORE,
        key=key,
        **numbers,
    )


def _floor(split: str, key: str, floor: float, what: str, finetuned: Row) -> dict[str, Any]:
    mine = number(finetuned, key)
    if mine is None:
        return check_record(
            "utility",
            "unknown",
            f"{split}: the finetuned model has no {what} ({key})",
            "whether a method keeps the model's utility is not judged",
        )
    if mine >= floor:
        return check_record(
            "utility",
            "pass",
            f"{split}: finetuned {what} {mine:.3g} >= {floor:g}",
            key=key,
            finetuned=mine,
            floor=floor,
        )
    return check_record(
        "utility",
        "fail",
        f"{split}: the finetuned model's {what} is {mine:.3g}, below {floor:g}: at that level "
        "keeping 0.9 of it keeps noise",
        "the utility criteria (utility preserved; with requests, scalability and "
        "sustainability) are not judged, and show —",
        "use a model that answers the utility questions (a larger --scale or your own model)",
        key=key,
        finetuned=mine,
        floor=floor,
    )


def check_gaps(
    rows: Sequence[Row],
    gaps: Sequence[tuple[str, float, str] | tuple[str, float, str, str]],
    floors: Sequence[tuple[str, float, str]] = (),
) -> dict[str, Any]:
    """The validity block of a document benchmark's study (MUSE, WMDP), in `check_validity`'s
    shape: per split, one `learnt` check per (score key, margin, words) in `gaps`, passed where
    the finetuned model's score is at least the margin above the retain model's (what it
    learnt from the forget documents that the retain model never read; a fourth item says what
    to do when it is not), and one `utility` check
    per (score key, floor, words) in `floors`, passed where the finetuned model's utility score
    reaches the floor (`criteria` judges no utility below it)."""
    return _validity_block(
        rows,
        lambda split, finetuned, retain: [
            *(
                _gap(split, key, margin, what, finetuned, retain, *fix)
                for key, margin, what, *fix in gaps
            ),
            *(_floor(split, key, floor, what, finetuned) for key, floor, what in floors),
        ],
    )
