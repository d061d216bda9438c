"""Utility through lm-evaluation-harness: MMLU (or any lm-eval task) accuracy of a saved model.

The optional extra `pip install 'forgetbench[lmeval]'` brings in lm-eval; nothing here imports it
at module level. We call its Python API (`lm_eval.simple_evaluate` with the `hf` backend) rather
than its CLI so that the settings a run resolves are handed over as typed values, not re-parsed
from a string: batch size, dtype, device and `trust_remote_code` reach the `HFLM` constructor, and
`apply_chat_template` reaches the request builder (lm-eval then formats every prompt, few-shot
examples included, with the tokenizer's chat template).

Offline, a task is a local YAML (`include_path`) whose data is a local file (`dataset_path: json`);
online, `tasks=["mmlu"]` downloads `cais/mmlu` through Hugging Face `datasets`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forgetbench.device import default_device
from forgetbench.errors import ConfigError, DataError, did_you_mean
from forgetbench.modeling.loading import load_tokenizer

INSTALL_HINT = "pip install 'forgetbench[lmeval]'"
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "auto")
# Metrics we report per task or group; lm-eval keys them "<metric>,<filter>" ("acc,none").
# exact_match: the generative tasks' (BBH's chain of thought, TriviaQA's short answers).
METRICS: tuple[str, ...] = ("acc", "acc_norm", "exact_match")


def lm_eval_utility(
    model_dir: str,
    tasks: Sequence[str],
    *,
    batch_size: int,
    apply_chat_template: bool,
    num_fewshot: int | None = None,
    limit: int | None = None,
    dtype: str = "float32",
    trust_remote_code: bool = False,
    include_path: str | None = None,
    device: str | None = None,
) -> dict[str, float]:
    """Accuracy of the model in `model_dir` (a save_pretrained folder or a Hub id) on lm-eval tasks.

    Returns `{"<task>/acc": x, "<task>/acc_norm": y}` for every task and group lm-eval reports
    (for `mmlu`: the group, its four categories and the 57 subjects); `acc_norm` only where the
    task defines it, `exact_match` for a generative task (bbh, triviaqa). `num_fewshot=None` keeps each task's own default (0 when it has none);
    `limit` caps the documents per task (for smoke runs only: the numbers are then not MMLU's).
    `device=None` is the configured `model.device`. On a non-main rank of a multi-process
    launch lm-eval returns nothing and so do we (`{}`).
    """
    tasks = list(tasks)
    _validate(tasks, batch_size=batch_size, num_fewshot=num_fewshot, limit=limit, dtype=dtype)
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise ConfigError(
            "lm-evaluation-harness is not installed (needed for lm-eval utility tasks)",
            INSTALL_HINT,
        ) from None
    _check_model(
        model_dir, apply_chat_template=apply_chat_template, trust_remote_code=trust_remote_code
    )

    # Everything that changes the model lm-eval loads goes through model_args; batch size and
    # device go through simple_evaluate's own arguments, which it merges into the same HFLM
    # constructor call (passing them in both places would be a duplicate-keyword error).
    model_args: dict[str, Any] = {
        "pretrained": model_dir,
        "dtype": dtype,
        "trust_remote_code": trust_remote_code,
    }
    task_manager = _task_manager(TaskManager, tasks, include_path, metadata=dict(model_args))
    if device is None:
        device = str(default_device())

    try:
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=model_args,
            tasks=tasks,
            num_fewshot=num_fewshot,
            batch_size=batch_size,
            device=device,
            limit=limit,
            apply_chat_template=apply_chat_template,
            # A chat model sees few-shot examples as earlier turns, lm-eval's default with a template.
            fewshot_as_multiturn=apply_chat_template,
            task_manager=task_manager,
            # We report point estimates only; stderr bootstrapping would cost time for nothing.
            bootstrap_iters=0,
            log_samples=False,
        )
    except ConnectionError as exc:  # what `datasets` raises for a Hub dataset under HF_*_OFFLINE=1
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"lm-eval could not fetch a task's data: {first}",
            "Hub tasks such as mmlu need the network (unset HF_HUB_OFFLINE and "
            "HF_DATASETS_OFFLINE); offline, use a local task YAML via include_path",
        ) from None
    if results is None:  # non-main rank: lm-eval gathers everything on rank 0
        return {}
    return _accuracies(results, tasks)


def _validate(
    tasks: list[str],
    *,
    batch_size: int | str,
    num_fewshot: int | None,
    limit: int | None,
    dtype: str,
) -> None:
    if not tasks:
        raise ConfigError("no lm-eval tasks given", "pass e.g. tasks=['mmlu']")
    if batch_size == "auto":
        pass  # lm-eval's own: the largest batch that fits
    elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"lm-eval batch_size must be an integer >= 1 or auto, got {batch_size!r}")
    if num_fewshot is not None and num_fewshot < 0:
        raise ConfigError(f"lm-eval num_fewshot must be >= 0, got {num_fewshot}")
    if limit is not None and limit < 1:
        raise ConfigError(f"lm-eval limit must be >= 1, got {limit}", "or None for all documents")
    if dtype not in DTYPES:
        raise ConfigError(
            f"unknown dtype '{dtype}' for lm-eval{did_you_mean(dtype, DTYPES)}",
            f"use one of {', '.join(DTYPES)}",
        )


def _check_model(model_dir: str, *, apply_chat_template: bool, trust_remote_code: bool) -> None:
    """Fail before lm-eval's long start-up: the tokenizer must load from `model_dir`, and have a
    chat template when one is asked for (lm-eval would otherwise fail deep in request building)."""
    tokenizer = load_tokenizer(model_dir, trust_remote_code=trust_remote_code)
    if apply_chat_template and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"apply_chat_template=True but the tokenizer of '{model_dir}' has no chat template",
            "set apply_chat_template=False for a base model",
        )


def _task_manager(
    task_manager_cls: Any, tasks: list[str], include_path: str | None, *, metadata: dict[str, Any]
) -> Any:  # -> lm_eval.tasks.TaskManager
    """Index only the local task folder when it holds every requested task: indexing lm-eval's
    ~15 000 bundled task configs takes seconds, and a local task must not depend on them."""
    if include_path is not None:
        if not Path(include_path).is_dir():
            raise DataError(
                f"lm-eval include_path '{include_path}' is not a folder",
                "point it at the folder holding your task YAML files",
            )
        local = task_manager_cls(
            include_path=include_path, include_defaults=False, metadata=metadata
        )
        if not _unknown(tasks, local.all_tasks):
            return local
    manager = task_manager_cls(include_path=include_path, metadata=metadata)
    unknown = _unknown(tasks, manager.all_tasks)
    if unknown:
        name = unknown[0]
        raise ConfigError(
            f"unknown lm-eval task '{name}'{did_you_mean(name, manager.all_tasks)}",
            "list tasks with `lm-eval ls tasks`; for a local task YAML pass include_path",
        )
    return manager


def _unknown(tasks: list[str], known: Sequence[str]) -> list[str]:
    """Names lm-eval cannot resolve: not a task, group or tag, not a YAML path, no glob match."""
    known_set = set(known)
    return [
        t
        for t in tasks
        if t not in known_set
        and not Path(t).is_file()
        and not (any(c in t for c in "*?[") and fnmatch.filter(known_set, t))
    ]


def _accuracies(results: dict[str, Any], tasks: list[str]) -> dict[str, float]:
    """`{"<task>/acc": ...}` from lm-eval's results and groups tables, filter "none" preferred."""
    table = {**results.get("results", {}), **results.get("groups", {})}
    out: dict[str, float] = {}
    for name, metrics in sorted(table.items()):
        for metric in METRICS:
            keys = [k for k in metrics if k.split(",")[0] == metric]
            if not keys:
                continue
            key = f"{metric},none" if f"{metric},none" in keys else sorted(keys)[0]
            value = metrics[key]
            if isinstance(value, int | float):
                out[f"{name}/{metric}"] = float(value)
    missing = [t for t in tasks if t in table and not any(f"{t}/{m}" in out for m in METRICS)]
    if missing:
        raise ConfigError(
            f"lm-eval task '{missing[0]}' reports no accuracy (metrics: "
            f"{', '.join(k for k in table[missing[0]] if k != 'alias')})",
            "use a task whose metric_list includes acc or exact_match",
        )
    return out
