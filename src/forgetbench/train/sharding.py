"""`model.sharding=fsdp`: the trained model (and a method's frozen reference model) sharded over the
launched processes with PyTorch's FSDP2 (`torch.distributed.fsdp.fully_shard`), so each process
holds 1/N of the parameters, gradients and AdamW state instead of a full copy (DDP).

Each decoder block is its own FSDP unit (gathered just before it runs, freed after), the rest
(embeddings, final norm, tied head) is the root unit. With `model.mixed_precision=bf16` the units
compute in bf16 and reduce gradients in float32 over float32 shards (FSDP's own mixed precision,
not accelerate's autocast); the root hands back float32 logits, so every loss is computed in
float32 as without sharding. Gradients are reduce-scattered after every micro-batch, so gradient
accumulation never holds a full gradient.

What is not sharded is refused by name: LoRA (PEFT's adapters-off reference view and its merge
need the whole base weights in each process), and two-gradient methods (NGDiff combines whole
gradients; the loop refuses any step hook with several processes). The model is loaded whole in
each process, then sharded: a process needs the full weights' memory once, at the start.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

from forgetbench.device import model_device, precision, process_state
from forgetbench.errors import ConfigError, ModelError
from forgetbench.modeling.forward import decoder_blocks
from forgetbench.modeling.lora import is_lora

LAUNCH_HINT = (
    "start it with torchrun --nproc_per_node N -m forgetbench.cli ..., or drop model.sharding"
)


def check_sharding(config: Any, command: str) -> None:
    """Refuse, before any work, a command whose `model.sharding=fsdp` cannot run (a RunConfig):
    no FSDP2 in this torch, no launcher, LoRA, `unlearn` with a two-gradient method (a study's
    is refused by the loop when its turn comes)."""
    if config.model.sharding != "fsdp":
        return
    _fsdp()
    if "WORLD_SIZE" not in os.environ:
        raise _alone()
    if config.train.lora or config.unlearn.lora:
        raise _lora_refusal()
    from forgetbench.methods.base import TwoTaskMethod, get_method

    # The class, not an instance: its fields' defaults and its methods are what the protocol asks.
    if command == "unlearn" and isinstance(get_method(config.unlearn.method), TwoTaskMethod):
        raise two_gradient_refusal()


def two_gradient_refusal() -> ConfigError:
    return ConfigError(
        "this method takes its own two-gradient step, which combines whole gradients, and "
        "model.sharding=fsdp gives each process only a shard of them",
        "run it in one process, without model.sharding",
    )


def _alone() -> ConfigError:
    return ConfigError(
        "model.sharding=fsdp shards the model over the processes of torchrun or accelerate "
        "launch, and this command runs alone",
        LAUNCH_HINT,
    )


def _lora_refusal() -> ConfigError:
    return ConfigError(
        "model.sharding=fsdp does not shard LoRA adapters (a method's reference model is the "
        "base weights seen with the adapters off, which needs them whole in each process)",
        "drop train.lora / unlearn.lora to train every weight sharded, or use "
        "model.sharding=none (LoRA's small state fits a full copy per process)",
    )


def sharding_requested() -> bool:
    """Whether this command shards its trained models (`model.sharding=fsdp`)."""
    return precision().sharding == "fsdp"


def _fsdp() -> Any:
    """torch.distributed.fsdp, refused in one sentence where this torch has no FSDP2."""
    try:
        from torch.distributed import fsdp

        fsdp.fully_shard, fsdp.MixedPrecisionPolicy, fsdp.FSDPModule  # noqa: B018
        torch.nn.utils.get_total_norm  # noqa: B018
    except (ImportError, AttributeError):
        raise ConfigError(
            f"model.sharding=fsdp needs PyTorch's FSDP2 (torch.distributed.fsdp.fully_shard, "
            f"torch >= 2.6), and this is torch {torch.__version__}",
            "upgrade torch, or use model.sharding=none",
        ) from None
    return fsdp


def is_sharded(model: Any) -> bool:
    """Whether `model` went through `shard_model` (its parameters are shards)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return isinstance(model, FSDPModule)


def _mesh(model: torch.nn.Module) -> Any:
    """The one-dimensional mesh of every launched process, on the model's device type."""
    if "WORLD_SIZE" not in os.environ:
        raise _alone()
    from torch.distributed.device_mesh import init_device_mesh

    device = model_device(model)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    process_state()  # the process group accelerate sets up, shared with the loop's
    if not torch.distributed.is_initialized():  # accelerate starts no group for one process
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return init_device_mesh(device.type, (torch.distributed.get_world_size(),))


def shard_model(model: torch.nn.Module, *, role: str = "trained model") -> torch.nn.Module:
    """Shard `model` in place over every launched process (each decoder block, then the whole
    model) and say on stderr how many parameters this process holds; returns the model."""
    fsdp = _fsdp()
    if is_lora(model):
        raise _lora_refusal()
    mesh = _mesh(model)
    bf16 = precision().mixed_precision == "bf16"
    compute = {"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32} if bf16 else {}
    try:
        blocks = list(decoder_blocks(model))
    except ModelError:
        blocks = []  # no block list found: the whole model is one unit, still sharded
    for block in blocks:
        fsdp.fully_shard(block, mesh=mesh, mp_policy=fsdp.MixedPrecisionPolicy(**compute))
    root = fsdp.MixedPrecisionPolicy(**compute, output_dtype=torch.float32 if bf16 else None)
    fsdp.fully_shard(model, mesh=mesh, mp_policy=root)
    parameters = list(model.parameters())
    held = sum(_local(p).numel() for p in parameters)
    total = sum(p.numel() for p in parameters)
    print(
        f"fsdp: process {mesh.get_rank()} of {mesh.size()} holds {held:,} of the {role}'s "
        f"{total:,} parameters ({100 * held / max(total, 1):.1f} %)",
        file=sys.stderr,
        flush=True,
    )
    return model


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def clip_sharded_gradients(model: torch.nn.Module, max_norm: float) -> torch.Tensor:
    """Clip a sharded model's gradients to a total norm of `max_norm` and return the norm before
    clipping: the norm of the whole gradient, summed over every process's shards."""
    parameters = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
    norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    return norm


def gathered(model: torch.nn.Module) -> torch.nn.Module | None:
    """The whole model as an ordinary (unsharded) module of its own class, on the CPU, in the main
    process; None in the others. Every process must call it (the shards are gathered)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    fsdp = _fsdp()
    full = get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    if not process_state().is_main_process:
        return None
    plain_class = next(c for c in type(model).__mro__ if not issubclass(c, fsdp.FSDPModule))
    with torch.device("meta"):
        plain = plain_class(model.config)
    plain.load_state_dict(full, assign=True)
    # Buffers outside the state dict (rotary frequencies) are recomputed by the class on load;
    # tied weights (embeddings and head) were assigned apart and are tied back.
    plain.tie_weights()
    plain.generation_config = model.generation_config
    return plain


def whole_model(model: torch.nn.Module) -> torch.nn.Module | None:
    """What the main process saves of a trained model: the gathered whole when it is sharded (None
    in the other processes; every process must call this), else the model itself (out of DDP's
    wrapper)."""
    return gathered(model) if is_sharded(model) else getattr(model, "module", model)
