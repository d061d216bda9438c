"""Who answers evaluation requests: one interface (`Backend`), two implementations.

`FastBackend` is what `forgetbench eval` runs: batched scoring that encodes a prompt once for all
its answers, batched greedy generation, a long shared prompt prefix encoded once
(`forgetbench.eval.outputs`). `NaiveBackend` is the obvious implementation it replaces, kept as
the reference `forgetbench bench eval` checks and times the fast one against. Both give the same
numbers to float rounding (tested), so tasks never care which one answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from forgetbench.config_sections import EvalConfig
from forgetbench.eval.distributed import sharded_map
from forgetbench.eval.outputs import (
    AnswerScore,
    gradient_norms,
    greedy_generate,
    score_answers,
    score_answers_naive,
    score_candidates,
)
from forgetbench.eval.requests import Generate, GradNorm, Request, Response, Score
from forgetbench.modeling.limits import model_context, position_limit

R = TypeVar("R", Score, Generate)
AUTO_FIRST_GPU_BATCH = 256  # `eval.batch_size=auto` tries this first on a GPU, then halves
AUTO_CPU_BATCH = 16  # ... and uses eval.batch_size's default on the CPU, which never runs out


class Backend(Protocol):
    """Answers requests in order: one tuple of `AnswerScore`s (one per answer) per `Score`, one
    text per `Generate`, one array of gradient norms per `GradNorm`. A call may mix options
    (`add_eos`, `max_length`, `max_new_tokens`, `p`)."""

    def score(self, requests: Sequence[Score]) -> list[tuple[AnswerScore, ...]]: ...

    def generate(self, requests: Sequence[Generate]) -> list[str]: ...

    def gradnorm(self, requests: Sequence[GradNorm]) -> list[np.ndarray]: ...


def serve(backend: Backend, requests: Sequence[Request]) -> list[Response]:
    """Every request answered, in order. All requests of one kind go to the backend in one call,
    so it batches across them as it likes; under `accelerate launch` each process answers a
    contiguous shard of each kind and every process gets every answer (`sharded_map`)."""
    responses: list[Any] = [None] * len(requests)
    # By name, looked up only for the kinds asked: a backend that never meets a GradNorm (a
    # test's) need not answer one.
    answerers = ((Score, "score"), (Generate, "generate"), (GradNorm, "gradnorm"))
    for kind, method in answerers:
        rows = [i for i, r in enumerate(requests) if isinstance(r, kind)]
        if rows:
            answer: Callable[[Any], list[Any]] = getattr(backend, method)
            answered = sharded_map(answer, [requests[i] for i in rows])
            for i, response in zip(rows, answered, strict=True):
                responses[i] = response
    return responses


def _by_options(requests: Sequence[R], options: Callable[[R], Hashable]) -> dict[Any, list[int]]:
    """Indices of the requests sharing each value of `options`, in order of first appearance."""
    groups: dict[Any, list[int]] = {}
    for i, request in enumerate(requests):
        groups.setdefault(options(request), []).append(i)
    return groups


def _max_length(model: Any, max_length: int | None) -> int:
    # None asks for whole documents: up to the model's context, 4096 when its config is silent.
    # A model with a learned table of positions cannot be shown more than it holds (an index
    # error past it); every text that fits, and every rotary model, is scored as before.
    limit = position_limit(model)
    if max_length is None:
        return model_context(model) or 4096
    return min(max_length, limit) if limit is not None else max_length


class FastBackend:
    """Batches of `batch_size` sequences. A request with several answers (truth ratio's answer,
    paraphrase and perturbed answers; the letters of a multiple-choice question) has its prompt
    encoded once and its KV cache continued by every answer (`score_candidates`); one-answer
    requests are whole texts scored in one pass each, de-duplicated and sorted by length
    (`score_answers`), the cheaper path when nothing is shared."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int | str,
        cache_implementation: str = "dynamic",
        compile_generation: bool = True,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        # How `greedy_generate` keeps its KV cache (eval.cache_implementation, compile_generation)
        self.generation = {
            "cache_implementation": cache_implementation,
            "compile_decoding": compile_generation,
        }
        # "auto": the largest batch that fits, as accelerate's find_executable_batch_size and
        # lm-eval's `auto`: start large on a GPU, halve on out-of-memory, keep what worked.
        self.auto = batch_size == "auto"
        if self.auto:
            on_gpu = next(model.parameters()).device.type == "cuda"
            batch_size = AUTO_FIRST_GPU_BATCH if on_gpu else AUTO_CPU_BATCH
        self.batch_size = int(batch_size)
        # Wall time served per kind of request: where an evaluation's time goes (bench study).
        # A gradient norm is a scoring pass and a backward pass: counted as scoring.
        self.seconds = {"scoring": 0.0, "generation": 0.0}

    def score(self, requests: Sequence[Score]) -> list[tuple[AnswerScore, ...]]:
        started = time.perf_counter()
        try:
            return self._score(requests)
        finally:
            self.seconds["scoring"] += time.perf_counter() - started

    def generate(self, requests: Sequence[Generate]) -> list[str]:
        started = time.perf_counter()
        try:
            return self._generate(requests)
        finally:
            self.seconds["generation"] += time.perf_counter() - started

    def gradnorm(self, requests: Sequence[GradNorm]) -> list[np.ndarray]:
        started = time.perf_counter()
        try:
            return gradnorms(self.model, self.tokenizer, requests)
        finally:
            self.seconds["scoring"] += time.perf_counter() - started

    def _score(self, requests: Sequence[Score]) -> list[tuple[AnswerScore, ...]]:
        out: list[tuple[AnswerScore, ...]] = [()] * len(requests)
        groups = _by_options(requests, lambda r: (r.add_eos, r.max_length, len(r.answers) > 1))
        for (add_eos, max_length, shared), rows in groups.items():
            batch = [requests[i] for i in rows]
            length = _max_length(self.model, max_length)
            scored: list[tuple[AnswerScore, ...]]
            if shared:
                grouped = self._fitting(
                    lambda size, batch=batch, length=length, add_eos=add_eos: score_candidates(
                        self.model, self.tokenizer, [(r.prompt, r.answers) for r in batch],
                        batch_size=size, max_length=length, add_eos=add_eos,
                    )
                )  # fmt: skip
                scored = [tuple(answers) for answers in grouped]
            else:
                single = self._fitting(
                    lambda size, batch=batch, length=length, add_eos=add_eos: score_answers(
                        self.model, self.tokenizer, [(r.prompt, r.answers[0]) for r in batch],
                        batch_size=size, max_length=length, add_eos=add_eos,
                    )
                )  # fmt: skip
                scored = [(answer,) for answer in single]
            for i, answers in zip(rows, scored, strict=True):
                out[i] = answers
        return out

    def _generate(self, requests: Sequence[Generate]) -> list[str]:
        out = [""] * len(requests)
        for max_new_tokens, rows in _by_options(requests, lambda r: r.max_new_tokens).items():
            texts = self._fitting(
                lambda size, rows=rows, max_new_tokens=max_new_tokens: greedy_generate(
                    self.model, self.tokenizer, [requests[i].prompt for i in rows],
                    max_new_tokens=max_new_tokens, batch_size=size, **self.generation,
                )
            )  # fmt: skip
            for i, text in zip(rows, texts, strict=True):
                out[i] = text
        return out

    def _fitting(self, call: Callable[[int], list[Any]]) -> list[Any]:
        """`call(batch_size)`; with `auto`, retried at half the batch after a GPU out-of-memory
        error until it fits (a batch of 1 that does not fit is the user's to know)."""
        while True:
            try:
                return call(self.batch_size)
            except torch.cuda.OutOfMemoryError:
                if not self.auto or self.batch_size == 1:
                    raise
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                self.batch_size //= 2


