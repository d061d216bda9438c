"""A TOFU-layout folder's forget splits as a study reads them: the files of one split
(`split_files`) and which splits hold byte for byte the same data, so that a study computes
each group once and reports it under every name (`same_data_splits`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from forgetbench.config_names import FORGET_SPLITS, retain_split_for


def split_files(split: str) -> tuple[str, ...]:
    """The TOFU-layout files a study of forget split `split` reads for that split (the rest of
    the data, Real Authors, World Facts, formats, LUME, is the same for every split)."""

    holdout = split.replace("forget", "holdout")
    return (f"{split}.json", f"{split}_perturbed.json", f"{holdout}.json",
            f"{retain_split_for(split)}.json")  # fmt: skip


def same_data_splits(tofu: Path, splits: Iterable[str]) -> dict[str, str]:
    """`{split: computed}` for each of `splits` whose files (`split_files`) are byte for byte
    those of another of `splits`: the study computes the group's last split (TOFU order, so a
    forget10-only study shares its cache entries) and reports its rows under each name. At the
    tiny scale forget01, forget05 and forget10 are all one author, the same questions: computing
    them once is a third of the work, and nothing a split's rows hold can differ (every seed, the
    attacks' halves and the shadow models depend on the data, not on the split's name)."""

    def contents(split: str) -> tuple[bytes | None, ...]:
        return tuple(
            (tofu / name).read_bytes() if (tofu / name).is_file() else None
            for name in split_files(split)
        )

    groups: dict[tuple[bytes | None, ...], list[str]] = {}
    for split in splits:
        groups.setdefault(contents(split), []).append(split)
    same = {}
    for members in groups.values():
        computed = max(members, key=FORGET_SPLITS.index)
        same.update({split: computed for split in members if split != computed})
    return same
