"""The one cached evaluation: every metric of one model on one split of a study's data, read back
when an evaluation of the same inputs (model weights, data, split, options, code version) is
already in its folder, computed and written (logs first, summary last) when not."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgetbench.cache import shared_entry
from forgetbench.config import EvalConfig, ModelConfig
from forgetbench.data.logs import EvalLog
from forgetbench.study.resolve import Study

# Scores computed from the model's own scores and log (forget quality against a retain log,
# lm-eval utility, LUME's final score): added before the summary is written.
Extension = Callable[[EvalLog | None, dict[str, Any]], dict[str, Any]]


@dataclass
class Evaluated:
    log: EvalLog | None
    scores: dict[str, Any]
    folder: Path
    # Seconds this call spent scoring and generating (none when it came from the cache).
    phases: dict[str, float] = field(default_factory=dict)


def evaluate_cached(
    model_dir: str | Path,
    study: Study,
    *,
    split: str,
    options: EvalConfig,
    folder: Path,
    model: ModelConfig | None = None,
    info: dict[str, Any] | None = None,
    extend: Extension | None = None,
    shared: bool = True,
    tasks: tuple[str, ...] | None = None,
    on_task: Callable[[str, int, int], None] | None = None,
) -> Evaluated:
    """`shared=False` keeps the evaluation in `folder` only (`forgetbench eval`'s --out, which a
    user names and owns); otherwise it is a link to the shared cache's entry of the same key.
    `tasks`: run only these evaluation tasks (a shadow model needs only "mia")."""
    from forgetbench.eval.runner import (
        cached_evaluation,
        evaluate_model,
        evaluation_key,
        write_evaluation,
    )
    from forgetbench.modeling import load_model

    model = model or ModelConfig()
    key = evaluation_key(model_dir, study.data, split, options, study.benchmark, tasks)
    with shared_entry(folder, kind="evaluations", name=key) if shared else nullcontext():
        cached = cached_evaluation(folder, key)
        if cached is not None:
            return Evaluated(cached[0], cached[1], folder)
        loaded, tokenizer = load_model(
            model_dir, dtype=model.dtype, trust_remote_code=model.trust_remote_code
        )
        phases: dict[str, float] = {}
        log, scores, extra = evaluate_model(
            loaded, tokenizer, study.template, data=study.data, split=split,
            benchmark=study.benchmark, options=options, max_length=study.max_length,
            phases=phases, tasks=tasks, on_task=on_task,
        )  # fmt: skip
        if extend is not None:
            scores.update(extend(log, scores))
        info = info if info is not None else {"model": str(model_dir), "split": split}
        write_evaluation(folder, key, log, scores, extra, info)
        return Evaluated(log, scores, folder, phases)