def gradnorms(model: Any, tokenizer: Any, requests: Sequence[GradNorm]) -> list[np.ndarray]:
    """Both backends' answer to `GradNorm` requests: one backward pass per item (the attack needs
    each item's own gradient, so there is nothing to batch), grouped by their options."""
    out: list[np.ndarray] = [np.empty(0)] * len(requests)
    for (p, max_length), rows in _by_options(requests, lambda r: (r.p, r.max_length)).items():
        pairs = [(requests[i].prompt, requests[i].answer) for i in rows]
        length = _max_length(model, max_length)
        norms = gradient_norms(model, tokenizer, pairs, p=p, max_length=length)
        for i, value in zip(rows, norms, strict=True):
            out[i] = value
    return out


def evaluation_backend(model: Any, tokenizer: Any, eval_config: EvalConfig) -> FastBackend:
    """The backend every evaluation of a model runs on (`forgetbench eval`, the study, the attacks,
    `bench eval`'s fast path): `FastBackend` with `eval.batch_size` sequences a batch, `auto` the
    largest that fits. One place reads the evaluation config for it, so all of them batch alike."""
    return FastBackend(
        model,
        tokenizer,
        batch_size=eval_config.batch_size,
        cache_implementation=eval_config.cache_implementation,
        compile_generation=eval_config.compile_generation,
    )


class NaiveBackend:
    """One request and one answer at a time: every answer re-encoded together with its prompt,
    logits over every position, no KV cache, no batching (`score_answers_naive`), and one greedy
    generation per prompt."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer

    def score(self, requests: Sequence[Score]) -> list[tuple[AnswerScore, ...]]:
        out = []
        for r in requests:
            pairs = [(r.prompt, a) for a in r.answers]
            length = _max_length(self.model, r.max_length)
            scored = score_answers_naive(
                self.model, self.tokenizer, pairs, max_length=length, add_eos=r.add_eos
            )
            out.append(tuple(scored))
        return out

    def gradnorm(self, requests: Sequence[GradNorm]) -> list[np.ndarray]:
        return gradnorms(self.model, self.tokenizer, requests)

    def generate(self, requests: Sequence[Generate]) -> list[str]:
        out = []
        for r in requests:
            (text,) = greedy_generate(
                self.model,
                self.tokenizer,
                [r.prompt],
                max_new_tokens=r.max_new_tokens,
                batch_size=1,
            )
            out.append(text)
        return out
