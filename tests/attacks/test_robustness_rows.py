"""`attack_scores` on hand-made B-half logs: knowledge recovered is 0 for an attack that changes
nothing and 1 for one that gives back the finetuned model's numbers."""

import pytest

from forgetbench.config import load_config
from forgetbench.data.logs import EvalLog, SetLog
from forgetbench.study.attack_rows import AttackOutcome, attack_scores


def log(gt_loss: float, rouge: float, truth_shift: float) -> EvalLog:
    """Four questions whose answer loss, ROUGE-L and paraphrase-vs-perturbed gap are given."""
    n = 4
    fields = {
        "avg_gt_loss": [gt_loss + 0.1 * i for i in range(n)],
        "avg_paraphrased_loss": [1.0 + truth_shift + 0.1 * i for i in range(n)],
        "average_perturb_loss": [[1.5 + 0.05 * i, 1.6] for i in range(n)],
        "rougeL_recall": [rouge] * n,
    }
    return EvalLog("test", {"forget": SetLog("forget", tuple(map(str, range(n))), fields)})


FINETUNED = log(0.1, 1.0, -0.8)
UNLEARNED = log(3.0, 0.2, 0.6)
RETAIN = log(2.5, 0.3, 0.4)
CONFIG = load_config()


def test_an_attack_that_changes_nothing_recovers_nothing_and_a_full_one_everything():
    outcome = AttackOutcome(
        {"none": UNLEARNED, "int4": UNLEARNED, "relearn": FINETUNED}, relearn_steps=3
    )
    row = attack_scores(
        outcome,
        finetuned=AttackOutcome({"none": FINETUNED}),
        retain=AttackOutcome({"none": RETAIN}),
        config=CONFIG,
    )
    for metric in ("probability", "rougeL", "truth_ratio"):
        assert row[f"attack/int4/recovered_{metric}"] == pytest.approx(0.0)
        assert row[f"attack/relearn/recovered_{metric}"] == pytest.approx(1.0)
    assert row["attack/none/rougeL"] == pytest.approx(0.2)
    assert row["attack/relearn/rougeL"] == pytest.approx(1.0)
    assert row["attack/relearn/steps"] == 3
    # Forget quality against the retain model's B half: identical truth ratios give p = 1.
    retain_row = attack_scores(
        AttackOutcome({"none": RETAIN}), finetuned=None, retain=AttackOutcome({"none": RETAIN}),
        config=CONFIG,
    )  # fmt: skip
    assert retain_row["attack/none/forget_quality"] == pytest.approx(1.0)


def test_the_plain_relearning_variant_counts_steps_to_the_finetuned_rouge():
    outcome = AttackOutcome({"none": UNLEARNED}, curve=[(0, 0.2), (5, 0.6), (10, 0.93)])
    row = attack_scores(
        outcome, finetuned=None, retain=None, config=CONFIG, finetuned_rouge=1.0
    )  # attack.relearn_target 0.9 of 1.0: reached at step 10
    assert row["attack/relearn_full/steps"] == 10
    assert row["attack/relearn_full/budget_steps"] == 10
    assert row["attack/none/forget_quality"] is None  # no retain model to compare with
