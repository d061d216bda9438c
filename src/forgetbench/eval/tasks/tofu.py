"""TOFU's evaluation (Maini et al., 2024): per question of its four sets, the answer, paraphrase and
perturbed answers scored given the question and one greedy answer, logged in TOFU's own layout (so
its tooling and `forgetbench compare` read it). Scores: TOFU's 12 sub-scores and model utility,
the background multiple-choice accuracy, and memorisation of the forget answers, all from that one
teacher-forced pass."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from forgetbench.data.logs import SET_FILES, EvalLog, SetLog
from forgetbench.data.tofu import tofu_eval_sets
from forgetbench.errors import DataError
from forgetbench.eval.backend import Backend
from forgetbench.eval.outputs import AnswerScore
from forgetbench.eval.requests import Generate, Request, Response, Score
from forgetbench.eval.summary import summarize
from forgetbench.eval.tasks.task import TASKS, EvalSetup, TaskResult, run_task
from forgetbench.metrics import aggregate
from forgetbench.metrics.memorisation import exact_memorisation, extraction_strength
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.metrics.tofu import TruthRatioForm
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import QARecord


def _paraphrase(record: QARecord) -> str:
    # TOFU scores the answer itself where a set has no paraphrase (Real Authors, World Facts).
    return record.paraphrased_answer if record.paraphrased_answer is not None else record.answer


def _candidates(record: QARecord) -> list[str]:
    """The distinct answers scored for one question, each once."""
    return list(dict.fromkeys([record.answer, _paraphrase(record), *record.perturbed_answers]))


class TofuTask:
    name = "tofu"
    set_names: tuple[str, ...] = tuple(SET_FILES)  # its subsets, in this order

    def __init__(
        self,
        sets: Mapping[str, Sequence[QARecord]],
        template: PromptTemplate,
        tokenizer: Any,
        *,
        max_new_tokens: int,
        max_length: int = 512,
        form: TruthRatioForm = "tofu_code",
    ) -> None:
        """`sets` by TOFU set name (`SET_FILES`); any subset of the four, though the scores need
        all four (a partial evaluation gives the log alone)."""
        for name, records in sets.items():
            widths = {len(r.perturbed_answers) for r in records}
            if len(widths) != 1 or 0 in widths:
                raise DataError(
                    f"{name} set: every question needs the same, non-zero number of perturbed answers (found {sorted(widths)})"
                )
        self.subsets = {name: list(sets[name]) for name in self.set_names if name in sets}
        self.template = template
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.max_length = max_length
        self.form = form

    def _prompt(self, record: QARecord) -> str:
        return self.template.prompt(record.question, self.tokenizer)

    def requests(self, subset: str, doc: QARecord) -> list[Request]:
        prompt = self._prompt(doc)
        answers = tuple(self.template.answer(c) for c in _candidates(doc))
        return [
            Score(prompt, answers, max_length=self.max_length),
            Generate(prompt, self.max_new_tokens),
        ]

    def process(self, subset: str, doc: QARecord, responses: Sequence[Response]) -> dict[str, Any]:
        scored, generation = responses
        assert isinstance(scored, tuple) and isinstance(generation, str)
        score = dict(zip(_candidates(doc), scored, strict=True))
        rouge = rouge_recall([generation], [doc.answer])
        return question_row(
            self._prompt(doc), generation, doc.answer,
            score[doc.answer], score[_paraphrase(doc)], [score[a] for a in doc.perturbed_answers],
            rouge1=float(rouge["rouge1_recall"][0]), rougeL=float(rouge["rougeL_recall"][0]),
        )  # fmt: skip

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        sets = {}
        for name, set_rows in rows.items():
            fields = (
                {key: [row[key] for row in set_rows] for key in set_rows[0]} if set_rows else {}
            )
            sets[name] = SetLog(name, tuple(str(i) for i in range(len(set_rows))), fields)
        log = EvalLog("forgetbench", sets)
        if not set(SET_FILES) <= set(log.sets):
            return TaskResult({}, eval_log=log)
        return TaskResult(tofu_scores(log, form=self.form), eval_log=log)


def evaluate_tofu(
    backend: Backend,
    tokenizer: Any,
    template: PromptTemplate,
    sets: Mapping[str, Sequence[QARecord]],
    *,
    max_new_tokens: int,
    max_length: int,
) -> EvalLog:
    """The TOFU log of `sets` (any of the four), its requests answered by `backend`."""
    task = TofuTask(sets, template, tokenizer, max_new_tokens=max_new_tokens, max_length=max_length)
    log = run_task(task, backend).eval_log
    assert log is not None
    return log


def question_row(
    prompt: str,
    generation: str,
    answer: str,
    gt: AnswerScore,
    para: AnswerScore,
    pert: Sequence[AnswerScore],
    *,
    rouge1: float,
    rougeL: float,
) -> dict[str, Any]:
    """One question's fields in TOFU's log layout."""
    perturb = [s.mean_loss for s in pert]
    return {
        "avg_gt_loss": gt.mean_loss,
        "gt_loss": -gt.logprob_sum,
        "num_token_gt": gt.tokens,
        "avg_paraphrased_loss": para.mean_loss,
        "paraphrased_loss": -para.logprob_sum,
        "num_token_paraphrased": para.tokens,
        "average_perturb_loss": perturb,
        "perturb_loss": [-s.logprob_sum for s in pert],
        "num_token_perturb": [s.tokens for s in pert],
        "rouge1_recall": rouge1,
        "rougeL_recall": rougeL,
        # TOFU's layout: [prompt, generation, ground truth].
        "generated_text": [prompt, generation, answer],
        # Not TOFU fields; they make memorisation metrics recomputable from the log.
        "gt_argmax_matches": gt.argmax_matches.astype(int).tolist(),
        # TOFU stores the truth ratio perturbed-over-paraphrase: exp(loss(para) - mean_j loss(pert_j)).
        "truth_ratio": math.exp(para.mean_loss - sum(perturb) / len(perturb)),
    }


def tofu_scores(log: EvalLog, *, form: TruthRatioForm) -> dict[str, float]:
    """TOFU's summary (`summarize`), background accuracy and memorisation of one whole log."""
    scores = summarize(log, form=form)
    scores["utility/mc_accuracy"] = background_mc_accuracy(log)
    forget = log.require("forget", purpose="memorisation")
    scores.update(memorisation_scores(forget.fields["gt_argmax_matches"]))
    return scores


