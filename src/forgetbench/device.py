"""Where models run: one device policy for every model the tool loads or builds.

`model.device` (auto | cpu | cuda | cuda:N; auto = the first CUDA GPU when torch sees one) is
resolved once per command by `configure` and carried in the environment, so the study's worker
processes (spawned, not forked) and a sweep's trials place their models the same way. Every model
goes through `place_model`, and every batch through `to_model_device`, which sends it to the device
of the model that will read it: a frozen reference model, the trained model, a scorer. Nothing
else in the package calls `.to(device)` on a model.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import torch

from forgetbench.device_names import (
    DEVICE_SPEC,
    DEVICE_WORDS,
    DTYPE_NAMES,
    MIXED_PRECISIONS,
    SHARDINGS,
)
from forgetbench.errors import ConfigError

DEVICE_ENV = "FORGETBENCH_DEVICE"
PRECISION_ENV = "FORGETBENCH_PRECISION"
DEVICE_PATTERN = re.compile(rf"{DEVICE_SPEC}|^meta$")  # meta: the CPU suite's guard
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


def resolve_device(spec: str) -> torch.device:
    """`auto` -> cuda when torch sees a GPU, else cpu; `cuda` / `cuda:N` refused, naming the
    option, when there is no such GPU. `meta` places no data (the CPU suite's device guard)."""
    spec = spec.strip().lower()
    if not DEVICE_PATTERN.match(spec):
        raise ConfigError(
            f"model.device must be {DEVICE_WORDS}, got {spec!r}",
            "auto uses the GPU when torch sees one",
        )
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"model.device={spec} but this torch build sees no CUDA GPU",
                "use model.device=auto or cpu, or install a CUDA build of torch",
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"model.device={spec} but torch sees {torch.cuda.device_count()} GPU(s)",
                f"use cuda:0..cuda:{torch.cuda.device_count() - 1}",
            )
    return device


@dataclass(frozen=True)
class Precision:
    """How the command's models hold and compute numbers (`model.dtype`,
    `model.mixed_precision`, `model.gradient_checkpointing`), and how launched processes share
    the trained one (`model.sharding`)."""

    dtype: str = "float32"  # weights of loaded and built-in models
    mixed_precision: str = "no"  # accelerate's autocast in training: no | bf16 | fp16
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory
    sharding: str = "none"  # none: each process a full copy (DDP); fsdp: each a shard (FSDP2)
    compile: bool = False  # torch.compile of the trained model's forward
    liger_kernel: bool = True  # liger's Triton kernels where they apply (train/kernels.py)
    padding_free: bool | None = None  # packed training batches; None: the GPU's default


