"""Typed records: what every loader returns. Nothing past a loader handles a loose dict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Labels at prompt and padding positions of a tokenised record; losses and metrics skip them. Here,
# below both, so the methods' loss terms need not import the model loader (which imports config).
IGNORE_INDEX = -100


@dataclass(frozen=True)
class QARecord:
    """One TOFU-style question.

    `paraphrased_answer` is None where the source has none (Real Authors / World Facts: TOFU
    scores the answer itself in its place). `perturbed_answers` holds the wrong answers used by
    the truth ratio (5 for TOFU authors, 3 for Real Authors / World Facts, 0 for plain splits).
    """

    question: str
    answer: str
    paraphrased_answer: str | None = None
    perturbed_answers: tuple[str, ...] = ()
    entity: str | None = None
    split: str = ""
    index: int = 0


@dataclass(frozen=True)
class TextRecord:
    """A chunk of a document (MUSE's and WMDP's forget and retain corpora): trained on as plain
    language modelling, every token a label and no prompt, no template and no EOS, as the
    reference code trains on its token chunks (`forgetbench.data.chunks`)."""

    text: str


@dataclass(frozen=True)
class PromptRecord:
    """A training text already laid out by its format: `prompt` (masked) then `answer` (the
    scored continuation, answer tag included), as a format's evaluation scores it. The unlearning
    engine takes it where it takes a `QARecord`, to unlearn a forget set presented in another
    format (cloze span, option letter, ...); a refusal replaces `answer` after the same prompt."""

    prompt: str
    answer: str


@dataclass(frozen=True)
class MCRecord:
    """A multiple-choice question: `label` indexes the right entry of `options`. `task` and
    `shots` (solved questions of the same task, put before it) are RWKU's MMLU's, which carries
    its own few-shot examples per question."""

    prompt: str
    options: tuple[str, ...]
    label: int
    split: str = ""
    index: int = 0
    task: str = ""
    shots: tuple[MCRecord, ...] = ()

    def __post_init__(self) -> None:
        assert 0 <= self.label < len(self.options), (self.label, self.options)


CompletionKind = Literal["regurgitation", "knowledge"]


@dataclass(frozen=True)
class CompletionRecord:
    """A prompt and the continuation the model is expected to produce (LUME `sc` / `qa` ids)."""

    prefix: str
    completion: str
    id: str = ""
    task: int = 0
    kind: CompletionKind = "regurgitation"
    split: str = ""
    document: str = field(default="", compare=False)


@dataclass(frozen=True)
class ClozeRecord:
    """A cloze item: an answer whose fact, at its end, is masked.

    The scored text is `span` after the question and `prefix` (the answer up to the fact); the
    formats paper scores it by the length-normalised probability of the span.
    """

    question: str
    prefix: str
    span: str
    entity: str | None = None
    split: str = ""
    index: int = 0


@dataclass(frozen=True)
class ProbeRecord:
    """An RWKU probe about a target (a famous person): a query and the short answer its greedy
    answer is scored against (ROUGE-L recall). `level` 1 is fill-in-the-blank, 2 a question, 3 an
    adversarial question whose attack is `kind` (RWKU's `type`, e.g. "prefix injection"; levels 1
    and 2 carry their own `type` too). `split` is "forget" (about the target) or "neighbor"
    (about what lies next to it, which should stay)."""

    query: str
    answer: str
    subject: str
    level: int
    kind: str
    split: str
    index: int = 0


@dataclass(frozen=True)
class PreferenceRecord:
    """A preference pair (RWKU's `pair.json`, trained on by DPO): after `prompt`, `chosen` is
    preferred to `rejected`."""

    prompt: str
    chosen: str
    rejected: str


@dataclass(frozen=True)
class ReasoningRecord:
    """A chain-of-thought question (RWKU's BBH): `cot` is the task's few-shot prompt, `answer` the
    string the extracted answer must equal."""

    question: str
    answer: str
    task: str
    cot: str


@dataclass(frozen=True)
class OpenQARecord:
    """A question with every answer that counts (RWKU's TriviaQA): scored by the best match."""

    question: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class TruthfulRecord:
    """A TruthfulQA question with its MC1 (one true choice) and MC2 (several) targets: `labels`
    are 1 for a true choice, 0 for a false one, aligned with `choices`."""

    question: str
    mc1_choices: tuple[str, ...]
    mc1_labels: tuple[int, ...]
    mc2_choices: tuple[str, ...]
    mc2_labels: tuple[int, ...]
