"""Every metric for one model, written as per-question logs plus a flat summary, cached so a
rerun (or a resumed study) never evaluates the same model twice."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.config_sections import EvalConfig
from forgetbench.data.logs import EvalLog, read_eval_log, write_eval_log
from forgetbench.errors import ConfigError, DataError
from forgetbench.eval.backend import evaluation_backend
from forgetbench.eval.distributed import is_main_process
from forgetbench.eval.summary import compare
from forgetbench.eval.tasks import TASKS, EvalSetup, run_task
from forgetbench.eval.tasks.lume import check_utility_options, lume_final_scores
from forgetbench.io import atomic_write_json, read_json, set_aside
from forgetbench.metrics import mia_roc
from forgetbench.metrics.info import METRICS
from forgetbench.modeling.limits import model_context, position_limit

AGGREGATED_NAME = "eval_log_aggregated.json"  # TOFU's file name, so its tooling reads ours
EXTRA_NAME = "extra_log.json"  # per-item logs of the metrics TOFU does not have
SUMMARY_NAME = "summary.json"
CHECKSUM_KEY = "sha256"  # summary.json's checksum of itself and the logs (`_checksum`)
PRIVLEAK_ATTACK = "min_k"  # MUSE / open-unlearning report privleak with Min-K%
# The order tasks run in, and so their keys in summary.json and extra_log.json.
TASK_ORDER = ("tofu", "probes", "mia", "formats", "lume", "muse", "wmdp", "rwku")


def tofu_root(data: str | Path) -> Path:
    source = Path(data)
    if (source / "manifest.json").is_file() and (source / "tofu").is_dir():
        return source / "tofu"
    return source


def data_root(data: str | Path) -> Path:
    """The miniature's folder when `data` is it or its `tofu/` subfolder, else `data`."""
    source = Path(data)
    if source.name == "tofu" and (source.parent / "manifest.json").is_file():
        return source.parent
    return source


def _model_identity(model_dir: str | Path) -> str:
    path = Path(model_dir)
    weights = sorted(path.glob("*.safetensors")) if path.is_dir() else []
    stamp = [(w.name, w.stat().st_size, w.stat().st_mtime_ns) for w in weights]
    return json.dumps([str(path.resolve()) if path.exists() else str(model_dir), stamp])


_NEWER_OPTIONS = (
    "lume_mmlu",
    "max_questions",
    "max_length",
    "rwku_utility",
)  # EvalConfig fields added after caches existed
# Options read when rows are made from several evaluations (shadow-model attacks), never by one.
ROW_TIME_OPTIONS = frozenset({"mia_shadows", "mia_rmia_gamma"})
# How generation runs, not what it computes, at their defaults: evaluations cached before these
# options existed keep their keys. Set otherwise, they count (a compiled bf16 step may round
# differently).
_SPEED_DEFAULTS = {"cache_implementation": "dynamic", "compile_generation": True}