def configure(
    device: str = "auto",
    dtype: str = "float32",
    *,
    mixed_precision: str = "no",
    gradient_checkpointing: bool = False,
    sharding: str = "none",
    compile: bool = False,
    liger_kernel: bool = True,
    padding_free: bool | None = None,
) -> torch.device:
    """Resolve the command's device (refusing a bad one before any work) and precision, and make
    them the defaults of this process and every process it starts."""
    resolved = resolve_device(device)
    if dtype not in DTYPES:
        raise ConfigError(f"model.dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if mixed_precision not in MIXED_PRECISIONS:
        raise ConfigError(
            f"model.mixed_precision must be one of {', '.join(MIXED_PRECISIONS)}, "
            f"got {mixed_precision!r}"
        )
    if mixed_precision == "fp16" and resolved.type != "cuda":
        raise ConfigError(
            "model.mixed_precision=fp16 needs a CUDA GPU", "use bf16 (CPUs support it) or no"
        )
    if sharding not in SHARDINGS:
        raise ConfigError(f"model.sharding must be one of {', '.join(SHARDINGS)}, got {sharding!r}")
    if sharding == "fsdp" and mixed_precision == "fp16":
        raise ConfigError(
            "model.sharding=fsdp does not take model.mixed_precision=fp16 (its loss scaling is "
            "not sharded here)",
            "use model.mixed_precision=bf16",
        )
    os.environ[DEVICE_ENV] = str(resolved)
    os.environ[PRECISION_ENV] = json.dumps(
        asdict(
            Precision(
                dtype,
                mixed_precision,
                gradient_checkpointing,
                sharding,
                compile,
                liger_kernel,
                padding_free,
            )
        )
    )
    return resolved


def configure_model(model: Any) -> torch.device:
    """`configure` with every setting of a config's `model` section (config_sections.ModelConfig,
    read by attribute: the config layer sits above this one), so a command and the Python API
    cannot pass different subsets of it."""
    return configure(
        model.device,
        model.dtype,
        mixed_precision=model.mixed_precision,
        gradient_checkpointing=model.gradient_checkpointing,
        sharding=model.sharding,
        compile=model.compile,
        liger_kernel=model.liger_kernel,
        padding_free=model.padding_free,
    )


def precision() -> Precision:
    value = os.environ.get(PRECISION_ENV)
    return Precision(**json.loads(value)) if value else Precision()


def precision_key() -> dict[str, Any]:
    """The precision settings that differ from the defaults: what a cached stage's key adds.
    Not the sharding: like the number of processes, it changes how the work is spread, not what
    is trained (the same numbers to float rounding, tested), so a sharded run reuses stages. Nor
    the kernels (compile, liger) or packed batches: they compute the same functions, as the fused AdamW on CUDA."""
    default = asdict(Precision())
    return {
        k: v
        for k, v in asdict(precision()).items()
        if v != default[k] and k not in UNKEYED_SETTINGS
    }


# Settings that change how the work is done, not what is trained (`precision_key`).
UNKEYED_SETTINGS = frozenset({"sharding", "compile", "liger_kernel", "padding_free"})


def default_device() -> torch.device:
    """The configured device; under `accelerate launch` on GPUs, each process's own GPU."""
    device = resolve_device(os.environ.get(DEVICE_ENV, "auto"))
    if device.type == "cuda" and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def process_state() -> Any:
    """accelerate's view of the launched processes (rank, count, barrier), the same in every
    module. Without cpu=True accelerate never sets up the multi-process CPU backend (gloo) under
    torchrun, and every process would believe it is alone; the first call decides for all."""
    from accelerate import PartialState  # lazy: the CLI's checks import this module

    return PartialState(cpu=default_device().type != "cuda")


def place_model(model: Any, device: str | torch.device | None = None, *, dtype: str | None = None):
    """Put `model` on `device` (default: the configured one) in `dtype` (default: leave it).
    The one place a model moves; returns the model."""
    target = default_device() if device is None else torch.device(device)
    if dtype is not None:
        model.to(dtype=DTYPES[dtype])
    return model.to(target)


def model_device(model: Any) -> torch.device:
    """The device of the model's parameters (of its first one: `place_model` keeps them on one)."""
    return next(model.parameters()).device


def to_device(value: Any, device: torch.device) -> Any:
    """`value` (a tensor, or dicts / lists / tuples of them) with every tensor on `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True) if value.device != device else value
    if isinstance(value, Mapping):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def to_model_device(batch: Any, model: Any) -> Any:
    """The batch on the device of the model that reads it."""
    return to_device(batch, model_device(model))


def reset_peak_memory() -> None:
    """Start counting peak GPU memory for a stage (no-op without CUDA)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()


def peak_memory_mib() -> float | None:
    """Peak GPU memory allocated since the last `reset_peak_memory`, in MiB, or None without
    CUDA (a stage on the CPU has no comparable figure)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return None


@dataclass
class StageCost:
    """What a training stage cost: wall seconds and, on a GPU, peak allocated memory."""

    seconds: float = 0.0
    peak_gpu_mib: float | None = None

    def record(self) -> dict[str, float]:
        """The stage record's fields (no memory key on the CPU, as before GPUs were measured)."""
        peak = {"peak_gpu_mib": self.peak_gpu_mib} if self.peak_gpu_mib is not None else {}
        return {"seconds": self.seconds, **peak}


@contextmanager
def stage_cost() -> Iterator[StageCost]:
    """Measure the block: filled in when it ends without an exception."""
    cost = StageCost()
    reset_peak_memory()
    started = time.perf_counter()
    yield cost
    cost.seconds = time.perf_counter() - started
    cost.peak_gpu_mib = peak_memory_mib()


def matmul_peak_flop_per_s(
    size: int = 2048,
    repeats: int = 5,
    device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> float:
    """The best of `repeats` (size x size) @ (size x size) products in `dtype`, in FLOP/s, on the
    device the models run on (`model.device`): the rate a dense, cache-friendly kernel reaches
    there, which no model step exceeds. On a GPU the products are larger (8192) and synchronised,
    or launch latency would be timed instead of arithmetic."""
    device = device or default_device()
    cuda = device.type == "cuda"
    if cuda:
        size = max(size, 8192)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    torch.mm(a, b)  # warm the kernel and its thread pool
    best = float("inf")
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        torch.mm(a, b)
        if cuda:
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best


def reset_peak_rss() -> bool:
    """Restart the resident-set high-water mark `getrusage` reports from the current RSS (Linux:
    writing 5 to /proc/self/clear_refs resets VmHWM); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def peak_rss_mib() -> float:
    """The process's resident-set high-water mark since start or the last `reset_peak_rss`."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)
