"""Unlearning methods: one file each, a typed config plus a pure loss over tensors.

Importing this package imports every module in it, and each method module registers itself in
`METHODS`, so a new method is one new file (docs/methods.md has the template). `get_method("npo")`
returns the config class, `build_method("npo", {"beta": 0.05})` a validated instance.
"""

import importlib
import pkgutil

from forgetbench.methods.base import (
    METHODS,
    TwoTaskMethod,
    UnlearnInputs,
    UnlearnMethod,
    build_method,
    get_method,
    method_names,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "METHODS",
    "TwoTaskMethod",
    "UnlearnInputs",
    "UnlearnMethod",
    "build_method",
    "get_method",
    "method_names",
]
