"""The one cached evaluation: every metric of one model on one split of a study's data, read back
when an evaluation of the same inputs (model weights, data, split, options, code version) is
already in its folder, computed and written (logs first, summary last) when not."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgetbench.benchmarks.corpus import CorpusBenchmark
from forgetbench.cache import shared_entry
from forgetbench.config import RunConfig
from forgetbench.config_sections import EvalConfig, ModelConfig
from forgetbench.data.logs import EvalLog, read_eval_log
from forgetbench.data.tofu import eval_set_files, require_splits, split_file
from forgetbench.errors import ConfigError, DataError
from forgetbench.eval.runner import SUMMARY_NAME, relative_scores, tofu_root
from forgetbench.eval.tasks.lume import lume_final_scores
from forgetbench.io import read_json
from forgetbench.study.given import given_data
from forgetbench.study.inputs import Study

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
    eval_config: EvalConfig,
    folder: Path,
    model: ModelConfig | None = None,
    info: dict[str, Any] | None = None,
    extend: Extension | None = None,
    shared: bool = True,
    tasks: tuple[str, ...] | None = None,
    on_task: Callable[[str, int, int], None] | None = None,
    instruction: str | None = None,
    load: Callable[[], tuple[Any, Any]] | None = None,
) -> Evaluated:
    """`shared=False` keeps the evaluation in `folder` only (`forgetbench eval`'s --out, which a
    user names and owns); otherwise it is a link to the shared cache's entry of the same key.
    `tasks`: run only these evaluation tasks (a shadow model needs only "mia"). `instruction`:
    an instructed method's, put before every prompt (`EvalSetup.instruction`) and in the key.
    `load`: gives the (model, tokenizer) of `model_dir` where the caller holds it already loaded
    (an evaluation of several sets of one model loads it once)."""
    from forgetbench.eval.runner import (
        cached_evaluation,
        evaluate_model,
        evaluation_key,
        write_evaluation,
    )
    from forgetbench.modeling.loading import load_model

    model = model or ModelConfig()
    key = evaluation_key(
        model_dir, study.data, split, eval_config, study.benchmark, tasks, instruction
    )
    with shared_entry(folder, kind="evaluations", name=key) if shared else nullcontext():
        cached = cached_evaluation(folder, key)
        if cached is not None:
            return Evaluated(cached[0], cached[1], folder)
        loaded, tokenizer = (
            load()
            if load is not None
            else load_model(model_dir, dtype=model.dtype, trust_remote_code=model.trust_remote_code)
        )
        phases: dict[str, float] = {}
        log, scores, extra = evaluate_model(
            loaded, tokenizer, study.template, data=study.data, split=split,
            benchmark=study.benchmark, eval_config=eval_config, max_length=study.max_length,
            phases=phases, tasks=tasks, on_task=on_task, instruction=instruction,
        )  # fmt: skip
        if extend is not None:
            scores.update(extend(log, scores))
        info = info if info is not None else {"model": str(model_dir), "split": split}
        write_evaluation(folder, key, log, scores, extra, info)
        return Evaluated(log, scores, folder, phases)


Reference = tuple[EvalLog | None, dict[str, Any] | None]


def log_folder(log_path: str | Path) -> Path:
    """The folder of an eval log given as a folder or as one of its files."""
    path = Path(log_path)
    return path if path.is_dir() else path.parent


def summary_scores(log_path: str | Path) -> Any:
    """The scores of the summary.json `forgetbench eval` wrote beside a log; None without one."""
    summary_file = log_folder(log_path) / SUMMARY_NAME
    return read_json(summary_file).get("scores") if summary_file.is_file() else None


def read_reference(retain_log: str | Path | None) -> Reference:
    """A retain model's eval log and, beside it, its summary's scores (for privleak)."""
    if not retain_log:
        return None, None
    return read_eval_log(retain_log), summary_scores(retain_log)


def lm_eval_scores(model: str, config: RunConfig) -> dict[str, float]:
    """`eval.lm_eval_tasks` on the model folder `model`, as `lm_eval/{task}/{metric}` scores."""
    # lm-eval is an optional dependency, imported only when its tasks are asked for.
    from forgetbench.eval.lmeval import lm_eval_utility

    utility = lm_eval_utility(
        model,
        config.eval.lm_eval_tasks,
        batch_size=config.eval.batch_size,
        apply_chat_template=config.eval.lm_eval_chat_template,
        dtype=config.model.dtype,
        trust_remote_code=config.model.trust_remote_code,
        include_path=config.eval.lm_eval_include_path,
    )
    return {f"lm_eval/{key}": value for key, value in utility.items()}


def eval_extension(config: RunConfig, model: str | None, reference: Reference) -> Extension:
    """What `forgetbench eval` adds to a model's own scores: forget quality and privleak against
    the retain model's `reference`, lm-eval utility (of the model folder `model`; None when the
    model is an object, which lm-eval tasks then refuse) and LUME's final score."""
    reference_log, reference_scores = reference
    if config.eval.lm_eval_tasks and model is None:
        raise ConfigError(
            "eval.lm_eval_tasks load the model from a folder, and this model is an object",
            "save it and run 'forgetbench eval --model FOLDER', or drop lm_eval_tasks",
        )

    def extend(log: Any, scores: dict[str, Any]) -> dict[str, Any]:
        added = relative_scores(
            log, scores, reference_log, reference_scores, form=config.eval.truth_ratio_form
        )
        if config.eval.lm_eval_tasks:
            added.update(lm_eval_scores(str(model), config))
        # LUME's final score with MMLU as utility, now that lm-eval may have measured it.
        added.update(lume_final_scores({**scores, **added}, given_mmlu=config.eval.lume_mmlu))
        return added

    return extend


