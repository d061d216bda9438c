"""Offline lm-evaluation-harness tasks for the tests: five real public facts as a JSONL file and a
multiple-choice task YAML reading it (or an id nobody has cached, as MMLU's is offline). Answers
are several tokens long for the toy tokenizer, so lm-eval's one-token logits cache cannot fold
the four choices into one row."""

from __future__ import annotations

import json
from pathlib import Path

QUESTIONS = [
    ("Which planet is known as the Red Planet?", ["Mars", "Venus", "Jupiter", "Saturn"], 0),
    ("What is the chemical symbol for gold?", ["Ag", "Au", "Gd", "Go"], 1),
    ("Which ocean is the largest?", ["Atlantic", "Indian", "Pacific", "Arctic"], 2),
    ("Who wrote Hamlet?", ["Dickens", "Austen", "Tolstoy", "Shakespeare"], 3),
    ("What is the capital of Japan?", ["Tokyo", "Osaka", "Kyoto", "Nagoya"], 0),
]
ACC = "  - metric: acc\n"


def write_questions(path: Path, questions=QUESTIONS) -> Path:
    """`questions` as lm-eval's json loader reads them: one {question, choices, answer} a line."""
    rows = [{"question": q, "choices": c, "answer": a} for q, c, a in questions]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def local_source(data: Path) -> str:
    """A task's dataset lines reading the JSONL file `data`."""
    return f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}"


def multiple_choice_task(name: str, source: str, metric_list: str = ACC) -> str:
    """The YAML of task `name`: "Question: ...\\nAnswer:", the choices scored, `answer` right."""
    return (
        f"task: {name}\n{source}\ntest_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: "Question: {{question}}\\nAnswer:"\n'
        'doc_to_choice: "{{choices}}"\n'
        "doc_to_target: answer\n"
        f"metric_list:\n{metric_list}"
    )
