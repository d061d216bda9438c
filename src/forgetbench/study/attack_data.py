"""What the robustness attacks run on: the forget split's records cut into the A and B halves
(`AttackData`, see forgetbench.attacks), the in-context probes (B questions after A-half facts
about the same author), and the key an attack's cached work is stored under (`attack_key`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from forgetbench.attacks.halves import DEFAULT_QUESTIONS_PER_AUTHOR, Halves, split_halves
from forgetbench.config import RunConfig
from forgetbench.data.tofu import load_tofu, tofu_eval_sets
from forgetbench.errors import DataError
from forgetbench.eval.runner import tofu_root
from forgetbench.io import read_json
from forgetbench.records import QARecord
from forgetbench.study.inputs import Study


@dataclass(frozen=True)
class AttackData:
    """The forget split's records and halves: A-half training records, B-half evaluation records
    (with paraphrased and perturbed answers), the whole evaluation set (relearn_full)."""

    halves: Halves
    train: list[QARecord]  # the whole forget split, plain records
    evaluation: list[QARecord]  # the whole forget split with perturbed answers
    scored: list[QARecord]  # `evaluation` cut as the study's evaluation cuts it

    @property
    def a_train(self) -> list[QARecord]:
        return [self.train[i] for i in self.halves.a]

    @property
    def b_eval(self) -> list[QARecord]:
        return [self.evaluation[i] for i in self.halves.b]


def attack_data(study: Study, config: RunConfig, split: str) -> AttackData:
    tofu = tofu_root(study.data)
    train = load_tofu(tofu, split)
    evaluation = tofu_eval_sets(tofu, split)["forget"]
    if [r.question for r in train] != [r.question for r in evaluation]:
        raise DataError(
            f"{tofu}: {split} and {split}_perturbed do not hold the same questions in the same "
            "order",
            "the attacks train on one and score the other; regenerate or fix the data",
        )
    scored = tofu_eval_sets(tofu, split, max_questions=config.eval.max_questions)["forget"]
    halves = split_halves(train, seed=config.seed, questions_per_author=_per_author(study.data))
    return AttackData(halves, train, evaluation, scored)


def _per_author(data: Path) -> int:
    manifest = Path(data) / "manifest.json"
    if manifest.is_file():
        sizes = read_json(manifest).get("sizes", {})
        return int(sizes.get("questions_per_author", DEFAULT_QUESTIONS_PER_AUTHOR))
    return DEFAULT_QUESTIONS_PER_AUTHOR


def incontext_records(data: AttackData, k: int) -> list[QARecord]:
    """Each B question preceded by up to `k` true statements about the same author: the answers
    of that author's A-half questions, in the (seeded) order the halves were drawn."""
    facts: dict[int, list[str]] = {}
    for n, group in enumerate(data.halves.authors):
        members = set(group)
        facts[n] = [data.train[i].answer for i in data.halves.a if i in members][:k]
    author = {i: n for n, group in enumerate(data.halves.authors) for i in group}
    return [
        replace(
            data.evaluation[i],
            question=" ".join([*facts[author[i]], data.evaluation[i].question]),
        )
        for i in data.halves.b
    ]


def attack_key(parts: Sequence[Any]) -> str:
    """The cache key of an attack's evaluation or curve: a hash of its inputs."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
