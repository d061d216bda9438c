"""Per-question evaluation logs in the TOFU layout (read theirs, write ours in the same shape).

TOFU's `eval_log_aggregated.json` maps four file names to per-question tables:
`{"eval_log_forget.json": {"avg_gt_loss": {"0": 0.01, ...}, "average_perturb_loss": {"0": [..5..]},
...}, ...}`. Losses are per-token means over answer tokens (`avg_*`) or sums (`gt_loss`, ...).
forgetbench writes exactly this layout (plus fields of its own), so TOFU tooling reads our logs.
"""

from __future__ import annotations

import math
import os
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from forgetbench.data.log_layout import FIELD_RANGES, REQUIRED_FIELDS, SET_FILES, check_number
from forgetbench.data.open_unlearning import (
    OPEN_UNLEARNING_NAME,
    is_open_unlearning,
    set_metrics,
    to_tofu_layout,
)
from forgetbench.errors import DataError
from forgetbench.io import atomic_write_json, read_json, shorten

AGGREGATED_NAME = "eval_log_aggregated.json"


@dataclass(frozen=True)
class SetLog:
    """One evaluation set: every per-question field, in question order (keys "0", "1", ...)."""

    name: str
    keys: tuple[str, ...]
    fields: dict[str, list[Any]] = field(repr=False)

    def __len__(self) -> int:
        return len(self.keys)

    def column(self, name: str) -> np.ndarray:
        return np.asarray(self.fields[name], dtype=np.float64)

    @property
    def gt_loss(self) -> np.ndarray:  # (N,) mean NLL per answer token
        return self.column("avg_gt_loss")

    @property
    def paraphrased_loss(self) -> np.ndarray:  # (N,)
        return self.column("avg_paraphrased_loss")

    @property
    def perturbed_loss(self) -> np.ndarray:  # (N, K) one column per perturbed answer
        return self.column("average_perturb_loss")

    @property
    def rougeL_recall(self) -> np.ndarray:  # (N,)
        return self.column("rougeL_recall")

    def ground_truths(self) -> list[str] | None:
        """The reference answers, when the log kept `generated_text`.

        TOFU's evaluation writes `zip(input_string, gen_output, gt)`, i.e. [prompt, generation,
        ground truth] (visible in its published logs: index 1 of a retain model's forget log is
        its own wrong answer, index 2 the true one)."""
        texts = self.fields.get("generated_text")
        if texts is None:
            return None
        return [t[2] if isinstance(t, list) and len(t) >= 3 else "" for t in texts]

    def texts(self) -> list[tuple[str, str]] | None:
        """(prompt, ground truth) per question from `generated_text`, or None when the log did not
        keep it (or kept it in another shape)."""
        texts = self.fields.get("generated_text")
        if texts is None or not all(
            isinstance(t, list) and len(t) >= 3 and isinstance(t[0], str) and isinstance(t[2], str)
            for t in texts
        ):
            return None
        return [(t[0], t[2]) for t in texts]


@dataclass(frozen=True)
class EvalLog:
    source: str
    sets: dict[str, SetLog]
    layout: str = "tofu"  # or "open-unlearning" (a TOFU_EVAL.json), for error messages

    def require(self, name: str, *, purpose: str) -> SetLog:
        if name not in self.sets:
            if self.layout == "open-unlearning":
                missing = f"no {' / '.join(set_metrics(name))}"
            else:
                missing = f"no '{SET_FILES[name]}' section"
            raise DataError(
                f"{self.source} has {missing} ({name} set)",
                f"{purpose} needs it; evaluate that set or pass a complete log",
            )
        return self.sets[name]


def read_eval_log(path: str | Path) -> EvalLog:
    """A TOFU-layout log: an aggregated JSON file, or a folder holding it or the four set files;
    or open-unlearning's `TOFU_EVAL.json` (file or folder), read into the same layout."""
    path = Path(path)
    if path.is_dir():
        aggregated = path / AGGREGATED_NAME
        if aggregated.is_file():
            return _parse(read_json(aggregated, what="TOFU evaluation log"), str(aggregated))
        found = {n: path / f for n, f in SET_FILES.items() if (path / f).is_file()}
        if not found and (path / OPEN_UNLEARNING_NAME).is_file():
            return read_eval_log(path / OPEN_UNLEARNING_NAME)
        if not found:
            raise DataError(
                f"no evaluation log in {path}",
                f"expected {AGGREGATED_NAME}, the files {', '.join(SET_FILES.values())} "
                f"or open-unlearning's {OPEN_UNLEARNING_NAME}",
            )
        sets = {
            n: _parse_set(read_json(f, what="TOFU evaluation log"), n, str(f))
            for n, f in found.items()
        }
        return EvalLog(str(path), sets)
    if not path.exists():
        raise DataError(f"evaluation log '{path}' does not exist", "check the path")
    data = read_json(path, what="TOFU evaluation log")
    if isinstance(data, dict) and set(data) & set(REQUIRED_FIELDS):
        name = next((n for n, f in SET_FILES.items() if f == path.name), None)
        if name is None:
            raise DataError(
                f"{path} is a single-set log but its name does not say which set",
                f"name it one of {', '.join(SET_FILES.values())}",
            )
        return EvalLog(str(path), {name: _parse_set(data, name, str(path))})
    if is_open_unlearning(data):
        sets = _parse(to_tofu_layout(data, str(path)), str(path)).sets
        return EvalLog(str(path), sets, layout="open-unlearning")
    return _parse(data, str(path))


