"""Unlearning methods: one file each, a typed config plus a pure loss over tensors.

Importing this package imports every module in it, and each method module registers itself in
`METHODS`, so a new method is one new file (docs/methods.md has the template). `get_method("npo")`
returns the config class, `build_method("npo", {"beta": 0.05})` a validated instance. Beside the
methods: `base` (the inputs, contract and registry every method shares), `_terms` (the pure
tensor terms they are written with), `refusals` (the IDK and DPO baselines' refusal answers) and
`plugins` (methods from outside the package)."""

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

# Registration order is `method_names()`, the default study's order (its rows and report): SPEC
# §2's methods in its order, then any other module of the package by name.
_SPEC_ORDER = ("grad_ascent", "grad_diff", "kl", "idk", "dpo", "npo", "simnpo", "ngdiff", "rmu")
_modules = sorted(
    (m.name for m in pkgutil.iter_modules(__path__)),
    key=lambda name: (_SPEC_ORDER.index(name) if name in _SPEC_ORDER else len(_SPEC_ORDER), name),
)
for _module in _modules:
    importlib.import_module(f"{__name__}.{_module}")

# Installed packages' methods (entry-point group `forgetbench.plugins`) join the built-ins here,
# after them, so every lookup of a method name sees them without a flag.
from forgetbench.methods.plugins import load_entry_points, register_method  # noqa: E402

load_entry_points()

__all__ = [
    "METHODS",
    "TwoTaskMethod",
    "UnlearnInputs",
    "UnlearnMethod",
    "build_method",
    "get_method",
    "method_names",
    "register_method",
]