def background_mc_accuracy(log: EvalLog) -> float:
    """Utility as multiple-choice accuracy on the background-knowledge sets: a question counts
    when its true answer is more likely (per token) than every perturbed one. The offline
    stand-in for MMLU accuracy in LUME's final score."""
    hits = []
    for name in ("real_authors", "world_facts"):
        s = log.require(name, purpose="background accuracy")
        hits += list(s.gt_loss < s.perturbed_loss.min(axis=1))
    return float(np.mean(hits))


def memorisation_scores(matches: Sequence[Sequence[int] | np.ndarray]) -> dict[str, float]:
    """Mean exact memorisation and extraction strength over answers (teacher-forced argmax
    matches, as stored in our TOFU logs' `gt_argmax_matches`, which end with the EOS label).
    The final label is left out, as open-unlearning's `tokenwise_vocab_logprobs` does: whether a
    model stops after the answer is not memorisation of the answer."""
    arrays = [np.asarray(m, dtype=bool)[:-1] for m in matches]
    return {
        "exact_memorisation": aggregate("exact_memorisation", exact_memorisation(arrays)),
        "extraction_strength": aggregate("extraction_strength", extraction_strength(arrays)),
    }


@TASKS.register("tofu")
def tofu_task(setup: EvalSetup) -> TofuTask | None:
    if not setup.tofu_layout:
        return None
    sets = tofu_eval_sets(setup.tofu, setup.split, max_questions=setup.eval_config.max_questions)
    return TofuTask(
        sets, setup.template, setup.tokenizer,
        max_new_tokens=setup.eval_config.max_new_tokens, max_length=setup.max_length,
        form=setup.eval_config.truth_ratio_form,
    )  # fmt: skip
