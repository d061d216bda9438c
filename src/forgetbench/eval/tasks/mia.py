"""Membership inference (MIA) for one model: every attack's AUC separating members (the forget set)
from non-members (a held-out set of the same distribution), from one scoring pass over both. The
same task scores LUME's whole documents (`document_membership`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from forgetbench.data.tofu import load_tofu
from forgetbench.eval.outputs import AnswerScore
from forgetbench.eval.requests import Request, Response, Score
from forgetbench.eval.tasks.task import TASKS, EvalSetup, TaskResult
from forgetbench.metrics import aggregate, mia


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
    """Scores `{prefix}/{attack}` (AUC) and per-item logs (`member` and each attack's score) for
    (prompt, answer) pairs whose answers are scored. `add_eos` and `max_length` as in `Score`."""

    name = "mia"

    def __init__(
        self,
        members: Sequence[tuple[str, str]],
        nonmembers: Sequence[tuple[str, str]],
        *,
        k: float = 0.4,
        prefix: str = "mia",
        add_eos: bool = True,
        max_length: int | None = 512,
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

    def requests(self, subset: str, doc: tuple[bool, str, str]) -> list[Request]:
        _, prompt, answer = doc
        return [Score(prompt, (answer,), add_eos=self.add_eos, max_length=self.max_length)]

    def process(
        self, subset: str, doc: tuple[bool, str, str], responses: Sequence[Response]
    ) -> dict[str, Any]:
        member, _, answer = doc
        ((score,),) = responses
        per_attack = attack_scores([score], [answer], k=self.k, ends_in_eos=self.add_eos)
        return {"member": member, **{name: float(values[0]) for name, values in per_attack.items()}}

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        items = rows["mia"]
        scores = {
            f"{self.prefix}/{name}": aggregate(
                f"mia/{name}",
                [row[name] for row in items if row["member"]],
                [row[name] for row in items if not row["member"]],
            )
            for name in mia.ATTACKS
        }
        return TaskResult(scores, items=items)


def document_membership(
    members: Sequence[str], nonmembers: Sequence[str], *, k: float = 0.4, prefix: str = "mia"
) -> MembershipTask:
    """Membership inference on whole documents, as SemEval-2025's scorer runs it: every token of
    a document after the tokenizer's own opening (BOS, or the first token when there is none) is
    scored, so the LOSS attack's score is minus `model(ids, labels=ids).loss`. Documents are not
    cut below the model's context length."""
    return MembershipTask(
        [("", d) for d in members], [("", d) for d in nonmembers],
        k=k, prefix=prefix, add_eos=False, max_length=None,
    )  # fmt: skip


@TASKS.register("mia")
def mia_task(setup: EvalSetup) -> MembershipTask | None:
    """The forget split's answers against its held-out twin (`holdout{NN}`), where there is one."""
    holdout = setup.split.replace("forget", "holdout")
    if setup.benchmark == "lume" or not setup.options.mia:
        return None
    if not (setup.tofu / f"{holdout}.json").is_file():
        return None

    def pairs(split: str) -> list[tuple[str, str]]:
        return [
            (setup.template.prompt(r.question, setup.tokenizer), setup.template.answer(r.answer))
            for r in load_tofu(setup.tofu, split)
        ]

    return MembershipTask(pairs(setup.split), pairs(holdout), k=setup.options.mia_k)
