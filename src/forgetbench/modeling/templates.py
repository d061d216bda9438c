"""How a model family lays out a question and its answer as one text (`PromptTemplate`), and
which layout a model gets (`resolve_template`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from forgetbench.errors import ConfigError

TemplateName = Literal["question_answer", "tofu_llama2", "tofu_question_answer", "chat"]
TEMPLATES: tuple[str, ...] = ("question_answer", "tofu_llama2", "tofu_question_answer", "chat")
# Older names kept readable: `llama2` was always TOFU's Llama-2 format.
TEMPLATE_ALIASES = {"llama2": "tofu_llama2"}


@dataclass(frozen=True)
class PromptTemplate:
    """How a model family lays out a question and its answer as one text: `prompt(q)` then
    `answer(a)`, tokenised together. Every token of `answer(a)` is scored (plus the final EOS);
    the prompt is masked out of every loss and metric and is what generation continues from.

    Token for token as the checkpoints were trained (TOFU's `config/model_config.yaml` and
    `data_module.convert_raw_data_to_model_format`: question_start_tag + q + question_end_tag,
    then answer_tag + a, one tokenizer call):
    - `question_answer` (the miniature's): `Question: {q}\nAnswer:` + ` {a}`. The separating
      space belongs to the answer, so the text is natural and no token straddles the boundary.
    - `tofu_llama2` (TOFU's Llama-2-7b-chat, `locuslab/tofu_ft_llama2-7b`): `[INST] {q} [/INST]`
      + `{a}` (answer tag "", no space: TOFU trained on `[/INST]Umar ...`).
    - `tofu_question_answer` (TOFU's phi-1.5, stablelm, pythia): `Question: {q}\n` +
      `Answer: {a}`; TOFU scores the answer tag `Answer: ` as part of the answer, and so do we.
    - `chat`: the tokenizer's chat template with the generation prompt, then `{a}`.
    """

    name: TemplateName

    def prompt(self, question: str, tokenizer: object | None = None) -> str:
        if self.name == "question_answer":
            return f"Question: {question}\nAnswer:"
        if self.name == "tofu_llama2":
            return f"[INST] {question} [/INST]"
        if self.name == "tofu_question_answer":
            return f"Question: {question}\n"
        apply = getattr(tokenizer, "apply_chat_template", None)
        if apply is None or not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                "model.template=chat but the tokenizer has no chat template",
                "use model.template=question_answer, tofu_llama2 or tofu_question_answer",
            )
        messages = [{"role": "user", "content": question}]
        return apply(messages, tokenize=False, add_generation_prompt=True)

    def answer(self, answer: str) -> str:
        """The text that follows the prompt: answer tag and separator, then the answer."""
        if self.name == "question_answer":
            return f" {answer}"
        if self.name == "tofu_question_answer":
            return f"Answer: {answer}"
        return answer


def resolve_template(name: str, tokenizer: object, model_name: str = "") -> PromptTemplate:
    """`auto`: TOFU's own format for TOFU's finetuned checkpoints (`locuslab/tofu_ft_llama2-7b`,
    `locuslab/tofu_ft_phi-1.5`, and their Llama-2-chat / phi / stablelm / pythia bases), the
    tokenizer's chat template if it has one, else `question_answer`."""
    name = TEMPLATE_ALIASES.get(name, name)
    if name == "auto":
        lowered = str(model_name).lower().replace("_", "-")
        llama2 = "llama-2" in lowered or "llama2" in lowered
        if llama2 and ("chat" in lowered or "tofu" in lowered):
            return PromptTemplate("tofu_llama2")
        if any(family in lowered for family in ("phi-1", "stablelm", "pythia")):
            return PromptTemplate("tofu_question_answer")
        if getattr(tokenizer, "chat_template", None):
            return PromptTemplate("chat")
        return PromptTemplate("question_answer")
    if name not in TEMPLATES:
        raise ConfigError(
            f"unknown model.template '{name}'", f"use auto or one of {', '.join(TEMPLATES)}"
        )
    return PromptTemplate(name)  # type: ignore[arg-type]
