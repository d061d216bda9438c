"""The data-transformation formats (Joshi et al., 2024) scored for one model: multiple choice by
the next-token probability of the option letters offered, cloze by the length-normalised
probability of the masked span, open formats by ROUGE-L recall of the greedy answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from forgetbench.benchmarks.mini.formats import MC_FORMATS, SIDES
from forgetbench.benchmarks.mini.read import load_format
from forgetbench.config_names import FORMATS
from forgetbench.eval.requests import UNSET_SCORED_LENGTH, Generate, Request, Response, Score
from forgetbench.eval.tasks.task import TASKS, EvalSetup, TaskResult
from forgetbench.metrics import aggregate
from forgetbench.metrics.formats import LETTERS, cloze_probability, mc_success
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import ClozeRecord, MCRecord, QARecord

FormatRecord = MCRecord | ClozeRecord | QARecord
# Per kind of format: the metric its items are aggregated by, and the log field holding the value.
_METRIC = {
    "multiple_choice": ("format_mc_success", "success"),
    "cloze": ("cloze_probability", "probability"),
    "open": ("format_rougeL", "rougeL"),
}


def _kind(subset: str) -> str:
    name = subset.split("/")[0]
    if name in MC_FORMATS:
        return "multiple_choice"
    return "cloze" if name == "cloze" else "open"


def _mc_prompt(record: MCRecord, template: PromptTemplate, tokenizer: Any) -> str:
    # The miniature writes its multiple-choice prompts in the question_answer format already
    # ("Question: ...\nA. ...\nAnswer:"); other templates wrap the whole block as the question.
    if template.name == "question_answer":
        return record.prompt
    return template.prompt(record.prompt.removesuffix("Answer:").rstrip(), tokenizer)


class FormatsTask:
    """Subsets `{format}/{forget|retain}`; scores `formats/{format}/{side}` and per-item logs.

    Multiple choice: log p of each offered letter as the template's answer (" A", " B", ...: the
    letter after the prompt's "Answer:"), the chosen index and success. The whole continuation is
    scored: where a tokenizer splits " A" into a space and the letter, the first token alone would
    be the same for every option.

    Cloze: P(span | question, answer prefix)^(1/n), n = the span's tokens. The text is the
    training text (prompt, then the answer = prefix + span, tokenised as one); the prompt is cut
    after the prefix's last word, so the scored tokens are exactly the span's with its separating
    space (a token spanning prefix and span is a one-line error)."""

    name = "formats"

    def __init__(
        self,
        subsets: Mapping[str, Sequence[FormatRecord]],
        template: PromptTemplate,
        tokenizer: Any,
        *,
        max_new_tokens: int,
        max_length: int = UNSET_SCORED_LENGTH,
    ) -> None:
        self.subsets = {name: list(records) for name, records in subsets.items()}
        self.template = template
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.max_length = max_length

    def requests(self, subset: str, doc: Any) -> list[Request]:
        kind = _kind(subset)
        if kind == "multiple_choice":
            letters = LETTERS[: len(doc.options)]
            answers = tuple(self.template.answer(letter) for letter in letters)
            prompt = _mc_prompt(doc, self.template, self.tokenizer)
            return [Score(prompt, answers, add_eos=False, max_length=self.max_length)]
        if kind == "cloze":
            tail = doc.prefix[len(doc.prefix.rstrip()) :] + doc.span  # the span with its space
            answer = self.template.answer(doc.prefix + doc.span)
            cut = len(answer) - len(tail)
            prompt = self.template.prompt(doc.question, self.tokenizer) + answer[:cut]
            return [Score(prompt, (answer[cut:],), add_eos=False, max_length=self.max_length)]
        return [Generate(self.template.prompt(doc.question, self.tokenizer), self.max_new_tokens)]

    def process(self, subset: str, doc: Any, responses: Sequence[Response]) -> dict[str, Any]:
        kind = _kind(subset)
        (response,) = responses
        if kind == "multiple_choice":
            assert isinstance(response, tuple)
            letters = LETTERS[: len(doc.options)]
            logps = {letter: s.logprob_sum for letter, s in zip(letters, response, strict=True)}
            (success,) = mc_success([logps], [doc.label])
            return {"letter_logprobs": logps, "label": doc.label, "success": float(success)}
        if kind == "cloze":
            assert isinstance(response, tuple)
            span = response[0].token_logps
            (prob,) = cloze_probability(np.array([span.sum()]), np.array([span.shape[0]]))
            return {"span": doc.span, "probability": float(prob), "tokens": int(span.shape[0])}
        assert isinstance(response, str)
        rouge = rouge_recall([response], [doc.answer])["rougeL_recall"][0]
        return {"generation": response, "answer": doc.answer, "rougeL": float(rouge)}

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        scores = {}
        for subset, items in rows.items():
            metric, field = _METRIC[_kind(subset)]
            scores[f"formats/{subset}"] = aggregate(metric, [item[field] for item in items])
        return TaskResult(scores, items=dict(rows))


@TASKS.register("formats")
def formats_task(setup: EvalSetup) -> FormatsTask | None:
    """Every format file of a folder in the miniature's layout (`formats/{format}_{side}.jsonl`);
    absent files are skipped, so the published format datasets converted to that layout are read
    the same way."""
    folder = setup.root / "formats"
    if not setup.tofu_layout or not setup.eval_config.formats or not folder.is_dir():
        return None
    subsets = {
        f"{name}/{side}": load_format(setup.root, name, side)
        for name in FORMATS
        for side in SIDES
        if (folder / f"{name}_{side}.jsonl").is_file()
    }
    return FormatsTask(
        subsets, setup.template, setup.tokenizer, max_new_tokens=setup.eval_config.max_new_tokens,
        max_length=setup.eval_config.max_length or UNSET_SCORED_LENGTH,
    )  # fmt: skip
