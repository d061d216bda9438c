"""LUME evaluation of one model (Ramakrishna et al., 2025): regurgitation and knowledge per task
and split, membership inference on whole documents (members vs never-trained documents) when the
folder has them, and the SemEval-2025 aggregates. Prompts are LUME's raw inputs (its models are
trained on input+output text, with no chat template)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from forgetbench.data.lume import SPLITS, load_lume, load_mia_documents
from forgetbench.eval.distributed import sharded_map
from forgetbench.eval.outputs import greedy_generate
from forgetbench.eval.privacy_eval import evaluate_document_mia
from forgetbench.metrics import lume
from forgetbench.records import CompletionRecord


def _generate(
    records: list[CompletionRecord], model: Any, tokenizer: Any, **options: Any
) -> list[str]:
    return sharded_map(
        lambda shard: (
            greedy_generate(model, tokenizer, [r.prefix for r in shard], **options) if shard else []
        ),
        records,
    )


def evaluate_lume(
    folder: str | Path,
    model: Any,
    tokenizer: Any,
    *,
    batch_size: int,
    max_new_tokens: int,
    utility: float | None = None,
) -> tuple[dict[str, float | None], dict[str, list[dict[str, Any]]]]:
    """Scores `lume/{regurgitation|knowledge}/Task{n}/{split}`, `lume/task_aggregate`,
    `lume/mia/{attack}` + `lume/mia_score` (if the folder has membership-inference documents, see
    `load_mia_documents`) and `lume/final` (if a utility is given), plus per-prompt logs."""
    folder = Path(folder)
    scores: dict[str, float | None] = {}
    logs: dict[str, list[dict[str, Any]]] = {}
    records_by_split = {split: load_lume(folder, split) for split in SPLITS}
    for split, records in records_by_split.items():
        generations = _generate(
            records, model, tokenizer, max_new_tokens=max_new_tokens, batch_size=batch_size
        )
        per_item = []
        for kind, metric in (
            ("regurgitation", lume.regurgitation),
            ("knowledge", lume.knowledge_accuracy),
        ):
            chosen = [i for i, r in enumerate(records) if r.kind == kind]
            values = (
                metric([generations[i] for i in chosen], [records[i].completion for i in chosen])
                if chosen
                else np.array([])
            )
            for i, v in zip(chosen, values, strict=True):
                r = records[i]
                per_item.append(
                    {"id": r.id, "task": r.task, "kind": kind, "prompt": r.prefix,
                     "expected": r.completion, "generation": generations[i], "score": float(v)}
                )  # fmt: skip
            for task in sorted({records[i].task for i in chosen}):
                task_values = [
                    v for i, v in zip(chosen, values, strict=True) if records[i].task == task
                ]
                scores[f"lume/{kind}/Task{task}/{split}"] = float(np.mean(task_values))
        logs[split] = per_item
    task_scores = {k.removeprefix("lume/"): v for k, v in scores.items() if v is not None}
    scores["lume/task_aggregate"] = lume.task_aggregate(task_scores, allow_missing=True)
    scores["lume/mia_score"] = None
    documents = load_mia_documents(folder)
    if documents is not None:
        mia_scores, logs["mia"] = evaluate_document_mia(
            *documents, model, tokenizer, batch_size=batch_size, prefix="lume/mia"
        )
        scores.update(mia_scores)
        scores["lume/mia_score"] = lume.mia_score(mia_scores["lume/mia/loss"])
    scores["lume/final"] = None
    if utility is not None and scores["lume/mia_score"] is not None:
        scores["lume/final"] = lume.final_score(
            scores["lume/task_aggregate"], scores["lume/mia_score"], utility
        )
    return scores, logs
