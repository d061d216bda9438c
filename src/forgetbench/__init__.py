"""forgetbench: machine unlearning for large language models, measured the way the papers define it.

The stable Python surface (docs/python-api.md, docs/methods.md "Your own method") is importable
from here: `evaluate`, `unlearn`, `run` on model objects, and `register_method`, `UnlearnInputs`
and the loss helpers a method is written with. Each name is resolved on first use, from a
string: every module of the package imports this one (for `__version__`), and `import
forgetbench` must not import torch (`forgetbench --help` answers in about 0.2 s).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("forgetbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

# Public name -> the module that defines it. Stable: a release keeps these names and signatures.
_PUBLIC = {
    # The Python API on model objects.
    "evaluate": "forgetbench.api",
    "unlearn": "forgetbench.api",
    "run": "forgetbench.api",
    "Evaluation": "forgetbench.api",
    "Unlearned": "forgetbench.api",
    # Writing a method.
    "register_method": "forgetbench.methods.plugins",
    "UnlearnInputs": "forgetbench.methods.base",
    "require_inputs": "forgetbench.methods.base",
    "check_positive": "forgetbench.methods.base",
    "check_nonnegative": "forgetbench.methods.base",
    "check_choice": "forgetbench.methods.base",
    "check_reduction": "forgetbench.methods.base",
    "retain_regulariser": "forgetbench.methods.base",
    "batch_nll": "forgetbench.methods._terms",
    "mean_nll": "forgetbench.methods._terms",
    "sequence_logprob": "forgetbench.methods._terms",
    "answer_lengths": "forgetbench.methods._terms",
    "LOSS_REDUCTIONS": "forgetbench.methods._terms",
}
_SUBMODULES = ("callbacks",)

__all__ = ["__version__", *_PUBLIC, *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name not in _PUBLIC:
        raise AttributeError(f"module 'forgetbench' has no attribute '{name}'")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
