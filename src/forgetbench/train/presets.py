"""Per-setup unlearning defaults as named presets: YAML files shipped in forgetbench/presets
(`mini` for the built-in tiny models, `tofu` for any Hugging Face model). The numbers are data;
a rule that depends on the model (a `DepthScaledMethod`: RMU's steered block) stays with the
method. The files are read by `forgetbench.config` (which checks `unlearn.preset` against them);
this module turns them into a training loop."""

from __future__ import annotations

from typing import Any

from forgetbench.config import PRESETS, preset_names, read_preset
from forgetbench.train.loop_config import LoopConfig


def eval_preset(name: str) -> dict[str, Any]:
    """The `eval.*` defaults preset `name` gives (none when it has no `eval` section)."""
    return dict(read_preset(name).get("eval", {}))


def unlearn_preset(name: str, method: str | None = None) -> tuple[LoopConfig, dict[str, Any]]:
    """The loop and method options preset `name` gives `method`: its shared `loop`, with what the
    method's own entry under `methods` changes, and that entry's `options` (none without one)."""
    preset = read_preset(name)
    own = preset.get("methods", {}).get(method, {})
    return LoopConfig(**{**preset["loop"], **own.get("loop", {})}), dict(own.get("options", {}))


__all__ = ["PRESETS", "eval_preset", "preset_names", "read_preset", "unlearn_preset"]