def write_eval_log(path: str | Path, log: EvalLog | Mapping[str, SetLog]) -> Path:
    """Write the aggregated TOFU layout atomically."""
    sets = log.sets if isinstance(log, EvalLog) else log
    payload = {
        SET_FILES[name]: {
            key: dict(zip(s.keys, values, strict=True)) for key, values in s.fields.items()
        }
        for name, s in sets.items()
    }
    return atomic_write_json(path, payload)


@dataclass(frozen=True)
class QuestionMatch:
    """Where each reference question sits in the candidate's log of the same set."""

    indices: np.ndarray  # (M,) int, a candidate position per reference question, in its order
    by: str  # "question text", or "position" when a log kept no text (then M == N)


def match_questions(reference: EvalLog, candidate: EvalLog, name: str) -> QuestionMatch:
    """Find every question of the reference's `name` set in the candidate's; refuse a reference
    question the candidate lacks, and any question held twice.

    A question is identified by its ground-truth answer and its question text, both normalised
    (`_normal`). The answer is the dataset's own string in every log, whatever the model. The
    question is read from the prompt, whose template differs by model family (Llama-2
    `[INST] q [/INST]`, Phi `Question: q\\n`, a chat template with a system prompt, ...): the
    template is the text every prompt of the reference's set shares at its start and end, so the
    rest (`_question_cores`) is the question itself, or slightly less when all questions also share
    their first or last characters (a final "?"). A reference question matches the candidate
    question with the same answer whose prompt contains that text."""
    ref, cand = (
        reference.require(name, purpose="the KS test"),
        candidate.require(name, purpose="the KS test"),
    )
    ref_texts, cand_texts = ref.texts(), cand.texts()
    hint = (
        "the candidate must hold every reference question: compare logs of the same split, "
        "evaluate the candidate on at least the reference's questions (eval.max_questions), "
        "or (forgetbench compare) pass --allow-question-mismatch"
    )
    if ref_texts is None or cand_texts is None:
        if len(ref) == len(cand):  # nothing to match by: the same questions in the same order
            return QuestionMatch(np.arange(len(cand)), "position")
        which = reference.source if ref_texts is None else candidate.source
        raise DataError(
            f"cannot match the {len(ref)} {name}-set questions of {reference.source} to the "
            f"{len(cand)} of {candidate.source}: {which} keeps no generated_text",
            hint,
        )
    cores = _question_cores([_normal(prompt) for prompt, _ in ref_texts])
    # Messages show each prompt from the last line its template starts with (past a chat
    # template's system prompt).
    shown = os.path.commonprefix([prompt for prompt, _ in ref_texts]).rfind("\n") + 1
    by_answer: dict[str, list[int]] = {}
    for j, (_, answer) in enumerate(cand_texts):
        by_answer.setdefault(_normal(answer), []).append(j)
    cand_prompts = [_normal(prompt) for prompt, _ in cand_texts]
    indices: list[int] = []
    taken: dict[int, int] = {}  # candidate position -> reference position
    for i, ((prompt, answer), core) in enumerate(zip(ref_texts, cores, strict=True)):
        hits = [j for j in by_answer.get(_normal(answer), []) if core in cand_prompts[j]]
        where = f"the {name} set of {reference.source}"
        if not hits:
            raise DataError(
                f"{where} has a question {candidate.source} lacks "
                f"(question {ref.keys[i]}: {_short(prompt[shown:])})",
                hint,
            )
        if len(hits) > 1:
            raise DataError(
                f"the {name} set of {candidate.source} holds the reference's question "
                f"{ref.keys[i]} ({_short(prompt[shown:])}) more than once (questions "
                f"{', '.join(cand.keys[j] for j in hits)})",
                "a log must hold each question once; compare logs written by one evaluation",
            )
        if hits[0] in taken:
            raise DataError(
                f"{where} holds one question twice (questions {ref.keys[taken[hits[0]]]} and "
                f"{ref.keys[i]}: {_short(prompt[shown:])})",
                "a log must hold each question once; compare logs written by one evaluation",
            )
        taken[hits[0]] = i
        indices.append(hits[0])
    return QuestionMatch(np.asarray(indices, dtype=np.int64), "question text")


