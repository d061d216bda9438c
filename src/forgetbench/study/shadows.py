"""The shadow models the LiRA and RMIA attacks read, as data: a forget split's candidates (its
forget questions, then its holdout's), the split whose shadows serve it (`shadow_pool`: TOFU's
splits nest, so one set serves them all), and a shadow's record file, its folder and the
candidates it trained on (`write_shadow`, `read_shadow`), and the shadow models a study is given
for a split as membership masks over its candidates, checked before any job runs
(`shadow_masks`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from forgetbench.config_names import FORGET_SPLITS, retain_split_for
from forgetbench.data.tofu import load_tofu
from forgetbench.errors import DataError
from forgetbench.eval.runner import tofu_root
from forgetbench.io import atomic_write_json, read_json
from forgetbench.study.inputs import Study


def shadow_candidates(tofu: Path, split: str) -> list[Any] | None:
    """The records the MIA task scores for forget split `split`, in its order: the forget
    questions (members of the finetuned model), then the holdout's; None without a holdout."""
    holdout = split.replace("forget", "holdout")
    if not (tofu / f"{holdout}.json").is_file():
        return None
    return [*load_tofu(tofu, split), *load_tofu(tofu, holdout)]


def shadow_pool(tofu: Path, split: str) -> str:
    """The forget split whose shadow models serve `split`: the one with the most candidates among
    those whose candidates include all of `split`'s and whose retain set is inside `split`'s
    (ties: the later split). TOFU's splits nest (forget01 in forget05 in forget10, holdouts
    likewise, retain90 in retain95 in retain99), so one set of shadows trained on retain90 plus
    halves of forget10 and holdout10 serves all three: in Carlini et al. (2022)'s setting a
    shadow is a model trained on a random half of a pool that holds the target's candidates, and
    the pool here is the largest split's. The choice depends on the data only, not on which
    splits a study runs, so a split's LiRA and RMIA are the same in any study."""

    def questions(name: str) -> set[str]:
        return {r.question for r in load_tofu(tofu, name)}

    wanted = shadow_candidates(tofu, split)
    if wanted is None:
        return split
    wanted_questions = {r.question for r in wanted}
    retain = questions(retain_split_for(split))
    eligible = [(len(wanted), FORGET_SPLITS.index(split), split)]
    for other in FORGET_SPLITS:
        pool = shadow_candidates(tofu, other) if other != split else None
        if pool is None or not (tofu / f"{retain_split_for(other)}.json").is_file():
            continue
        if wanted_questions <= {r.question for r in pool} and (
            questions(retain_split_for(other)) <= retain
        ):
            eligible.append((len(pool), FORGET_SPLITS.index(other), other))
    return max(eligible)[2]


def write_shadow(path: Path, model_dir: Path, members: Iterable[str], **info: Any) -> Path:
    """A shadow model's record: its folder and the candidate questions it trained on (its
    membership mask, by question), plus `info` (how it was drawn)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"model": str(model_dir), "members": list(members), **info})
    return path


def read_shadow(path: str | Path) -> tuple[Path, set[str]]:
    """(model folder, member questions) of a shadow-model file (`write_shadow`'s layout)."""
    data = read_json(Path(path), what="shadow model file")
    members = data.get("members") if isinstance(data, dict) else None
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, str) or not (
        isinstance(members, list) and all(isinstance(m, str) for m in members)
    ):
        raise DataError(
            f'shadow model file {path} needs a "model" folder and a "members" list of the '
            "forget/holdout questions the shadow was trained on",
            'write it as {"model": "path/to/model", "members": ["question", ...]}',
        )
    return Path(model), set(members)


def shadow_masks(study: Study, split: str) -> list[tuple[Path, list[bool]]]:
    """(model folder, membership mask over the split's candidates) of each of `split`'s shadow
    models, checked: every member a candidate, every candidate in and out of some shadow."""
    files = study.shadows.get(split, [])
    if not files:
        return []
    candidates = shadow_candidates(tofu_root(study.data), split)
    if candidates is None:
        holdout = split.replace("forget", "holdout")
        raise DataError(
            f"shadow models are given for {split} but the data has no {holdout} split to tell "
            "members from non-members",
            f"add {holdout}.json to the data, or drop {split} from study.mia_shadow_models",
        )
    if len(files) < 2:
        raise DataError(
            f"one shadow model for {split} ({files[0]}): LiRA and RMIA compare shadows that "
            "trained on a candidate with shadows that did not",
            "give at least 2 shadow models per split",
        )
    questions = [r.question for r in candidates]
    shadows = []
    for path in files:
        model, members = read_shadow(path)
        unknown = members.difference(questions)
        if unknown:
            raise DataError(
                f"shadow model file {path} lists {len(unknown)} member(s) that are not "
                f"{split} or holdout questions, e.g. {sorted(unknown)[0]!r}",
                "list the forget/holdout questions the shadow was trained on, as written in "
                "the data",
            )
        shadows.append((model, [q in members for q in questions]))
    for j, question in enumerate(questions):
        inside = sum(mask[j] for _, mask in shadows)
        if inside in (0, len(shadows)):
            side = "no" if inside == 0 else "every"
            raise DataError(
                f"{side} shadow model of {split} trained on {question!r}: online LiRA and RMIA "
                "need every candidate in some shadows' training data and out of others'",
                "train each shadow on a random half of the forget and holdout questions",
            )
    return shadows
