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


def read_preset(name: str) -> dict[str, Any]:
    path = PRESETS / f"{name}.yaml"
    if not path.is_file():
        known = [
            p.name.removesuffix(".yaml") for p in PRESETS.iterdir() if p.name.endswith(".yaml")
        ]
        raise UnknownNameError("preset", name, known)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def eval_preset(name: str) -> dict[str, Any]:
    """The `eval.*` defaults preset `name` gives (none when it has no `eval` section)."""
    return dict(read_preset(name).get("eval", {}))


def unlearn_preset(name: str, method: str | None = None) -> tuple[LoopConfig, dict[str, Any]]:
    """The loop and method options preset `name` gives `method`: its shared `loop`, with what the
    method's own entry under `methods` changes, and that entry's `options` (none without one)."""
    preset = read_preset(name)
    own = preset.get("methods", {}).get(method, {})
    return LoopConfig(**{**preset["loop"], **own.get("loop", {})}), dict(own.get("options", {}))
