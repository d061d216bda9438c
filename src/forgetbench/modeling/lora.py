"""LoRA through PEFT: the adapted modules found from the architecture, the adapters applied,
merged into the base weights (in place, or computed aside for a snapshot), and the model seen
with its adapters off (`AdaptersDisabled`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from forgetbench.errors import ConfigError

# projections (the LoRA paper's choice): Llama, Mistral, Qwen, Phi-3 ... name them q_proj/v_proj;
# GPT-2 fuses them in c_attn, GPT-NeoX/Pythia in query_key_value. Any other architecture gets
# every linear layer but the output head (PEFT's "all-linear").
_LORA_TARGETS = (("q_proj", "v_proj"), ("c_attn",), ("query_key_value",), ("Wqkv",))


def lora_targets(model: object) -> list[str] | str:
    """The modules LoRA adapts in `model` when none are given, found from its architecture."""
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}  # type: ignore[attr-defined]
    for targets in _LORA_TARGETS:
        if set(targets) <= names:
            return list(targets)
    return "all-linear"


def apply_lora(
    model: object,
    *,
    rank: int = 8,
    alpha: int = 16,
    target_modules: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
):
    """Wrap `model` with PEFT LoRA adapters (on `target_modules`, default: found from the
    architecture by `lora_targets`; with `layers`, only in those decoder blocks); only the
    adapters train."""
    from peft import LoraConfig, get_peft_model  # lazy: ~4.5 s to import, only LoRA runs need it

    if rank < 1:
        raise ConfigError(f"train.lora_rank must be >= 1, got {rank}")
    full_names = {name for name, _ in model.named_modules()}  # type: ignore[attr-defined]
    names = full_names | {name.rsplit(".", 1)[-1] for name in full_names}
    missing = [t for t in target_modules or () if t not in names]
    if missing:
        raise ConfigError(
            f"lora_targets: this model has no module named {', '.join(missing)}",
            "name modules it has (a name in model.named_modules() or its last part), or leave "
            "lora_targets unset to find them from the architecture",
        )
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=list(target_modules) if target_modules else lora_targets(model),
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
        # Absent unless asked: PEFT then adapts every block, as every LoRA run before it did.
        **({"layers_to_transform": sorted(layers)} if layers else {}),
    )
    return get_peft_model(model, config)


def merge_lora(model: object):
    """Fold the adapters into the base weights so plain `transformers` loads the result."""
    return model.merge_and_unload()  # type: ignore[attr-defined]


def is_lora(model: object) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "get_base_model")


def merged_state_dict(model: object) -> dict[str, Tensor]:
    """The base architecture's weights with the LoRA adapters folded in, computed aside (the
    trained model keeps its adapters and its base weights bit for bit): what a snapshot saves
    mid-run, without the second full copy `merge_and_unload` on a deep copy would need on GPU."""
    from peft.tuners.lora import LoraLayer  # lazy, as in apply_lora

    base = model.get_base_model()  # type: ignore[attr-defined]
    merged: dict[str, Tensor] = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            layer = module.get_base_layer()
            delta = sum(module.get_delta_weight(a) for a in module.active_adapters)
            merged[f"{name}.weight"] = (layer.weight + delta).to(layer.weight.dtype).detach()
            if getattr(layer, "bias", None) is not None:
                merged[f"{name}.bias"] = layer.bias.detach()
    for key, value in base.state_dict().items():
        if "lora_" not in key:
            merged.setdefault(key.replace(".base_layer.", "."), value.detach())
    return merged


class AdaptersDisabled:
    """A LoRA-wrapped model seen with its adapters off: the start model, the reference a method
    compares against, without a second copy of the weights. Called like the model (no grad)."""

    def __init__(self, model: object) -> None:
        self.model = model

    def __call__(self, *args: object, **kwargs: object) -> object:
        with torch.no_grad(), self.model.disable_adapter():  # type: ignore[attr-defined]
            return self.model(*args, **kwargs)  # type: ignore[operator]

    def parameters(self, recurse: bool = True):  # noqa: ANN201 - torch's iterator
        return self.model.parameters(recurse)  # type: ignore[attr-defined]

    def modules(self):  # noqa: ANN201
        return self.model.modules()  # type: ignore[attr-defined]

    def eval(self) -> AdaptersDisabled:
        return self

    def __getattr__(self, name: str) -> object:
        return getattr(self.model, name)
