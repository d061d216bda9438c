"""What the robustness attacks add to a study row: one model's outcome (`AttackOutcome`: its
B-half evaluation logs per variant and its relearning curve) turned into the row's `attack/...`
keys (`attack_scores`), against the finetuned and retain models' own outcomes (`attack_rows`).
Pure over the logs: the models were attacked and evaluated by `study/attack.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forgetbench.attacks.recovery import knowledge_recovered, steps_to_reach
from forgetbench.config import RunConfig
from forgetbench.data.logs import EvalLog
from forgetbench.eval.summary import set_scores
from forgetbench.metrics import tofu

# The three TOFU numbers every attack reports on the B half (forget quality comes on top).
METRICS = ("probability", "rougeL", "truth_ratio")


@dataclass
class AttackOutcome:
    """One model's attack evaluations: B-half logs by variant ("none", "relearn", "int8", ...),
    and the plain relearning curve of (optimizer steps, forget ROUGE-L), from step 0."""

    logs: dict[str, EvalLog] = field(default_factory=dict)
    curve: list[tuple[int, float]] = field(default_factory=list)
    relearn_steps: int | None = None  # optimizer steps of the A-half relearning


def _b_scores(log: EvalLog, reference: EvalLog | None, form: str) -> dict[str, float | None]:
    forget = log.sets["forget"]
    scores: dict[str, float | None] = {
        key.split("/", 1)[1]: value for key, value in set_scores(forget, form=form).items()
    }
    scores["forget_quality"] = None
    if reference is not None:
        ref = reference.sets["forget"]
        _, pvalue = tofu.ks_test(
            tofu.truth_ratio(forget.paraphrased_loss, forget.perturbed_loss, form=form),
            tofu.truth_ratio(ref.paraphrased_loss, ref.perturbed_loss, form=form),
        )
        scores["forget_quality"] = pvalue
    return scores


def attack_rows(
    outcomes: dict[str, AttackOutcome], *, config: RunConfig, finetuned_rouge: float | None
) -> dict[str, dict[str, Any]]:
    """Each attacked model's `attack/...` keys, against the finetuned and retain models' own
    outcomes when they were attacked too."""
    return {
        name: attack_scores(
            outcome,
            finetuned=outcomes.get("finetuned"),
            retain=outcomes.get("retain"),
            config=config,
            finetuned_rouge=finetuned_rouge,
        )  # fmt: skip
        for name, outcome in outcomes.items()
    }


def attack_scores(
    outcome: AttackOutcome,
    *,
    finetuned: AttackOutcome | None,
    retain: AttackOutcome | None,
    config: RunConfig,
    finetuned_rouge: float | None = None,
) -> dict[str, Any]:
    """A result row's `attack/...` keys: per variant the B-half probability, ROUGE-L, truth ratio
    and forget quality (against the retain model's unattacked B half), and knowledge recovered
    on each of the three against the finetuned model's unattacked B half; the plain relearning
    variant's steps to `attack.relearn_target` x the finetuned model's forget ROUGE-L."""
    form = config.eval.truth_ratio_form
    reference = retain.logs.get("none") if retain else None
    before = _b_scores(outcome.logs["none"], reference, form)
    target = _b_scores(finetuned.logs["none"], None, form) if finetuned else {}
    row: dict[str, Any] = {f"attack/none/{m}": v for m, v in before.items()}
    for name, log in outcome.logs.items():
        if name == "none":
            continue
        after = _b_scores(log, reference, form)
        row.update({f"attack/{name}/{m}": v for m, v in after.items()})
        for metric in METRICS:
            row[f"attack/{name}/recovered_{metric}"] = knowledge_recovered(
                after[metric], before[metric], target.get(metric)
            )
    if outcome.relearn_steps is not None:
        row["attack/relearn/steps"] = outcome.relearn_steps
    if outcome.curve:
        fraction = config.attack.relearn_target
        row["attack/relearn_full/steps"] = steps_to_reach(
            outcome.curve, finetuned_rouge, fraction=fraction
        )
        row["attack/relearn_full/budget_steps"] = outcome.curve[-1][0]
        row["attack/relearn_full/rougeL"] = outcome.curve[-1][1]
    return row