def evaluation_key(
    model_dir: str | Path,
    data: str | Path,
    split: str,
    eval_config: EvalConfig,
    benchmark: str,
    tasks: tuple[str, ...] | None = None,
    instruction: str | None = None,
) -> str:
    """`tasks`: only these of `TASK_ORDER` (a shadow model's MIA-only evaluation); None = all.
    `instruction`: an instructed method's (`EvalSetup.instruction`), which changes every prompt
    of the same weights; unset, the key is an uninstructed evaluation's as it always was."""
    blob = json.dumps(
        [
            __version__,
            _model_identity(model_dir),
            str(Path(data).resolve()),
            split,
            benchmark,
            # A metric whose numbers change bumps its version: evaluations of the old definition,
            # in any output folder sharing the cache, are not reused for the new one.
            {name: info.version for name, info in sorted(METRICS.items())},
            # Unset, the newer options leave the keys of earlier evaluations as they were.
            eval_config.model_dump(
                exclude={k for k in _NEWER_OPTIONS if getattr(eval_config, k) is None}
                | {k for k, v in _SPEED_DEFAULTS.items() if getattr(eval_config, k) == v}
                | ROW_TIME_OPTIONS
            ),
            *([list(tasks)] if tasks is not None else []),
            *([{"instruction": instruction}] if instruction is not None else []),
        ]
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def scored_length(model: Any, eval_config: EvalConfig, train_max_length: int) -> int:
    """The evaluation's tokens per scored prompt+answer (`EvalConfig.scored_length`), refused
    past the model's context when asked for: positions it never learned give numbers that mean
    nothing, or an index error for learned position embeddings. The default (train.max_length)
    is cut to a learned position table's size instead: such a model cannot be shown more."""
    length = eval_config.scored_length(train_max_length)
    context = model_context(model)
    if eval_config.max_length is not None and context is not None and length > context:
        raise ConfigError(
            f"eval.max_length={length} is longer than the model's context ({context} tokens)",
            f"set eval.max_length to at most {context}",
        )
    limit = position_limit(model)
    return min(length, limit) if limit is not None else length


def evaluate_model(
    model: Any,
    tokenizer: Any,
    template: Any,
    *,
    data: str | Path,
    split: str,
    benchmark: str,
    eval_config: EvalConfig,
    max_length: int,
    phases: dict[str, float] | None = None,
    tasks: tuple[str, ...] | None = None,
    on_task: Callable[[str, int, int], None] | None = None,
    instruction: str | None = None,
) -> tuple[EvalLog | None, dict[str, Any], dict[str, Any]]:
    """(TOFU log or None, scores, extra per-item logs) for one loaded model: every task that
    applies (`TASK_ORDER`, or those of it in `tasks`), answered by the fast backend, then LUME's
    final score. `phases`, when given, receives the seconds spent scoring and generating;
    `on_task(name, k, n)` hears of each task as it starts (k of the n that apply);
    `instruction`: `EvalSetup.instruction`."""
    check_utility_options(eval_config)
    max_length = scored_length(model, eval_config, max_length)
    setup = EvalSetup(
        root=data_root(data), tofu=tofu_root(data), split=split, benchmark=benchmark,
        eval_config=eval_config, template=template, tokenizer=tokenizer, max_length=max_length,
        instruction=instruction,
    )  # fmt: skip
    backend = evaluation_backend(model, tokenizer, eval_config)
    log: EvalLog | None = None
    scores: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    built = [
        (name, task)
        for name in TASK_ORDER
        if (tasks is None or name in tasks) and (task := TASKS.get(name)(setup)) is not None
    ]
    for k, (name, task) in enumerate(built, start=1):
        if on_task is not None:
            on_task(name, k, len(built))
        result = run_task(task, backend)
        scores.update(result.scores)
        if result.eval_log is not None:
            log = result.eval_log
        if result.items is not None:
            extra[name] = result.items
    # Utility: eval.lume_mmlu if given, else the background MC accuracy; an lm-eval MMLU is
    # combined by the caller, after.
    scores.update(lume_final_scores(scores, given_mmlu=eval_config.lume_mmlu))
    if phases is not None:
        phases.update(backend.seconds)
    return log, scores, extra


def relative_scores(
    candidate: EvalLog | None,
    scores: dict[str, Any],
    reference: EvalLog | None,
    reference_scores: dict[str, Any] | None,
    *,
    form: str,
) -> dict[str, Any]:
    """What needs a retain model: forget quality (and the retain-set KS p-value) from the two
    TOFU logs, privleak from the two MIA AUCs."""
    out: dict[str, Any] = {}
    if candidate is not None and reference is not None:
        compared = compare(reference, candidate, form=form)  # type: ignore[arg-type]
        out["forget_quality"] = compared["forget_quality"]
        out["retain_ks_pvalue"] = compared["retain_ks_pvalue"]
        # How many of the candidate's questions each KS test used (the reference's, matched by
        # question text). Numbers only: the report reads every `forget/...` key as one.
        for name in ("forget", "retain"):
            for count in ("questions", "candidate_questions"):
                out[f"{name}/{count}"] = compared[f"{name}/{count}"]
    key = f"mia/{PRIVLEAK_ATTACK}"
    if reference_scores and key in scores and key in reference_scores:
        retain_auc = reference_scores[key]
        out["privleak"] = None if retain_auc >= 1.0 else mia_roc.privleak(scores[key], retain_auc)
    return out


def _checksum(out: Path, summary: dict[str, Any]) -> str:
    """sha256 of the summary (without this field) and of the logs beside it, as written: a cached
    evaluation edited by hand is then damaged, as a cached model whose files changed is."""
    digest = hashlib.sha256(json.dumps(summary, sort_keys=True, default=str).encode())
    for name in (AGGREGATED_NAME, EXTRA_NAME):
        if (out / name).is_file():
            digest.update(name.encode() + (out / name).read_bytes())
    return digest.hexdigest()


def cached_evaluation(out: Path, key: str) -> tuple[EvalLog | None, dict[str, Any]] | None:
    """A finished evaluation of the same key, or None. A damaged one (unreadable summary or log,
    a summary without scores, files changed since they were written) is reported in one line,
    its files renamed aside, and redone."""
    summary_path = out / SUMMARY_NAME
    if not summary_path.is_file():
        return None
    try:
        summary = read_json(summary_path)
        if not isinstance(summary, dict) or not isinstance(summary.get("scores"), dict):
            raise DataError(f"{summary_path} has no scores")
        if summary.get("key") != key:
            return None
        recorded = summary.pop(CHECKSUM_KEY, None)
        if recorded is None:
            return None  # written before checksums: recomputed, as under another key
        if recorded != _checksum(out, summary):
            raise DataError(f"{out} was changed after it was written: its checksum differs")
        log = read_eval_log(out / AGGREGATED_NAME) if (out / AGGREGATED_NAME).is_file() else None
    except DataError as exc:
        moved = [
            set_aside(out / name).name
            for name in (SUMMARY_NAME, AGGREGATED_NAME)
            if (out / name).is_file()
        ]
        print(
            f"warning: cached evaluation in {out} is damaged ({exc.what}); set aside as "
            f"{', '.join(moved)} and recomputed",
            file=sys.stderr,
            flush=True,
        )
        return None
    return log, summary["scores"]


def write_evaluation(
    out: Path,
    key: str,
    log: EvalLog | None,
    scores: dict[str, Any],
    extra: dict[str, Any],
    info: dict[str, Any],
) -> None:
    """Logs first, summary last: a summary on disk means the evaluation finished."""
    if not is_main_process():
        return
    out.mkdir(parents=True, exist_ok=True)
    if log is not None:
        write_eval_log(out / AGGREGATED_NAME, log)
    if extra:
        atomic_write_json(out / EXTRA_NAME, extra)
    summary = {"key": key, "scores": scores, **info}
    atomic_write_json(out / SUMMARY_NAME, {**summary, CHECKSUM_KEY: _checksum(out, summary)})
