"""The questions TOFU's evaluation asks (the task itself: `forgetbench.eval.tasks.tofu`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from forgetbench.data.tofu import load_tofu
from forgetbench.errors import ConfigError
from forgetbench.records import QARecord


def eval_set_files(split: str) -> dict[str, str]:
    """The TOFU split file each of the four evaluation sets of forget split `split` reads."""
    return {
        "forget": f"{split}_perturbed",
        "retain": "retain_perturbed",
        "real_authors": "real_authors_perturbed",
        "world_facts": "world_facts_perturbed",
    }


def tofu_eval_sets(
    data: str | Path, split: str, *, max_questions: int | None = None
) -> dict[str, list[QARecord]]:
    """The four TOFU evaluation sets for a forget split, from a TOFU-layout source, each cut to
    its first `max_questions` (`first_questions`). A folder made by `forgetbench data generate`
    may be given by its root."""
    source = Path(data)
    if (source / "manifest.json").is_file() and (source / "tofu").is_dir():
        source = source / "tofu"
    sets = {name: load_tofu(source, file) for name, file in eval_set_files(split).items()}
    return {name: first_questions(records, max_questions) for name, records in sets.items()}


def first_questions(records: Sequence[QARecord], max_questions: int | None) -> list[QARecord]:
    """The first `max_questions` records, or all of them for None: TOFU's `ds_size`, which its
    evaluation applies to each of its four sets as `data.select(range(min(ds_size, len(data))))`
    (TOFU `evaluate_util.py`). Its published logs used 300: 300 of forget10's and retain's 400
    questions, all 100 Real Authors and 117 World Facts ones."""
    if max_questions is None:
        return list(records)
    if max_questions < 1:
        raise ConfigError(
            f"eval.max_questions must be at least 1, got {max_questions}", "or unset it for all"
        )
    return list(records[:max_questions])
