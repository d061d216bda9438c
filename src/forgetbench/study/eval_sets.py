"""`forgetbench eval` of a benchmark whose evaluation scores one forget set at a time (RWKU: one
target's probes, MIA passages and utility sets): each chosen set is its own evaluation, in a
folder of its own under --out named by the set (`OUT/1_Stephen_King/`, with its logs and
summary.json, as a study's evaluation of that split), the model loaded once for all of them.
`OUT/summary.json`, written last, holds every set's scores; an interrupted evaluation run again
reads back the sets that finished."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from forgetbench.config import RunConfig
from forgetbench.eval.runner import SUMMARY_NAME
from forgetbench.io import atomic_write_json
from forgetbench.study.evaluate import Extension, evaluate_cached
from forgetbench.study.inputs import Study


def with_lm_eval_utility(extend: Extension, model: str, config: RunConfig) -> Extension:
    """`extend`, adding RWKU's utility through lm-eval (`eval.rwku_utility=lm_eval`), measured
    here, before any set is scored: lm-eval missing, or its data offline, stops the command
    before any work, and one run serves every set (utility does not depend on the target)."""
    from forgetbench.eval.rwku_utility import lm_eval_rwku_utility

    utility = lm_eval_rwku_utility(model, config)

    def extended(log: Any, scores: dict[str, Any]) -> dict[str, Any]:
        return {**extend(log, scores), **utility}

    return extended


def eval_each_set(
    sets: Sequence[str],
    config: RunConfig,
    study: Study,
    *,
    out: Path,
    info: dict[str, Any],
    extend: Extension,
    progress: bool,
) -> dict[str, Any]:
    """Scores `study.finetuned` (the given model) on each of `sets`. Returns the summary: the
    sets in order (`splits`) and `scores`, each set's scores by its name."""
    from forgetbench.modeling.loading import load_model

    model_dir = study.finetuned
    assert model_dir is not None
    started = time.perf_counter()

    @cache
    def load() -> tuple[Any, Any]:
        return load_model(
            model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
        )

    scores: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(sets, 1):

        def on_task(task: str, i: int, n: int, name: str = name, k: int = k) -> None:
            if progress and sys.stderr.isatty():
                print(
                    f"eval {name} ({k}/{len(sets)}): task {i}/{n} {task} "
                    f"({time.perf_counter() - started:.0f} s so far)",
                    file=sys.stderr, flush=True,
                )  # fmt: skip

        scores[name] = evaluate_cached(
            model_dir, study, split=name, eval_config=config.eval, folder=out / name,
            model=config.model, info={**info, "split": name}, extend=extend, shared=False,
            on_task=on_task, load=load,
        ).scores  # fmt: skip
    summary = {**info, "split": None, "splits": list(sets), "scores": scores}
    atomic_write_json(out / SUMMARY_NAME, summary)
    return {**summary, "out": str(out)}
