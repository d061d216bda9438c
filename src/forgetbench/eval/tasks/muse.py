"""MUSE's evaluation of one model (Shi et al., 2024), as its `eval.py` runs it on a corpus folder:
VerbMem on the forget set, KnowMem on the forget and retain sets, and the membership inference
that PrivLeak is made of (the privleak forget set against its holdout set; every attack we have
plus the gradient-norm one). PrivLeak itself compares this model's Min-K% AUC with a retain
model's: `privleak_scores`.

Prompts are MUSE's raw text (its models are trained on raw documents, with no chat template), each
tokenised with the tokenizer's BOS as MUSE's code does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetbench.data.muse import load_knowmem, load_muse_texts, load_verbmem
from forgetbench.eval.requests import Generate, Request, Response
from forgetbench.eval.tasks.mia import MembershipTask, document_membership
from forgetbench.eval.tasks.task import TASKS, EvalSetup, TaskResult
from forgetbench.metrics import aggregate, muse
from forgetbench.metrics.muse import PRIVLEAK_ATTACK, privleak_scores
from forgetbench.records import QARecord

VERBMEM_MAX_NEW_TOKENS = 128  # MUSE's verbmem_max_new_tokens; the gt is cut to as many tokens
KNOWMEM_MAX_NEW_TOKENS = 32  # MUSE's knowmem_max_new_tokens
GRADNORM_P = 2.0  # open-unlearning's mia_gradnorm p
# The two KnowMem sets: the questions and their few-shot examples.
KNOWMEM = {"knowmem_f": ("forget_qa", "forget_qa_icl"), "knowmem_r": ("retain_qa", "retain_qa_icl")}
PREFIX = "muse"
__all__ = ["PRIVLEAK_ATTACK", "MuseTask", "muse_task", "privleak_scores"]


def cut_reference(tokenizer: Any, text: str, max_tokens: int = VERBMEM_MAX_NEW_TOKENS) -> str:
    """MUSE's verbmem reference: the first `max_tokens` of `text` tokenised with special tokens
    (so BOS counts as one of them where the tokenizer adds it), decoded without them."""
    ids = tokenizer(text, add_special_tokens=True)["input_ids"][:max_tokens]
    return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True)


def decoding_cleans_up(tokenizer: Any) -> bool:
    """Whether MUSE's `batch_decode(..., clean_up_tokenization_spaces=True)` rewrites text with
    this tokenizer beyond its default decoding: transformers applies the clean-up (" ." -> ".")
    only where the tokenizer's default does not already, and from version 5 not at all for BPE
    tokenizers. Asked of the tokenizer itself, on a text the clean-up changes."""
    ids = tokenizer("a . b", add_special_tokens=False)["input_ids"]
    cleaned = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True)
    return cleaned != tokenizer.decode(ids, skip_special_tokens=True)


def knowmem_prompt(examples: Sequence[QARecord], question: str) -> str:
    """MUSE's few-shot prompt: every in-context pair, then the question with an open answer."""
    shots = "".join(f"Question: {r.question}\nAnswer: {r.answer}\n\n" for r in examples)
    return shots + f"Question: {question}\nAnswer: "


class MuseTask:
    """Scores `muse/verbmem_f`, `muse/knowmem_f`, `muse/knowmem_r` (x100, as MUSE reports them)
    and `muse/mia/{attack}` (AUCs, members = privleak forget, non-members = privleak holdout),
    with per-item logs. `tokenizer` cuts the verbmem references and cleans generations up as
    MUSE's decoding does (`clean_up_tokenization_spaces=True`); the task never runs the model."""

    name = "muse"

    def __init__(
        self,
        folder: str | Path,
        *,
        tokenizer: Any,
        k: float = 0.4,
        gradnorm_p: float | None = GRADNORM_P,
    ) -> None:
        self.tokenizer = tokenizer
        self.cleans_up = decoding_cleans_up(tokenizer)
        verbmem = [(r, cut_reference(tokenizer, r.completion)) for r in load_verbmem(folder)]
        subsets: dict[str, list[Any]] = {"verbmem_f": verbmem}
        for name, (split, icl_split) in KNOWMEM.items():
            examples = load_knowmem(folder, icl_split)
            subsets[name] = [
                (r, knowmem_prompt(examples, r.question)) for r in load_knowmem(folder, split)
            ]
        self.membership: MembershipTask = document_membership(
            load_muse_texts(folder, "privleak", "forget"),
            load_muse_texts(folder, "privleak", "holdout"),
            k=k,
            prefix=f"{PREFIX}/mia",
            gradnorm_p=gradnorm_p,
        )
        subsets.update(self.membership.subsets)
        self.subsets = subsets

    def requests(self, subset: str, doc: Any) -> list[Request]:
        if subset == "verbmem_f":
            return [Generate(doc[0].prefix, VERBMEM_MAX_NEW_TOKENS)]
        if subset in KNOWMEM:
            return [Generate(doc[1], KNOWMEM_MAX_NEW_TOKENS)]
        return self.membership.requests(subset, doc)

    def process(self, subset: str, doc: Any, responses: Sequence[Response]) -> dict[str, Any]:
        if subset not in ("verbmem_f", *KNOWMEM):
            return self.membership.process(subset, doc, responses)
        (generation,) = responses
        assert isinstance(generation, str)
        # MUSE decodes with clean_up_tokenization_spaces=True, the backend with the tokenizer's
        # default; where the two differ, the clean-up is a rewrite of the decoded string.
        if self.cleans_up:
            generation = self.tokenizer.clean_up_tokenization(generation)
        if subset == "verbmem_f":
            record, reference = doc
            (value,) = muse.verbmem([generation], [reference])
            return {"prompt": record.prefix, "gt": reference, "generation": generation,
                    "rougeL_f1": float(value)}  # fmt: skip
        record, prompt = doc
        (value,) = muse.knowmem([generation], [record.answer])
        return {"question": record.question, "answer": record.answer,
                "generation": muse.cut_at_stop_strings(generation), "rougeL_f1": float(value)}  # fmt: skip

    def results(self, rows: Mapping[str, list[dict[str, Any]]]) -> TaskResult:
        scores: dict[str, Any] = {}
        logs: dict[str, Any] = {}
        for subset in ("verbmem_f", *KNOWMEM):
            logs[subset] = rows[subset]
            values = [row["rougeL_f1"] for row in rows[subset]]
            scores[f"{PREFIX}/{subset}"] = aggregate(f"{PREFIX}/{subset}", values)
        membership = self.membership.results(rows)
        scores.update(membership.scores)
        logs["privleak"] = membership.items
        return TaskResult(scores, items=logs)


@TASKS.register("muse")
def muse_task(setup: EvalSetup) -> MuseTask | None:
    """A MUSE corpus folder (`--benchmark muse`)."""
    if setup.benchmark != "muse":
        return None
    return MuseTask(setup.root, tokenizer=setup.tokenizer, k=setup.eval_config.mia_k)