def retain_summary(
    bench: CorpusBenchmark, retain_log: str | Path, *, what: str, config: RunConfig
) -> dict[str, Any]:
    """The summary.json that `forgetbench eval --benchmark NAME` wrote for a retain model
    (`retain_log`: its folder or one of its files), checked to hold scores of benchmark `bench`
    scored at `config`'s length: a relative score (MUSE's PrivLeak) against another benchmark's
    numbers, or against documents cut at another length, would mean nothing. `what` names the
    option that gave it, for the error."""
    folder = log_folder(retain_log)
    summary = read_json(folder / SUMMARY_NAME) if (folder / SUMMARY_NAME).is_file() else None
    scores = summary.get("scores") if isinstance(summary, dict) else None
    evaluate = (
        f"evaluate the retain model first with 'forgetbench eval --benchmark {bench.name} "
        "--model RETAIN --data DIR --out FOLDER' and pass that folder"
    )
    if not isinstance(summary, dict) or not isinstance(scores, dict):
        raise DataError(f"{what} {retain_log}: no {SUMMARY_NAME} with scores in {folder}", evaluate)
    if summary.get("benchmark") != bench.name:
        found = summary.get("benchmark") or "no named benchmark"
        raise DataError(
            f"{what} {retain_log} holds scores of {found}, not of {bench.title}", evaluate
        )
    theirs, ours = _scored_length(summary.get("config")), _scored_length(config.model_dump())
    if theirs is not None and theirs != ours:
        raise DataError(
            f"{what} {retain_log} was scored {theirs} tokens long and this run scores {ours}: "
            "the retain model's numbers must come from documents cut alike",
            f"evaluate the retain model again at this run's length ({ours}: eval.max_length, "
            "else train.max_length), or run at the retain model's",
        )
    data = given_data(config)
    if data is not None:
        _require_same_data(bench, summary, Path(data), f"{what} {retain_log}", evaluate)
    return summary


def _require_same_data(
    bench: CorpusBenchmark, summary: dict[str, Any], data: Path, named: str, evaluate: str
) -> None:
    """The retain model's evaluation must be of the same folder's data as this run's: PrivLeak
    against another folder's Min-K% AUC, or a gate against another folder's scores, means
    nothing. Its summary records the data's digest; one written before digests were recorded
    is compared by the folder it names."""
    recorded = summary.get("data_digest")
    if isinstance(recorded, str):
        if recorded == bench.digest(data):
            return
        found = f"data whose files differ from {data}'s"
    else:
        theirs = summary.get("data")
        if isinstance(theirs, str) and Path(theirs).resolve() == data.resolve():
            return
        found = f"the folder {theirs!r}, not {data}"
    raise DataError(
        f"{named} was scored on {found}: the retain model's scores must come from the "
        f"{bench.title} data this run scores",
        evaluate.replace("DIR", str(data)),
    )


def _scored_length(dumped: Any) -> int | None:
    """The evaluation's tokens per scored text in a dumped config (eval.max_length, else
    train.max_length); None where a summary records no config."""
    try:
        return EvalConfig.model_validate(dumped["eval"]).scored_length(
            dumped["train"]["max_length"]
        )
    except (KeyError, TypeError, ValueError):
        return None


def document_extension(
    bench: CorpusBenchmark, retain_log: str | None, config: RunConfig
) -> Extension:
    """What `forgetbench eval` adds to a document benchmark's scores: what the benchmark computes
    against the retain model's (MUSE's PrivLeak), from the summary.json that `forgetbench eval`
    wrote for the retain model (`--retain-log` names its folder or one of its files)."""
    retain_scores = None
    if retain_log and bench.relative is None:
        raise ConfigError(
            f"forgetbench eval --benchmark {bench.name} does not use --retain-log: "
            f"{bench.title}'s scores are accuracies of the model alone, none is computed against "
            "a retain model's",
            "drop --retain-log (a study's gates read it: 'forgetbench run --benchmark "
            f"{bench.name} --retain-log DIR')",
        )
    if retain_log:
        retain_scores = retain_summary(bench, retain_log, what="--retain-log", config=config)[
            "scores"
        ]

    def extend(log: Any, scores: dict[str, Any]) -> dict[str, Any]:
        return bench.relative_scores(scores, retain_scores) if retain_scores is not None else {}

    return extend


def require_eval_files(config: RunConfig, data: Path, *, quiet: bool) -> None:
    """Every TOFU file the evaluation reads, named at once before the model loads; a missing
    holdout only turns membership inference off, and says so."""
    split = config.benchmark.split
    tofu = tofu_root(data)
    needed = list(eval_set_files(split).values())
    holdout = split.replace("forget", "holdout")
    if config.eval.mia and tofu.is_dir() and split_file(tofu, holdout) is not None:
        needed.append(split)  # the members' side of membership inference
    elif config.eval.mia and tofu.is_dir() and not quiet:
        print(
            f"note: no {holdout}.json(l) in {tofu}: membership inference is skipped "
            "(eval.mia=false silences this)",
            file=sys.stderr,
        )
    require_splits(tofu, needed, reader=f"forgetbench eval --split {split}")
