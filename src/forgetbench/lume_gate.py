"""Whether LUME's final score measures forgetting in a study, or is noise there
(docs/report.md#lume-final-noise).

LUME's final score (SemEval-2025 Task 4: the mean of its task aggregate, an MIA score and
utility) can rank unlearning only where it tells the two reference models apart the right way:
the retain model, which never saw the forget documents, must score above the finetuned model,
and the task aggregate (the regurgitation and knowledge tasks, the part that reads the forget
documents' content) must differ between them by at least `LUME_TASK_MARGIN`. On the tiny
miniature neither holds: every model's task aggregate is 0 (a harmonic mean with a term at 0)
and the finetuned model "beats" the retain model on the MIA score alone. The rule was fixed
before any study's numbers were read; the validity block records its verdict per split under
`lume_final`, apart from the gates that decide whether a study ranks at all (forget quality can
still rank methods where LUME cannot). Pure arithmetic over results.json rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from forgetbench.rows import Row, number, reference, splits

# How far apart the finetuned and retain models' task aggregates must be (in [0, 1]) for the
# tasks to see the forget documents at all: a few items of LUME's ~100 per task changing answer.
LUME_TASK_MARGIN = 0.05
NOISE = "noise"


def lume_final_gate(rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    """Per split whose finetuned model has a LUME final score: the check (`status` pass, noise
    or unknown; `finding`, `meaning`, `todo` and `numbers`, as the validity gates give them)."""
    found = {}
    for split in splits(rows):
        finetuned, retain = reference(rows, split), reference(rows, split, "retain")
        if finetuned is None or number(finetuned, "lume/final") is None:
            continue
        found[split] = _gate(split, finetuned, retain)
    return found


def _gate(split: str, finetuned: Row, retain: Row | None) -> dict[str, Any]:
    final = number(finetuned, "lume/final")
    target = number(retain, "lume/final") if retain is not None else None
    if target is None or final is None:
        return check_record(
            "lume_final",
            "unknown",
            f"{split}: no retain model's LUME final score to read the finetuned model's against",
            "LUME final is shown, but whether it measures forgetting here is not known",
            f"train a retain model, or give study.retain_logs.{split}=LOG",
        )
    tasks = number(finetuned, "lume/task_aggregate"), number(retain, "lume/task_aggregate")  # type: ignore[arg-type]
    numbers = {"finetuned_final": final, "retain_final": target, "finetuned_task": tasks[0],
               "retain_task": tasks[1], "margin": LUME_TASK_MARGIN}  # fmt: skip
    said = (
        f"final {final:.3f} vs {target:.3f}, task aggregate {_f(tasks[0])} vs {_f(tasks[1])} "
        "(finetuned vs retain)"
    )
    reasons = []
    if tasks[0] is None or tasks[1] is None or abs(tasks[0] - tasks[1]) < LUME_TASK_MARGIN:
        reasons.append(f"its tasks do not tell the two models apart (< {LUME_TASK_MARGIN:g})")
    if final >= target:
        reasons.append("the finetuned model scores at or above the retain model, its target")
    if not reasons:
        return check_record("lume_final", "pass", f"{split}: LUME {said}", **numbers)
    return check_record(
        "lume_final",
        NOISE,
        f"{split}: LUME final is noise here: {' and '.join(reasons)}; {said}",
        "LUME final ranks nothing on this study: the leaderboard leaves it out (results.json "
        "keeps every row's value)",
        "rank on forget quality here; LUME final needs models that learn LUME's documents "
        "(LUME's own data and a pretrained model, docs/your-model.md)",
        **numbers,
    )


def lume_noise(validity: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The LUME final checks of a validity block that did not pass (noise first)."""
    checks = list(((validity or {}).get("lume_final") or {}).values())
    return [c for c in checks if c.get("status") == NOISE] + [
        c for c in checks if c.get("status") == "unknown"
    ]


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def check_record(
    name: str, status: str, finding: str, meaning: str = "", todo: str = "", **numbers: Any
) -> dict[str, Any]:
    """One check as a validity block records it (this gate's and validity.py's): its name,
    status, what was found, what it means, what to do, and the numbers read (None left out)."""
    return {
        "name": name,
        "status": status,
        "finding": finding,
        "meaning": meaning,
        "todo": todo,
        "numbers": {k: v for k, v in numbers.items() if v is not None},
    }
