"""`forgetbench bench eval`: the TOFU evaluation of one model answered by the fast backend, timed
against the naive one.

The same TOFU task (`forgetbench.eval.tasks.tofu`) runs twice on the same model: its requests
answered once by `NaiveBackend`, the obvious implementation (one question and one answer at a
time, every answer re-encoded together with its prompt: no KV cache, logits over every position;
one greedy generation per prompt), and once by `FastBackend`, as `forgetbench eval` runs it. Both
must write the same TOFU log, field by field (strings identical, numbers within 1e-5 absolute;
summed losses per answer token and the truth ratio as its log, see TOLERANCE) and the same 12
sub-scores and model utility; a disagreement makes the command fail.

What is counted, on the model both backends run (forward hooks, so nothing is estimated by hand),
per phase (a backend's `score` or `generate` call):
- model tokens: positions run through the model, prompts and padding included (padding costs the
  same compute as a real token), so the naive path's re-encoded prompts show;
- vocabulary projections: positions projected onto the vocabulary (the fast scorer skips the
  prompts, the naive one projects everything);
- answer tokens: the useful work, identical for both paths: the scored answer tokens the log
  reports (gt + paraphrase + perturbed) plus the generated tokens (the decoded generations
  re-tokenised; EOS not counted).
Achieved FLOP/s is the usual dense-transformer estimate 2 * n_params * model tokens / seconds: it
ignores attention-score FLOPs (small at these lengths) and charges the vocabulary projection at
every position, which overstates the fast path's work a little (it projects fewer positions).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from forgetbench.config_sections import EvalConfig
from forgetbench.data.logs import SET_FILES, EvalLog
from forgetbench.device import (
    matmul_peak_flop_per_s,
    peak_memory_mib,
    peak_rss_mib,
    reset_peak_memory,
    reset_peak_rss,
)
from forgetbench.errors import DataError, ForgetbenchError
from forgetbench.eval.backend import Backend, NaiveBackend, evaluation_backend
from forgetbench.eval.outputs import AnswerScore
from forgetbench.eval.requests import Generate, Score
from forgetbench.eval.summary import summarize
from forgetbench.eval.tasks.tofu import evaluate_tofu
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.profiling import StepProfiler
from forgetbench.records import QARecord

# Absolute, on every number of the log and of the summary, with two rescalings where 1e-5 would
# test float32 rounding rather than the scorer (the paths batch and cache differently, so their
# fp32 sums round differently; a bf16 model cannot meet 1e-5 at all):
# - summed losses (gt_loss, ...) are compared per answer token, like their avg_* twins: a sum of
#   ~30 token log-probs totalling ~100 nats carries ~1e-5 of rounding whoever computes it;
# - the truth ratio, exp(loss difference), is compared as its log (the loss difference): a ratio
#   of 40 moves by 4e-5 when the losses move by 1e-6.
TOLERANCE = 1e-5
SUMMED_LOSSES = {
    "gt_loss": "num_token_gt",
    "paraphrased_loss": "num_token_paraphrased",
    "perturb_loss": "num_token_perturb",
}
PHASES = ("scoring", "generation")
PROFILE_SKIP, PROFILE_STEPS = 2, 8  # model calls skipped, then profiled, per phase


class PathsDiffer(ForgetbenchError):
    """The fast and the naive evaluation disagree: the fast path has a bug (or lost precision)."""

    exit_code = 1


@dataclass
class Meter:
    """Wall time and model work per phase, recorded by forward hooks while a phase is open."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    model_tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    # Per phase, the real tokens counted where the masks are (a device tensor once a mask came):
    # an int() per forward pass would make the host wait for the device each generated token.
    real_counts: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    projections: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    current: str | None = None
    # Per phase, a profile of a few model calls (each forward pass a step), when asked.
    profilers: dict[str, StepProfiler] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        previous, self.current = self.current, name
        started = time.perf_counter()
        try:
            yield
        finally:
            if name in self.profilers:  # a window never spans another phase's work
                self.profilers[name].close()
            self.seconds[name] += time.perf_counter() - started
            self.current = previous

    @property
    def real_tokens(self) -> dict[str, int]:
        """Real (unpadded) model tokens per phase, read off the device here, once."""
        return {phase: int(count) for phase, count in self.real_counts.items()}

    @contextmanager
    def attached(self, model: Any) -> Iterator[Meter]:
        def count_inputs(module: Any, args: tuple, kwargs: dict[str, Any]) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            if self.current in self.profilers:
                self.profilers[self.current].step()
            if ids is not None and self.current is not None:
                self.model_tokens[self.current] += int(ids.numel())
                # The mask spans the cached positions too: the last columns are this call's.
                mask = kwargs.get("attention_mask")
                real = mask[:, -ids.shape[-1] :].sum() if mask is not None else ids.numel()
                self.real_counts[self.current] = self.real_counts[self.current] + real

        def count_projections(module: Any, args: tuple, output: torch.Tensor) -> None:
            if self.current is not None:
                self.projections[self.current] += int(output.shape[:-1].numel())

        handles = [model.register_forward_pre_hook(count_inputs, with_kwargs=True)]
        head = model.get_output_embeddings()
        if head is not None:
            handles.append(head.register_forward_hook(count_projections))
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()


