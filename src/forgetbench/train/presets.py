"""Per-setup unlearning defaults as named presets: YAML files shipped in forgetbench/presets
(`mini` for the built-in tiny models, `tofu` for any Hugging Face model). The numbers are data;
a rule that depends on the model (a `DepthScaledMethod`: RMU's steered block) stays with the
method."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import yaml

from forgetbench.errors import UnknownNameError
from forgetbench.train.loop import LoopConfig

PRESETS = files("forgetbench") / "presets"


def preset_names() -> list[str]:
    return sorted(
        p.name.removesuffix(".yaml") for p in PRESETS.iterdir() if p.name.endswith(".yaml")
    )


def read_preset(name: str, *, kind: str = "preset") -> dict[str, Any]:
    # Checked against the shipped names, not as a path: a name is never a file to go looking for.
    known = preset_names()
    if name not in known:
        raise UnknownNameError(kind, name, known)
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text(encoding="utf-8"))


def eval_preset(name: str) -> dict[str, Any]:
    """The `eval.*` defaults preset `name` gives (none when it has no `eval` section)."""
    return dict(read_preset(name).get("eval", {}))


def unlearn_preset(name: str, method: str | None = None) -> tuple[LoopConfig, dict[str, Any]]:
    """The loop and method options preset `name` gives `method`: its shared `loop`, with what the
    method's own entry under `methods` changes, and that entry's `options` (none without one)."""
    preset = read_preset(name)
    own = preset.get("methods", {}).get(method, {})
    return LoopConfig(**{**preset["loop"], **own.get("loop", {})}), dict(own.get("options", {}))
