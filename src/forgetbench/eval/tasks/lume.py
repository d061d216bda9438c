"""LUME evaluation of one model (Ramakrishna et al., 2025): regurgitation and knowledge per task
and split, membership inference on whole documents (members vs never-trained documents) when the
folder has them, and the SemEval-2025 aggregates. Prompts are LUME's raw inputs (its models are
trained on input+output text, with no chat template).

The final score needs a utility: MMLU accuracy in the challenge, measured through lm-eval
(`eval.lm_eval_tasks=[mmlu]`) or given (`eval.lume_mmlu`); the miniature's background
multiple-choice accuracy offline. `lume_final_scores` picks it and records which one it used."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetbench.config_sections import EvalConfig
from forgetbench.data.lume import SPLITS, load_lume, load_mia_documents
from forgetbench.errors import ConfigError
from forgetbench.eval.requests import Generate, Request, Response
from forgetbench.eval.tasks.mia import MembershipTask, document_membership
from forgetbench.eval.tasks.task import TASKS, EvalSetup, TaskResult
from forgetbench.metrics import aggregate, lume
from forgetbench.records import CompletionRecord

# Where each utility comes from, in the order `lume_final_scores` prefers them.
LM_EVAL_MMLU_KEY = "lm_eval/mmlu/acc"  # lm-eval's size-weighted mean over MMLU's 57 subjects
BACKGROUND_MC_KEY = "utility/mc_accuracy"  # the miniature's Real Authors + World Facts MC accuracy
UTILITY_SOURCES = ("mmlu_lm_eval", "given", "mini_background_mc")
_MMLU_SOURCES = ("mmlu_lm_eval", "given")
_BOTH_HINT = "keep one: drop eval.lume_mmlu, or mmlu from eval.lm_eval_tasks"
# Per prompt kind: its per-item metric and the name it is registered (and aggregated) under.
_KINDS = {
    "regurgitation": (lume.regurgitation, "regurgitation"),
    "knowledge": (lume.knowledge_accuracy, "knowledge_accuracy"),
}


class LumeTask:
    """Scores `lume/{regurgitation|knowledge}/Task{n}/{split}`, `lume/task_aggregate` and
    `lume/mia/{attack}` + `lume/mia_score` (None unless the folder has membership-inference
    documents, see `load_mia_documents`), plus per-prompt logs. The final score needs a utility:
    `lume_final_scores`."""

    name = "lume"

    def __init__(self, folder: str | Path, *, max_new_tokens: int) -> None:
        subsets: dict[str, list[Any]] = {split: load_lume(folder, split) for split in SPLITS}
        documents = load_mia_documents(folder)
        self.membership: MembershipTask | None = None
        if documents is not None:
            self.membership = document_membership(*documents, prefix="lume/mia")
            subsets.update(self.membership.subsets)
        self.subsets = subsets
        self.max_new_tokens = max_new_tokens

    def requests(self, subset: str, doc: Any) -> list[Request]:
        if subset in SPLITS:
            return [Generate(doc.prefix, self.max_new_tokens)]
        assert self.membership is not None
        return self.membership.requests(subset, doc)

    def process(self, subset: str, doc: Any, responses: Sequence[Response]) -> dict[str, Any]:
        if subset not in SPLITS:
            assert self.membership is not None
            return self.membership.process(subset, doc, responses)
        record: CompletionRecord = doc
        (generation,) = responses
        assert isinstance(generation, str)
        metric, _ = _KINDS[record.kind]
        (value,) = metric([generation], [record.completion])
        return {"id": record.id, "task": record.task, "kind": record.kind, "prompt": record.prefix,
                "expected": record.completion, "generation": generation, "score": float(value)}  # fmt: skip

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        scores: dict[str, Any] = {}
        logs: dict[str, list[dict[str, Any]]] = {}
        for split in SPLITS:
            # Logged kind by kind, each in prompt order.
            logs[split] = []
            for kind, (_, metric) in _KINDS.items():
                items = [row for row in rows[split] if row["kind"] == kind]
                logs[split] += items
                for task in sorted({row["task"] for row in items}):
                    values = [row["score"] for row in items if row["task"] == task]
                    scores[f"lume/{kind}/Task{task}/{split}"] = aggregate(metric, values)
        task_scores = {key.removeprefix("lume/"): value for key, value in scores.items()}
        scores["lume/task_aggregate"] = lume.task_aggregate(task_scores, allow_missing=True)
        scores["lume/mia_score"] = None
        if self.membership is not None:
            membership = self.membership.results(rows)
            logs["mia"] = membership.items
            scores.update(membership.scores)
            scores["lume/mia_score"] = lume.mia_score(membership.scores["lume/mia/loss"])
        return TaskResult(scores, items=logs)


@TASKS.register("lume")
def lume_task(setup: EvalSetup) -> LumeTask | None:
    """A LUME folder (`--benchmark lume`), or the miniature's `lume/` when it has one."""
    if setup.benchmark == "lume":
        folder = setup.root
    elif (
        setup.tofu_layout
        and setup.eval_config.lume
        and (setup.root / "lume" / "forget.jsonl").is_file()
    ):
        folder = setup.root / "lume"
    else:
        return None
    return LumeTask(folder, max_new_tokens=setup.eval_config.lume_max_new_tokens)