@dataclass
class MeteredBackend:
    """`backend` with each `score` call timed as the scoring phase and each `generate` call as the
    generation phase of `meter`."""

    backend: Backend
    meter: Meter

    def score(self, requests: Sequence[Score]) -> list[tuple[AnswerScore, ...]]:
        with self.meter.phase("scoring"):
            return self.backend.score(requests)

    def generate(self, requests: Sequence[Generate]) -> list[str]:
        with self.meter.phase("generation"):
            return self.backend.generate(requests)


@dataclass
class Differences:
    max_abs: float = 0.0
    where: str = ""
    mismatches: list[str] = field(default_factory=list)  # beyond tolerance, or not comparable

    def number(self, where: str, a: float, b: float) -> None:
        diff = abs(float(a) - float(b))
        if math.isnan(diff):
            diff = 0.0 if math.isnan(float(a)) and math.isnan(float(b)) else math.inf
        if diff > self.max_abs:
            self.max_abs, self.where = diff, where
        if diff > TOLERANCE:
            self.mismatches.append(f"{where}: {a!r} vs {b!r}")

    def values(self, where: str, a: Any, b: Any) -> None:
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            if len(a) != len(b):
                self.mismatches.append(f"{where}: {len(a)} items vs {len(b)}")
                return
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                self.values(f"{where}[{i}]", x, y)
        elif isinstance(a, bool | str) or isinstance(b, bool | str) or a is None or b is None:
            if a != b:
                self.mismatches.append(f"{where}: {a!r} vs {b!r}")
        elif isinstance(a, int | float) and isinstance(b, int | float):
            self.number(where, a, b)
        else:
            self.mismatches.append(f"{where}: cannot compare {type(a).__name__}")

    @property
    def identical(self) -> bool:
        return not self.mismatches


def compare_logs(fast: EvalLog, naive: EvalLog) -> Differences:
    """Every field of every question, then the 12 sub-scores and model utility."""
    diff = Differences()
    for name in sorted(set(fast.sets) | set(naive.sets)):
        if name not in fast.sets or name not in naive.sets:
            diff.mismatches.append(f"{name}: set missing from one path")
            continue
        a, b = fast.sets[name], naive.sets[name]
        if a.keys != b.keys:
            diff.mismatches.append(f"{name}: {len(a.keys)} questions vs {len(b.keys)}")
            continue
        for key in sorted(set(a.fields) | set(b.fields)):
            if key not in a.fields or key not in b.fields:
                diff.mismatches.append(f"{name}/{key}: field missing from one path")
                continue
            if key == "truth_ratio":
                diff.values(f"{name}/log truth_ratio", _log(a.fields[key]), _log(b.fields[key]))
            elif key in SUMMED_LOSSES and SUMMED_LOSSES[key] in a.fields:
                counts = a.fields[SUMMED_LOSSES[key]]
                diff.values(
                    f"{name}/{key} per token",
                    _per_token(a.fields[key], counts),
                    _per_token(b.fields[key], counts),
                )
            else:
                diff.values(f"{name}/{key}", a.fields[key], b.fields[key])
    if set(SET_FILES) <= set(fast.sets) and set(SET_FILES) <= set(naive.sets):
        naive_scores = summarize(naive)
        for key, value in summarize(fast).items():
            diff.number(f"summary/{key}", value, naive_scores[key])
    return diff


