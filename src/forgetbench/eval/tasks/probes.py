"""The miniature's generalisation probes (docs/generalisation.md): per kind, questions that a
forget split's facts entail (`paraphrase`, `reverse`, `two_hop`) or share with retained authors
(`shared`), each with a paraphrased and perturbed answers, so they are asked and scored exactly as
TOFU's own sets are: TOFU's requests per question, TOFU's log row, and TOFU's sub-scores of a set
that is not the forget set (`probes/{kind}/probability`, `/rougeL`, `/truth_ratio`). Any folder
in TOFU's layout that holds `forgetNN_{kind}_perturbed.json` files is probed the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetbench.data.logs import SetLog
from forgetbench.data.tofu import PROBE_KINDS, first_questions, load_tofu
from forgetbench.eval.requests import Response
from forgetbench.eval.summary import set_scores
from forgetbench.eval.tasks.task import TASKS, EvalSetup, TaskResult
from forgetbench.eval.tasks.tofu import TofuTask
from forgetbench.records import QARecord

PREFIX = "probes/"  # every score's key: probes/{kind}/{metric}


def probe_file(split: str, kind: str) -> str:
    """The TOFU-layout split holding the `kind` probes of forget split `split`."""
    return f"{split}_{kind}_perturbed"


def probe_kinds_in(tofu: Path, split: str) -> list[str]:
    """The probe kinds with a non-empty file for `split` in the TOFU-layout folder `tofu`."""
    return [
        kind
        for kind in PROBE_KINDS
        if (path := tofu / f"{probe_file(split, kind)}.json").is_file() and path.stat().st_size > 0
    ]


class ProbesTask(TofuTask):
    """One subset of every kind's questions: the backend answers them together (one generation
    loop instead of one per kind, a third of the time at the tiny scale), and each question's row
    says its kind, by which the scores are taken apart again."""

    name = "probes"
    set_names = PROBE_KINDS

    def __init__(self, sets: Mapping[str, Sequence[QARecord]], *args: Any, **kwargs: Any) -> None:
        super().__init__(sets, *args, **kwargs)
        self.kinds = {
            record.split: kind for kind, records in self.subsets.items() for record in records
        }
        self.subsets = {"probes": [r for records in self.subsets.values() for r in records]}

    def process(self, subset: str, doc: QARecord, responses: Sequence[Response]) -> dict[str, Any]:
        return {"probe": self.kinds[doc.split], **super().process(subset, doc, responses)}

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        scores: dict[str, float] = {}
        for kind in dict.fromkeys(row["probe"] for row in rows["probes"]):
            set_rows = [row for row in rows["probes"] if row["probe"] == kind]
            fields = {key: [row[key] for row in set_rows] for key in set_rows[0]}
            log = SetLog(kind, tuple(str(i) for i in range(len(set_rows))), fields)
            # `kind` is never "forget", so the truth ratio is scored as on a kept set,
            # mean(max(0, 1 - 1/R)): higher means the true answer is preferred.
            scores.update(
                {PREFIX + key: value for key, value in set_scores(log, form=self.form).items()}
            )
        return TaskResult(scores, items=dict(rows))


@TASKS.register("probes")
def probes_task(setup: EvalSetup) -> ProbesTask | None:
    """The probe files of the split beside TOFU's (`forgetNN_{kind}_perturbed.json`); a kind with
    no file, or an empty one (no retain author shares a fact), is left out."""
    if setup.benchmark == "lume" or not setup.eval_config.probes:
        return None
    sets = {
        kind: first_questions(
            load_tofu(setup.tofu, probe_file(setup.split, kind)), setup.eval_config.max_questions
        )
        for kind in probe_kinds_in(setup.tofu, setup.split)
    }
    if not sets:
        return None
    return ProbesTask(
        sets, setup.template, setup.tokenizer,
        max_new_tokens=setup.eval_config.max_new_tokens, max_length=setup.max_length,
        form=setup.eval_config.truth_ratio_form,
    )  # fmt: skip
