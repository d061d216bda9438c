"""The names a run config accepts: scales, the built-in model's sizes, TOFU's splits (and the
miniature's instance splits), the data-transformation formats, benchmarks, robustness attacks and
quantisation schemes, each a fixed tuple; and a method's name, which the method registry checks
(`RegisteredMethod`), so a method registered anywhere is accepted."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic_core import PydanticCustomError, core_schema

from forgetbench.errors import ConfigError

SCALES = ("tiny", "small", "full")
# `model.size`: the built-in model's shape (forgetbench.modeling.builtin holds each one's numbers).
MODEL_SIZES = ("auto", *SCALES, "125m", "1b", "8b")
# TOFU's splits (the miniature has the same): a forget split, its complement, and `full` = both.
FORGET_SPLITS = ("forget01", "forget05", "forget10")
# Joshi et al. (2024)'s data-transformation formats, in their order: what the miniature generates,
# the evaluation scores and the report draws.
FORMATS = (
    "mcqa",
    "cloze",
    "analogy_qa",
    "analogy_mcqa",
    "odd_one_out",
    "comprehension_qa",
    "comprehension_mcqa",
)
RETAIN_SPLITS = ("retain99", "retain95", "retain90")
SPLITS = ("full", *FORGET_SPLITS, *RETAIN_SPLITS)
# The miniature's instance-level forget splits (single questions over many authors, nested like
# TOFU's): a sequence of requests may run on them where the author splits coincide (tiny scale).
INSTANCE_SPLITS = tuple(f"{s}_instances" for s in FORGET_SPLITS)


def retain_split_for(split: str) -> str:
    """forgetNN -> retain(100-NN); the miniature's forgetNN_instances -> retain(100-NN)_instances."""
    match = re.fullmatch(r"forget(\d\d)(_instances)?", split)
    if match is None or split.removesuffix("_instances") not in FORGET_SPLITS:
        raise ConfigError(
            f"unlearning split '{split}' is not a forget split",
            f"use one of {', '.join(FORGET_SPLITS)}",
        )
    return f"retain{100 - int(match.group(1))}{match.group(2) or ''}"


# The formats a forget set can be unlearned in (`study.unlearn_formats`): qa is TOFU's own.
UNLEARN_FORMATS = ("qa", "cloze", "mcqa", "analogy", "comprehension")
# mini = the built-in TOFU-shaped miniature; muse and wmdp study their documents
# (`forgetbench.benchmarks.corpus`), on their built-in miniatures unless --data names a folder.
BENCHMARKS = ("mini", "tofu", "lume", "muse", "wmdp", "rwku")
DOCUMENT_BENCHMARKS = ("muse", "wmdp", "rwku")


# Robustness attacks (forgetbench.attacks): each is scored on the B half of the forget set.
ATTACKS = ("relearn", "relearn_full", "quantize", "incontext")
QUANT_SCHEMES = ("int8", "int4", "nf4")


def _registered_methods() -> tuple[str, ...]:
    # Imported when a method name is checked, not with this module: the methods import torch,
    # and `forgetbench --help` should not wait for it.
    from forgetbench.methods.base import method_names

    return method_names()


class RegisteredMethod:
    """`Annotated[str, RegisteredMethod()]`: a name the method registry knows, so a method
    registered anywhere is accepted without a list here; the JSON schema lists the names."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return {**handler(schema), "enum": list(_registered_methods())}

    @staticmethod
    def _check(name: str) -> str:
        known = _registered_methods()
        if name not in known:
            raise PydanticCustomError(
                "unknown_method", "unknown method {name}", {"name": name, "known": known}
            )
        return name


MethodName = Annotated[str, RegisteredMethod()]


def _every_method() -> list[str]:
    # Every method that trains: an instructed one (icu) changes only what RWKU's evaluation asks.
    from forgetbench.methods.base import trained_method_names

    return list(trained_method_names())