def _log(values: list[Any]) -> list[Any]:
    return [math.log(v) if isinstance(v, int | float) and v > 0 else v for v in values]


def _per_token(sums: Any, counts: Any) -> Any:
    if isinstance(sums, list | tuple) and isinstance(counts, list | tuple):
        if len(sums) != len(counts):
            return sums  # the length mismatch is reported on the comparison
        return [_per_token(s, n) for s, n in zip(sums, counts, strict=True)]
    if isinstance(sums, int | float) and isinstance(counts, int) and counts > 0:
        return sums / counts
    return sums


def bench_evaluation(
    model: Any,
    tokenizer: Any,
    template: PromptTemplate,
    sets: Mapping[str, Sequence[QARecord]],
    *,
    max_new_tokens: int,
    batch_size: int | str,
    max_length: int = 512,
    profile: bool | None = None,
) -> dict[str, Any]:
    """Run both backends on the same model and sets (naive first, after one warm-up question) and
    report times, throughput, peak memory and how far apart their numbers are. Raises nothing on
    a mismatch: the caller decides (the CLI exits non-zero). `profile` (default: on a GPU) adds
    the fast path's profile per phase: model calls 3-10 of scoring and of generation."""
    records = [r for name in SET_FILES for r in sets.get(name, ())]
    if not records:
        raise DataError("no evaluation questions to time", "check --data and --split")
    # Warm-up outside the clock: first calls pay for lazy initialisation (kernels, the ROUGE
    # stemmer, the tokenizer's caches), which would be charged to whichever path ran first.
    evaluate_tofu(
        NaiveBackend(model, tokenizer), tokenizer, template, {"forget": records[:1]},
        max_new_tokens=min(max_new_tokens, 8), max_length=max_length,
    )  # fmt: skip
    naive_meter, fast_meter = Meter(), Meter()
    lifetime_rss = peak_rss_mib()  # loading (and training, for the built-in model) included
    per_path_rss = reset_peak_rss()
    reset_peak_memory()
    with naive_meter.attached(model):
        started = time.perf_counter()
        naive = evaluate_tofu(
            MeteredBackend(NaiveBackend(model, tokenizer), naive_meter), tokenizer, template,
            sets, max_new_tokens=max_new_tokens, max_length=max_length,
        )  # fmt: skip
        naive_seconds = time.perf_counter() - started
    naive_rss = peak_rss_mib()
    naive_gpu = peak_memory_mib()
    reset_peak_rss()
    reset_peak_memory()
    # The fast path as every evaluation builds it; the config only carries the batch size here.
    fast_backend = evaluation_backend(model, tokenizer, EvalConfig(batch_size=batch_size))
    device = next(model.parameters()).device
    if device.type == "cuda" if profile is None else profile:
        fast_meter.profilers = {
            phase: StepProfiler(device, skip=PROFILE_SKIP, steps=PROFILE_STEPS) for phase in PHASES
        }
    with fast_meter.attached(model):
        started = time.perf_counter()
        fast = evaluate_tofu(
            MeteredBackend(fast_backend, fast_meter), tokenizer, template, sets,
            max_new_tokens=max_new_tokens, max_length=max_length,
        )  # fmt: skip
        fast_seconds = time.perf_counter() - started
    fast_rss = peak_rss_mib()
    fast_gpu = peak_memory_mib()
    diff = compare_logs(fast, naive)
    n_params = sum(p.numel() for p in model.parameters())
    scored, generated = _answer_tokens(fast, tokenizer)
    parameter = next(model.parameters())
    peak = matmul_peak_flop_per_s(device=parameter.device, dtype=parameter.dtype)
    paths = {
        "fast": _path_report(
            fast_meter, fast_seconds, len(records), scored + generated, n_params, fast_rss
        ),
        "naive": _path_report(
            naive_meter, naive_seconds, len(records), scored + generated, n_params, naive_rss
        ),
    }
    if fast_meter.profilers:
        paths["fast"]["profile"] = {k: p.summary() for k, p in fast_meter.profilers.items()}
    return {
        "questions": len(records),
        "sets": {name: len(sets[name]) for name in SET_FILES if name in sets},
        "n_params": n_params,
        "batch_size": fast_backend.batch_size,  # with auto, the size that fit
        "max_new_tokens": max_new_tokens,
        "torch_threads": torch.get_num_threads(),
        "answer_tokens": {"scored": scored, "generated": generated},
        "speedup": _ratio(naive_seconds, fast_seconds),
        "scoring_speedup": _ratio(naive_meter.seconds["scoring"], fast_meter.seconds["scoring"]),
        "generation_speedup": _ratio(
            naive_meter.seconds["generation"], fast_meter.seconds["generation"]
        ),
        "paths": paths,
        # What the model's FLOP rate is measured against: this machine's large-matmul rate now,
        # with the same torch threads, in the weights' dtype (2 * n_params * padded tokens counts
        # the model's matmuls only, attention scores not included).
        "matmul_peak_flop_per_s": float(f"{peak:.4g}"),
        "matmul_peak_dtype": str(parameter.dtype).removeprefix("torch."),
        "fraction_of_peak": {
            name: round(path["flop_per_s"] / peak, 4) for name, path in paths.items()
        },
        "identical": diff.identical,
        "tolerance": TOLERANCE,
        "max_abs_diff": diff.max_abs,
        "max_abs_diff_at": diff.where,
        "mismatch_count": len(diff.mismatches),
        "mismatches": diff.mismatches[:20],  # the first ones
        # Each path's own peak when the kernel lets us reset the high-water mark (Linux), else
        # the process's peak so far (naive runs first).
        "peak_rss_per_path": per_path_rss,
        "peak_rss_mib": max(lifetime_rss, naive_rss, fast_rss),
        # On a GPU, each path's peak allocated GPU memory (None on the CPU).
        "peak_gpu_mib_per_path": {"fast": fast_gpu, "naive": naive_gpu},
        "device": str(next(model.parameters()).device),
        "scores": summarize(fast) if set(SET_FILES) <= set(fast.sets) else None,
    }


