"""Faster kernels for the model a training loop trains, each one a choice the user can turn off:
liger-kernel's Triton kernels (`model.liger_kernel`: RMSNorm, RoPE and SwiGLU, on a CUDA GPU,
where the package is installed and the architecture is one it patches), and torch.compile of the
model's forward (`model.compile`, off unless asked).

Every loss here reads the logits (`modeling.forward.forward_logits`: methods take per-token
answer log-probabilities from them), so liger's fused linear cross-entropy, which never
materialises the logits, is never applied, nor its plain cross-entropy, which we never call: the
kernels applied compute the same functions as the ones they replace, to float rounding.
"""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any

import torch

from forgetbench.modeling.lora import is_lora

# Llama-family architectures whose norms, rotary embedding and gated MLP liger patches with the
# three kernels above (RMSNorm without offset, SwiGLU): Llama 2/3, Mistral, Qwen 2/3.
LIGER_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
# The compiler torch.compile hands the captured graph to; tests on the CPU swap in "eager" (the
# same capture, no code generation, which takes a CPU minute for even the tiny model).
COMPILE_BACKEND = "inductor"


def liger_installed() -> bool:
    return importlib.util.find_spec("liger_kernel") is not None


def uses_liger(
    model: Any, device: torch.device, *, enabled: bool, installed: bool | None = None
) -> bool:
    """Whether the loop patches `model` with liger's kernels: asked for (the default), on a CUDA
    GPU (Triton kernels; never on the CPU, whose numbers the golden study pins), the package
    installed (`pip install forgetbench[gpu]`) and an architecture in `LIGER_MODEL_TYPES`."""
    if not enabled or device.type != "cuda":
        return False
    if not (liger_installed() if installed is None else installed):
        return False
    return getattr(getattr(model, "config", None), "model_type", None) in LIGER_MODEL_TYPES


def apply_liger(model: Any) -> None:
    """Patch `model` (a LoRA-wrapped one through its base) in place with liger's RMSNorm, RoPE
    and SwiGLU kernels, neither cross-entropy kernel."""
    from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN

    base = model.get_base_model() if is_lora(model) else model
    patch = MODEL_TYPE_TO_APPLY_LIGER_FN[base.config.model_type]
    wanted = {
        "rope": True,
        "rms_norm": True,
        "swiglu": True,
        "cross_entropy": False,
        "fused_linear_cross_entropy": False,
        "model": base,
    }
    accepted = inspect.signature(patch).parameters
    patch(**{k: v for k, v in wanted.items() if k in accepted})


def compile_model(model: torch.nn.Module) -> None:
    """torch.compile of the model's forward, in place (`nn.Module.compile`): its parameters,
    state dict and checkpoints keep their names, and the caller's reference is the compiled
    model."""
    model.compile(backend=COMPILE_BACKEND)
