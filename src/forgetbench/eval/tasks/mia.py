"""Membership inference (MIA) for one model: every attack's AUC separating members (the forget set)
from non-members (a held-out set of the same distribution), from one scoring pass over both. The
same task scores LUME's whole documents (`document_membership`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from forgetbench.data.tofu import load_tofu, split_file
from forgetbench.errors import DataError
from forgetbench.eval.outputs import AnswerScore
from forgetbench.eval.requests import UNSET_SCORED_LENGTH, GradNorm, Request, Response, Score
from forgetbench.eval.tasks.task import TASKS, EvalSetup, TaskResult
from forgetbench.metrics import aggregate, gradnorm, mia, mia_roc, mia_shadow


def attack_scores(
    scores: Sequence[AnswerScore],
    texts: Sequence[str],
    *,
    k: float = 0.4,
    ends_in_eos: bool = False,
) -> dict[str, np.ndarray]:
    """Per item membership scores (higher = member) of every attack in `mia.ATTACKS`.

    `ends_in_eos`: the scored tokens end with an appended EOS. LOSS and zlib keep it and Min-K% /
    Min-K%++ leave it out, as open-unlearning does (its `tokenwise_logprobs` drops the final label
    for those two attacks only); measured against its evaluator, this is what makes them agree."""
    logps = [s.token_logps for s in scores]
    cut = slice(None, -1) if ends_in_eos else slice(None)
    return {
        "loss": mia.loss_score(logps),
        "zlib": mia.zlib_score(logps, texts),
        "min_k": mia.min_k_score([lp[cut] for lp in logps], k=k),
        "min_k_plus_plus": mia.min_k_plus_plus_score(
            [lp[cut] for lp in logps],
            [s.token_mean[cut] for s in scores],
            [s.token_std[cut] for s in scores],
            k=k,
        ),
    }


class MembershipTask:
    """Scores `{prefix}/{attack}` (AUC), `{prefix}/{attack}/tpr@1%fpr` and `.../tpr@0.1%fpr`
    (None when there are too few non-members, see `mia_roc.tpr_at_fpr`), `{prefix}/members` and
    `{prefix}/nonmembers` (the counts) and per-item logs (`member` and each attack's score) for
    (prompt, answer) pairs whose answers are scored. `add_eos` and `max_length` as in `Score`.
    With `gradnorm_p`, also the gradient-norm attack (`{prefix}/gradnorm`, a backward pass per
    item, `GradNorm`)."""

    name = "mia"

    def __init__(
        self,
        members: Sequence[tuple[str, str]],
        nonmembers: Sequence[tuple[str, str]],
        *,
        k: float = 0.4,
        prefix: str = "mia",
        add_eos: bool = True,
        max_length: int | None = UNSET_SCORED_LENGTH,
        gradnorm_p: float | None = None,
    ) -> None:
        if not members or not nonmembers:
            raise ValueError("membership inference needs members and non-members")
        # Members first: the per-item log keeps this order.
        items = [(True, *pair) for pair in members] + [(False, *pair) for pair in nonmembers]
        self.subsets = {"mia": items}
        self.k = k
        self.prefix = prefix
        self.add_eos = add_eos
        self.max_length = max_length
        self.gradnorm_p = gradnorm_p
        self.attacks = (*mia.ATTACKS, *(("gradnorm",) if gradnorm_p is not None else ()))

    def requests(self, subset: str, doc: tuple[bool, str, str]) -> list[Request]:
        _, prompt, answer = doc
        score = Score(prompt, (answer,), add_eos=self.add_eos, max_length=self.max_length)
        if self.gradnorm_p is None:
            return [score]
        return [score, GradNorm(prompt, answer, p=self.gradnorm_p, max_length=self.max_length)]

    def process(
        self, subset: str, doc: tuple[bool, str, str], responses: Sequence[Response]
    ) -> dict[str, Any]:
        member, _, answer = doc
        (score,) = responses[0]
        per_attack = attack_scores([score], [answer], k=self.k, ends_in_eos=self.add_eos)
        if self.gradnorm_p is not None:
            per_attack["gradnorm"] = gradnorm.gradnorm_score([responses[1]])
        return {"member": member, **{name: float(values[0]) for name, values in per_attack.items()}}

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        items = rows["mia"]
        members = [row for row in items if row["member"]]
        nonmembers = [row for row in items if not row["member"]]
        # The counts say which low FPRs the TPRs below could resolve (`mia_roc.min_nonmembers`).
        scores: dict[str, Any] = {
            f"{self.prefix}/members": len(members),
            f"{self.prefix}/nonmembers": len(nonmembers),
        }
        for name in self.attacks:
            inside = [row[name] for row in members]
            outside = [row[name] for row in nonmembers]
            scores[f"{self.prefix}/{name}"] = aggregate(f"mia/{name}", inside, outside)
            for suffix, fpr in mia_roc.LOW_FPRS.items():
                scores[f"{self.prefix}/{name}/{suffix}"] = aggregate(
                    f"mia/{suffix}", inside, outside, fpr
                )
        return TaskResult(scores, items=items)


def document_membership(
    members: Sequence[str],
    nonmembers: Sequence[str],
    *,
    k: float = 0.4,
    prefix: str = "mia",
    gradnorm_p: float | None = None,
) -> MembershipTask:
    """Membership inference on whole documents, as SemEval-2025's scorer runs it: every token of
    a document after the tokenizer's own opening (BOS, or the first token when there is none) is
    scored, so the LOSS attack's score is minus `model(ids, labels=ids).loss`. Documents are not
    cut below the model's context length."""
    return MembershipTask(
        [("", d) for d in members], [("", d) for d in nonmembers],
        k=k, prefix=prefix, add_eos=False, max_length=None, gradnorm_p=gradnorm_p,
    )  # fmt: skip


@TASKS.register("mia")
def mia_task(setup: EvalSetup) -> MembershipTask | None:
    """The forget split's answers against its held-out twin (`holdout{NN}`), where there is one."""
    holdout = setup.split.replace("forget", "holdout")
    if not setup.tofu_layout or not setup.eval_config.mia:
        return None
    if split_file(setup.tofu, holdout) is None:
        return None

    def pairs(split: str) -> list[tuple[str, str]]:
        return [
            (setup.template.prompt(r.question, setup.tokenizer), setup.template.answer(r.answer))
            for r in load_tofu(setup.tofu, split)
        ]

    return MembershipTask(
        pairs(setup.split), pairs(holdout), k=setup.eval_config.mia_k,
        max_length=setup.eval_config.max_length or UNSET_SCORED_LENGTH,
    )  # fmt: skip


def _column(items: Sequence[Mapping[str, Any]], name: str, what: str) -> np.ndarray:
    try:
        return np.array([float(row[name]) for row in items])
    except (KeyError, TypeError, ValueError):
        raise DataError(
            f"the MIA log of {what} has no per-item '{name}' score",
            "re-run its evaluation with this version of forgetbench",
        ) from None


def relative_membership(
    items: Sequence[Mapping[str, Any]],
    *,
    reference_items: Sequence[Mapping[str, Any]] | None = None,
    shadow_items: Sequence[Sequence[Mapping[str, Any]]] = (),
    shadow_members: Sequence[Sequence[bool]] = (),
    gamma: float = 1.0,
    prefix: str = "mia",
) -> dict[str, Any]:
    """The attacks that need other models' per-item MIA logs (`MembershipTask`'s rows, members
    first), each as an AUC and TPRs at low FPR (`mia_roc.attack_summary`):

    - `{prefix}/reference`: the item's LOSS score (mean answer-token log-prob) minus
      `reference_items`' (a retain model's) on the same item;
    - `{prefix}/lira` (online LiRA) and `{prefix}/rmia` (online RMIA, `gamma`) from the shadow
      models' LOSS scores on the same items, `shadow_members[i][j]` telling whether shadow i
      trained on item j. At least two shadows.

    Every log must list the same items in the same order (the same split's evaluation)."""
    target = _column(items, "loss", "the evaluated model")
    member = np.array([bool(row["member"]) for row in items])
    out: dict[str, Any] = {}

    def summary(name: str, scores: np.ndarray) -> None:
        out.update(mia_roc.attack_summary(f"{prefix}/{name}", scores[member], scores[~member]))

    def aligned(other: Sequence[Mapping[str, Any]], what: str) -> np.ndarray:
        if [bool(row["member"]) for row in other] != member.tolist():
            raise DataError(
                f"the MIA log of {what} lists other items than the evaluated model's "
                f"({len(other)} items against {len(items)})",
                "evaluate both on the same split and data",
            )
        return _column(other, "loss", what)

    if reference_items is not None:
        summary("reference", target - aligned(reference_items, "the reference model"))
    if shadow_items:
        if len(shadow_items) < 2 or len(shadow_members) != len(shadow_items):
            raise ValueError(
                f"{len(shadow_items)} shadow logs and {len(shadow_members)} membership masks: "
                "the shadow attacks need at least 2 shadows, each with its mask"
            )
        scores = np.stack([aligned(log, f"shadow model {i}") for i, log in enumerate(shadow_items)])
        masks = np.array(shadow_members, dtype=bool)
        summary("lira", mia_shadow.lira_score(target, scores, masks))
        summary("rmia", mia_shadow.rmia_score(target, scores, gamma=gamma))
    return out
