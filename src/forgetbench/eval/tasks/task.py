"""What an evaluation task is, and how one runs (after lm-evaluation-harness's `Task`: documents ->
`construct_requests` -> model answers -> `process_results` -> aggregation).

A task holds documents in named subsets (TOFU's four sets, one format file, LUME's splits). For
each document it builds requests (`forgetbench.eval.requests`); `run_task` has a backend answer
all requests of a subset together, hands each document its answers back for a per-item log row,
and finally gives the task every row to turn into scores (through the metrics' registered
aggregations) and logs. A task never holds the model, so the same task runs on any backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from forgetbench.config_sections import EvalConfig
from forgetbench.data.logs import EvalLog
from forgetbench.errors import DataError, ModelError
from forgetbench.eval.backend import Backend, serve
from forgetbench.eval.requests import Request, Response
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.registry import Registry


@dataclass(frozen=True)
class EvalSetup:
    """What the registered task factories build their tasks from."""

    root: Path  # the miniature's folder, or the folder given (a TOFU or LUME folder)
    tofu: Path  # the TOFU-layout folder: `root/tofu` for the miniature
    split: str  # forget split: forget01, forget05, forget10
    benchmark: str  # mini | tofu | lume | muse | wmdp

    @property
    def tofu_layout(self) -> bool:
        """The data is TOFU-shaped (the miniature's or a TOFU folder): the TOFU, MIA and formats
        tasks read it; LUME, MUSE and WMDP folders have their own tasks."""
        return self.benchmark in ("mini", "tofu")

    eval_config: EvalConfig
    template: PromptTemplate
    tokenizer: Any  # renders chat-template prompts; tasks never run the model
    max_length: int  # tokens per scored text, as in training
    # An instructed method's instruction (in-context unlearning, `methods.base.InstructedMethod`)
    # with "{subject}" where the target's name goes: a task that can instruct (RWKU's) puts it
    # before each prompt; None = the prompts as they are.
    instruction: str | None = None


@dataclass(frozen=True)
class TaskResult:
    scores: dict[str, Any]
    # Per-item records, written under the task's name in extra_log.json.
    items: Any = None
    # TOFU's per-question log (eval_log_aggregated.json); only the TOFU task has one.
    eval_log: EvalLog | None = None


class Task(Protocol):
    name: str
    # Documents by subset; a subset's requests go to the backend together, so it batches them.
    subsets: Mapping[str, Sequence[Any]]

    def requests(self, subset: str, doc: Any) -> list[Request]:
        """What the model must answer for one document."""
        ...

    def process(self, subset: str, doc: Any, responses: Sequence[Response]) -> dict[str, Any]:
        """One document's log row from the answers to its requests, in their order."""
        ...

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        """Scores and logs from every subset's rows (in document order)."""
        ...


# A factory returns None where its task does not apply: data absent, disabled by an option, or
# another benchmark.
TaskFactory = Callable[[EvalSetup], Task | None]
TASKS: Registry[TaskFactory] = Registry("evaluation task")


def run_task(task: Task, backend: Backend) -> TaskResult:
    rows: dict[str, list[dict[str, Any]]] = {}
    for subset, docs in task.subsets.items():
        requests = [task.requests(subset, doc) for doc in docs]
        try:
            answered = serve(backend, [r for per_doc in requests for r in per_doc])
        except ModelError:
            raise
        except DataError as exc:
            # A text the tokenizer cannot split as asked: name where it came from.
            raise DataError(f"{task.name} {subset}: {exc.what}", exc.hint) from None
        responses = iter(answered)
        rows[subset] = [
            task.process(subset, doc, [next(responses) for _ in per_doc])
            for doc, per_doc in zip(docs, requests, strict=True)
        ]
    return task.results(rows)
