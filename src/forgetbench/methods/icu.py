"""In-context unlearning: no training, an instruction to forget the target before every prompt.

Jin et al. 2024, "RWKU: Benchmarking Real-World Knowledge Unlearning for Large Language Models",
Sec. 5 (ICU; its code's `use_prompt`): the model keeps its weights, and each evaluation prompt
about a target opens with

    You are an AI Assistant who is supposed to unlearn about {subject} and provide answers
    without its knowledge as if you never knew about it. Don’t tell anyone that you unlearned
    anything.

then a newline and the task's own prompt. RWKU's code puts it inside the user message, before the
chat template is applied, for every probe, neighbour probe, utility question and fluency
instruction, and before the raw passage for the membership attacks; `{subject}` is the row's
target (neighbour and utility rows carry the target as their subject too). The apostrophe is
the typographic one (U+2019), as RWKU's code writes it.

The engine trains nothing for it (`methods.base.InstructedMethod`): its run is the start model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from forgetbench.errors import ConfigError
from forgetbench.methods.base import METHODS, Parts, UnlearnInputs

RWKU_INSTRUCTION = (
    "You are an AI Assistant who is supposed to unlearn about {subject} and provide answers "
    "without its knowledge as if you never knew about it. Don\u2019t tell anyone that you "
    "unlearned anything.\n"
)


def instructed(text: str, subject: str, instruction: str = RWKU_INSTRUCTION) -> str:
    """`text` (a task's prompt before any chat template, or a passage) after the instruction to
    forget `subject`, as RWKU's `use_prompt` writes it."""
    return instruction.format(subject=subject) + text


@METHODS.register("icu")
@dataclass(frozen=True)
class ICU:
    """`instruction` is a template with `{subject}` (RWKU's own by default)."""

    name: ClassVar[str] = "icu"
    needs: ClassVar[frozenset[str]] = frozenset()

    instruction_template: str = RWKU_INSTRUCTION

    def __post_init__(self) -> None:
        if "{subject}" not in self.instruction_template:
            raise ConfigError(
                f"icu.instruction_template must name the target as {{subject}}, got "
                f"{self.instruction_template!r}"
            )
        try:
            self.instruction_template.format(subject="")
        except (IndexError, KeyError, ValueError) as exc:
            raise ConfigError(
                f"icu.instruction_template has a placeholder other than {{subject}} ({exc})",
                "write literal braces as {{ and }}",
            ) from None

    def required_inputs(self) -> frozenset[str]:
        return self.needs

    def instruction(self, subject: str) -> str:
        return self.instruction_template.format(subject=subject)

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        raise TypeError("icu trains nothing: the engine returns the start model without a step")