def check_utility_options(eval_config: EvalConfig) -> None:
    """MMLU either measured or given, not both: fail before any model runs."""
    if eval_config.lume_mmlu is not None and "mmlu" in eval_config.lm_eval_tasks:
        raise ConfigError(
            f"eval.lume_mmlu={eval_config.lume_mmlu} gives the MMLU accuracy that "
            "eval.lm_eval_tasks=[mmlu] measures",
            _BOTH_HINT,
        )


def lume_final_scores(
    scores: Mapping[str, Any], *, given_mmlu: float | None = None
) -> dict[str, Any]:
    """The SemEval-2025 final score of one model's scores, and what went into it.

    Utility, first found: MMLU accuracy measured by lm-eval (`scores["lm_eval/mmlu/acc"]`,
    source `mmlu_lm_eval`), MMLU accuracy given by the user (`given_mmlu`, source `given`), the
    miniature's background multiple-choice accuracy (`scores["utility/mc_accuracy"]`, source
    `mini_background_mc`). Returns `lume/utility`, `lume/utility_source`, `lume/final` =
    `mean(task aggregate, MIA score, utility)` (None without a utility or without an MIA score)
    and `lume/mmlu_below_threshold` (whether an MMLU utility is below SemEval-2025's 0.371; None
    when the utility is not MMLU). Empty when `scores` has no LUME task aggregate.
    """
    if scores.get("lume/task_aggregate") is None:
        return {}
    measured = scores.get(LM_EVAL_MMLU_KEY)
    if measured is not None and given_mmlu is not None:
        raise ConfigError(
            f"MMLU accuracy both measured by lm-eval ({measured:.4f}) and given "
            f"(eval.lume_mmlu={given_mmlu})",
            _BOTH_HINT,
        )
    utility: float | None = None
    source: str | None = None
    if measured is not None:
        utility, source = float(measured), "mmlu_lm_eval"
    elif given_mmlu is not None:
        utility, source = float(given_mmlu), "given"
    elif scores.get(BACKGROUND_MC_KEY) is not None:
        utility, source = float(scores[BACKGROUND_MC_KEY]), "mini_background_mc"
    mia_score = scores.get("lume/mia_score")
    final = None
    if utility is not None and mia_score is not None:
        final = lume.final_score(scores["lume/task_aggregate"], mia_score, utility)
    below = lume.mmlu_below_threshold(utility) if source in _MMLU_SOURCES else None
    return {
        "lume/utility": utility,
        "lume/utility_source": source,
        "lume/mmlu_below_threshold": below,
        "lume/final": final,
    }
