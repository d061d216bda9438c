"""Unlearning methods: one file each, a typed config plus a pure loss over tensors.

Importing this package registers every method in `METHODS`; `get_method("npo")` returns the config
class, `build_method("npo", {"beta": 0.05})` a validated instance. See docs/methods.md.
"""

# isort: off
# Imported for their @METHODS.register side effect, in SPEC §2's order: registration order is
# `method_names()`, the default study's order (its rows, results and report).
from forgetbench.methods import grad_ascent, grad_diff, kl, idk, dpo, npo, simnpo, ngdiff, rmu  # noqa: F401

# isort: on
from forgetbench.methods.base import (
    METHODS,
    TwoTaskMethod,
    UnlearnInputs,
    UnlearnMethod,
    build_method,
    get_method,
    method_names,
)

__all__ = [
    "METHODS",
    "TwoTaskMethod",
    "UnlearnInputs",
    "UnlearnMethod",
    "build_method",
    "get_method",
    "method_names",
]