def _answer_tokens(log: EvalLog, tokenizer: Any) -> tuple[int, int]:
    scored = generated = 0
    for s in log.sets.values():
        scored += sum(s.fields["num_token_gt"]) + sum(s.fields["num_token_paraphrased"])
        scored += sum(sum(row) for row in s.fields["num_token_perturb"])
        for _, text, _ in s.fields["generated_text"]:
            generated += len(tokenizer(text, add_special_tokens=False)["input_ids"])
    return scored, generated


def _path_report(
    meter: Meter, seconds: float, questions: int, answer_tokens: int, n_params: int, rss: float
) -> dict[str, Any]:
    tokens = sum(meter.model_tokens.values())
    real_tokens = meter.real_tokens
    real = sum(real_tokens.values())
    return {
        "seconds": round(seconds, 3),
        "scoring_seconds": round(meter.seconds["scoring"], 3),
        "generation_seconds": round(meter.seconds["generation"], 3),
        "other_seconds": round(seconds - sum(meter.seconds.values()), 3),  # ROUGE, bookkeeping
        "questions_per_s": round(questions / seconds, 2),
        "answer_tokens_per_s": round(answer_tokens / seconds, 1),
        "model_tokens": {**meter.model_tokens, "total": tokens},
        # Positions the attention mask keeps (prompt, answer or generated token; not padding).
        "real_model_tokens": {**real_tokens, "total": real},
        "model_tokens_per_s": {
            "real": round(real / seconds, 1),
            "padded": round(tokens / seconds, 1),
        },
        "padding_share": {
            **{
                phase: round(1 - real_tokens[phase] / n, 4) if n else 0.0
                for phase, n in meter.model_tokens.items()
            },
            "total": round(1 - real / tokens, 4) if tokens else 0.0,
        },
        "vocab_projections": {**meter.projections, "total": sum(meter.projections.values())},
        "flop_per_s": float(f"{2 * n_params * tokens / seconds:.4g}"),
        "peak_rss_mib": rss,
    }


def _ratio(slow: float, fast: float) -> float | None:
    return round(slow / fast, 2) if fast > 0 else None
