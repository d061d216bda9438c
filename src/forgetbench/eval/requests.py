"""What an evaluation task asks of a model, as data (lm-evaluation-harness's `Instance` with its
`loglikelihood` and `generate_until` request types): a task builds requests from its documents,
a backend (`forgetbench.eval.backend`) answers them, and the task turns the answers into its
per-item logs and scores without ever holding the model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forgetbench.eval.outputs import AnswerScore

# Tokens per scored text of the MIA and formats tasks when eval.max_length is unset (TOFU's
# questions use train.max_length); kept, so that unset, their numbers stay those of before.
UNSET_SCORED_LENGTH = 512


@dataclass(frozen=True)
class Score:
    """Score each of `answers` as the continuation of `prompt`, teacher forced: answered by one
    `AnswerScore` per answer, in order.

    Prompt and answer are tokenised as one text, the scored tokens being those after the prompt
    (`modeling.encoding.encode_prompt_answer`); `add_eos` appends EOS to the scored tokens (a trained
    answer ends with it; an option letter or a cloze span does not). Texts are cut to
    `max_length` tokens, or to the model's context when None (whole documents)."""

    prompt: str
    answers: tuple[str, ...]
    add_eos: bool = True
    max_length: int | None = UNSET_SCORED_LENGTH

    def __post_init__(self) -> None:
        if not self.answers:
            raise ValueError(f"a Score request needs an answer to score (prompt {self.prompt!r})")


@dataclass(frozen=True)
class Generate:
    """Greedy continuation of `prompt` (no sampling) up to `max_new_tokens` new tokens or EOS,
    decoded without the prompt: answered by the text."""

    prompt: str
    max_new_tokens: int


@dataclass(frozen=True)
class GradNorm:
    """The gradient-norm attack's statistic of `answer` after `prompt`: the p-norm of each
    parameter tensor's gradient of the answer's mean token NLL (`outputs.gradient_norms`, which
    says which tokens), answered by a (P,) array. Tokenised and cut as `Score` without EOS."""

    prompt: str
    answer: str
    p: float = 2.0
    max_length: int | None = UNSET_SCORED_LENGTH


Request = Score | Generate | GradNorm
Response = tuple[AnswerScore, ...] | str | np.ndarray
