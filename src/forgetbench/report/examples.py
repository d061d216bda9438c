"""The report's example generations: per split a few forget-set questions, each with its ground
truth, the finetuned model's answer and every method's at the leaderboard's step and its last."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from forgetbench import rows as row_math
from forgetbench.results import Example

EXAMPLES_PER_SPLIT = 3  # questions shown per split, each with every method's answer


def examples_section(
    examples: Sequence[Example], board: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per split, a few forget-set questions, each shown once: its ground truth, the finetuned
    model's answer (before) and every method's answer at the step the leaderboard chose, then at
    its last logged step when that is another one, each labelled."""
    chosen = {(e["split"], e["method"]): e["step"] for e in board}
    out = []
    for split in dict.fromkeys(e.split for e in examples):
        own = [e for e in examples if e.split == split]
        last = {
            m: max(e.step for e in own if e.method == m)
            for m in dict.fromkeys(e.method for e in own)
            if m not in row_math.REFERENCE_METHODS
        }
        if not last:
            continue
        questions = list(dict.fromkeys(e.question for e in own))[:EXAMPLES_PER_SPLIT]
        blocks = []
        for question in questions:
            asked = [e for e in own if e.question == question]
            truth = next((e.ground_truth for e in asked if e.ground_truth is not None), None)
            before = next((e for e in asked if e.method == "finetuned"), None)
            answers = [["finetuned (before)", "", *_generation(before)]]
            for method, final_step in last.items():
                leader = chosen.get((split, method))
                if leader is None or leader == final_step:
                    label = "leaderboard's step, last" if leader == final_step else "last"
                    steps = [(final_step, label)]
                else:
                    steps = [(leader, "leaderboard's step"), (final_step, "last")]
                for step, label in steps:
                    found = next((e for e in asked if e.method == method and e.step == step), None)
                    if found is not None:
                        answers.append([f"{method} ({label})", step, *_generation(found)])
            blocks.append({"question": question, "truth": truth, "answers": answers})
        out.append({"split": split, "questions": blocks})
    return out


def _generation(example: Example | None) -> tuple[str | None, str]:
    """A generation as shown, and a note when it held bytes that were not valid UTF-8: the
    tokenizer decodes them to U+FFFD, which would otherwise look like a character the model
    chose."""
    if example is None or example.generation is None:
        return None, ""
    if "\ufffd" in example.generation:
        count = example.generation.count("\ufffd")
        return example.generation, (
            f"{count} × � = bytes that are not valid UTF-8 (the model produced an incomplete "
            "multi-byte character; the tokenizer decodes it as U+FFFD)"
        )
    return example.generation, ""