def _normal(text: str) -> str:
    """Logs hold text decoded by each model's tokenizer, which re-spaces punctuation (Llama-2
    writes "Mammadov ," where Phi writes "Mammadov,") and may normalise Unicode: compare NFKC
    text without whitespace."""
    return "".join(unicodedata.normalize("NFKC", text).split())


def _question_cores(prompts: Sequence[str]) -> list[str]:
    """Each prompt without the prefix and suffix all of them share (the template). With one
    prompt that is everything: the empty core, so the answer alone decides."""
    prefix = len(os.path.commonprefix(list(prompts)))
    rests = [p[prefix:] for p in prompts]
    suffix = len(os.path.commonprefix([r[::-1] for r in rests]))
    return [r[: len(r) - suffix] for r in rests]


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def _parse(data: Any, source: str) -> EvalLog:
    if not isinstance(data, dict):
        raise DataError(f"{source}: expected a JSON object keyed by eval file name")
    unknown = [k for k in data if k not in SET_FILES.values()]
    sets = {
        name: _parse_set(data[file], name, source)
        for name, file in SET_FILES.items()
        if file in data
    }
    if not sets:
        raise DataError(
            f"{source} has none of the TOFU evaluation sections",
            f"expected keys {', '.join(SET_FILES.values())}; found {', '.join(shorten(k, 40) for k in unknown[:5]) or 'none'}",
        )
    return EvalLog(source, sets)


def _parse_set(table: Any, name: str, source: str) -> SetLog:
    section = f"{source} [{SET_FILES[name]}]"
    if not isinstance(table, dict):
        raise DataError(f"{section}: expected an object of per-question fields")
    for required in REQUIRED_FIELDS:
        if required not in table:
            raise DataError(
                f"{section}: missing field '{required}'",
                "a TOFU log needs per-question " + ", ".join(REQUIRED_FIELDS),
            )
    keys = _keys(table[REQUIRED_FIELDS[0]], f"{section} '{REQUIRED_FIELDS[0]}'")
    fields: dict[str, list[Any]] = {}
    for key, per_question in table.items():
        where = f"{section} '{key}'"
        if not isinstance(per_question, dict):
            raise DataError(f"{where}: expected an object keyed by question index")
        if set(per_question) != set(keys):
            raise DataError(f"{where}: its question indices differ from '{REQUIRED_FIELDS[0]}'")
        fields[key] = [per_question[k] for k in keys]
    # rouge1_recall is optional; TOFU's own logs carry a truth ratio per question, which
    # forgetbench recomputes from the losses, but a log holding an impossible one is not to trust.
    scalars = (
        "avg_gt_loss",
        "avg_paraphrased_loss",
        "rougeL_recall",
        "rouge1_recall",
        "truth_ratio",
    )
    for key in (key for key in scalars if key in fields):
        for k, value in zip(keys, fields[key], strict=True):
            if value is not None or key != "truth_ratio":
                _check_number(value, f"{section} '{key}' question {k}", FIELD_RANGES[key])
    widths = set()
    for k, value in zip(keys, fields["average_perturb_loss"], strict=True):
        where = f"{section} 'average_perturb_loss' question {k}"
        if not isinstance(value, list) or not value:
            raise DataError(f"{where}: expected a non-empty list of losses")
        for v in value:
            _check_number(v, where, FIELD_RANGES["average_perturb_loss"])
        widths.add(len(value))
    if len(widths) > 1:
        raise DataError(
            f"{section} 'average_perturb_loss': questions have different numbers of perturbed answers {sorted(widths)}"
        )
    return SetLog(name, keys, fields)


def _keys(per_question: Any, where: str) -> tuple[str, ...]:
    if not isinstance(per_question, dict) or not per_question:
        raise DataError(f"{where}: expected a non-empty object keyed by question index")
    try:
        return tuple(sorted(per_question, key=int))
    except ValueError:
        raise DataError(f'{where}: question indices must be integers like "0", "1"') from None


def _check_number(
    value: Any, where: str, valid: tuple[float, float, str] = (-math.inf, math.inf, "")
) -> None:
    check_number(
        value, where, valid,
        nonfinite="the evaluation produced a non-finite loss; re-run it",
        rerun="the log is damaged or not a TOFU evaluation log; re-run the evaluation",
    )  # fmt: skip
