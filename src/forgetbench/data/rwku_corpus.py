"""What one RWKU unlearning run trains on: which targets (one, or a batch), and their forget
corpus as the unlearning engine's records.

RWKU gives no forget corpus of its own but, per model, texts that model wrote about each target
(docs/rwku.md): `positive` (its biographies: what GA and NPO ascend on, as plain language
modelling), `pair` (a made-up biography preferred to its own: DPO), `reject` (questions it
wrote, each with a refusal: rejection tuning) and `passage` (the original passages, RWKU's
GA-on-passages variant). Here they become the records the engine takes: `TextRecord`s,
`PreferenceRecord`s (the rejected text forgotten, the chosen one in the refusal's place) and
`QARecord`s (a question, its refusal). A batch run trains on its targets' corpora one after the
other, as RWKU's `Batch/1-10` files hold targets 1 to 10.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from forgetbench.data.rwku import Target, find_target, load_rwku, load_targets
from forgetbench.errors import ConfigError, DataError, UnknownNameError
from forgetbench.records import QARecord

# Which corpus a method trains on in RWKU's scripts (run_{ga,npo,dpo,rt}.sh; run_ga_passage.sh).
CORPORA = ("positive", "pair", "reject", "passage")
# The model that wrote the corpus: RWKU's files for Llama-3-8B-Instruct and Phi-3-mini.
CORPUS_MODELS = {"llama3": "", "phi3": "_phi"}
_RANGE = re.compile(r"(\d+)-(\d+)")


def select_targets(source: Any, chosen: Sequence[str] | None = None) -> list[Target]:
    """The targets `chosen` names, in the order named (each once): a name ("Stephen King"), a
    folder ("1_Stephen_King"), a 1-based number ("1") or a range of numbers, both ends included
    ("1-10", as RWKU's Batch folders are named). None = every target, in RWKU's order."""
    every = load_targets(source)
    if chosen is None:
        return every
    by_number = {t.number: t for t in every}
    picked: list[Target] = []
    for entry in chosen:
        text = str(entry).strip()
        span = _RANGE.fullmatch(text)
        if span or text.isdigit():
            low, high = (int(span.group(1)), int(span.group(2))) if span else (int(text),) * 2
            missing = [n for n in range(low, high + 1) if n not in by_number]
            if low > high or missing:
                raise ConfigError(
                    f"rwku.targets: '{text}' is not a range of target numbers of {source} "
                    f"(it has 1..{len(every)})",
                    "name targets by name, folder, number or a range a-b with a <= b",
                )
            found = [by_number[n] for n in range(low, high + 1)]
        else:
            try:
                found = [find_target(source, text)]
            except UnknownNameError as exc:
                raise ConfigError(f"rwku.targets: {exc.what}", exc.hint) from None
        picked += [t for t in found if t not in picked]
    return picked


def target_runs(targets: Sequence[Target], *, batch: bool) -> list[list[Target]]:
    """The unlearning runs over `targets`: one per target (single-target, the paper's main
    setting, averaged over targets) or one over them all (`batch`, RWKU's batch-target
    setting)."""
    return [list(targets)] if batch else [[t] for t in targets]


def method_corpus(required_inputs: frozenset[str]) -> str:
    """The corpus a method trains on, from the inputs it reads (`required_inputs()`), as RWKU's
    scripts pair them: one that prefers an answer to the forget text (DPO) the pairs, one that
    trains toward a refusal alone (rejection tuning, idk) the questions with refusals, any other
    (GA, NPO, ...) the positive texts."""
    refusal = "refusal_logps" in required_inputs
    if refusal and "forget_logps" in required_inputs:
        return "pair"
    return "reject" if refusal else "positive"


def forget_corpus(
    source: Any, targets: Sequence[Target], corpus: str, *, model: str = "llama3"
) -> list[Any]:
    """The forget records of `targets` in `source`, one target's after another's (each found
    there by its name): `corpus` is one of
    `CORPORA`, `model` the model whose files they are (`CORPUS_MODELS`; `passage` is every
    model's)."""
    if corpus not in CORPORA:
        raise UnknownNameError("RWKU forget corpus", corpus, CORPORA)
    if model not in CORPUS_MODELS:
        raise UnknownNameError("RWKU corpus model", model, CORPUS_MODELS)
    stem = corpus if corpus == "passage" else corpus + CORPUS_MODELS[model]
    # By name in `source`: a target chosen from RWKU's files also names its generated corpus.
    return [record for t in targets for record in load_rwku(source, t.name, stem)]


def require_corpus(targets: Sequence[Target], model: str) -> None:
    """Every target's folder holds the forget corpora `model` wrote (RWKU writes each model's
    four files together: `positive`, `negative`, `pair`, `reject`, with `_phi` for Phi-3's), or
    one DataError naming the targets without them. Targets read from the Hub are not checked
    here: the Hub holds both models' corpora."""
    if model not in CORPUS_MODELS:
        raise UnknownNameError("RWKU corpus model", model, CORPUS_MODELS)
    names = [f"{c}{CORPUS_MODELS[model]}.json" for c in ("positive", "negative", "pair", "reject")]
    lacking = [
        t.folder.name
        for t in targets
        if t.folder is not None and not all((t.folder / n).is_file() for n in names)
    ]
    if lacking:
        folder = next(t.folder for t in targets if t.folder is not None).parent  # type: ignore[union-attr]
        raise DataError(
            f"rwku.corpus_model={model} reads {', '.join(names)} in each target's folder, and "
            f"{', '.join(lacking)} in {folder} lack them",
            f"write them with RWKU's process/data_process.py, or choose another rwku.corpus_model "
            f"(one of {', '.join(CORPUS_MODELS)})",
        )


def corpus_refusals(records: Sequence[QARecord]) -> tuple[str, ...]:
    """The distinct refusals of a `reject` corpus in the order they first come: the refusals
    rejection tuning (method idk) draws from, RWKU's own list as its generation script used it."""
    return tuple(dict.fromkeys(r.answer for r in records))


# A batch run's forget set is named by its targets' numbers, as RWKU's `Batch/1-10` folders are.
BATCH_PREFIX = "batch_"
# A batch's per-target score: "{target folder}{TARGET_SEP}{key}" (eval/tasks/rwku.py's
# `RwkuBatchTask`).
TARGET_SEP = ":"


def batch_split(targets: Sequence[Target]) -> str:
    """The name of the forget set of one run over `targets` (`rwku.batch`): their numbers, runs
    of consecutive numbers as a range ("batch_1-10", "batch_2,5-6")."""
    numbers = sorted({t.number for t in targets})
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return BATCH_PREFIX + ",".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def split_targets(source: Any, split: str) -> list[Target]:
    """The targets a forget set names: a batch's (`batch_split`), or the one target it is (its
    name or folder)."""
    if split.startswith(BATCH_PREFIX):
        return select_targets(source, split.removeprefix(BATCH_PREFIX).split(","))
    return [find_target(source, split)]
