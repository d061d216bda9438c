"""The values the device and precision options accept, without torch: the typed config (read by
`forgetbench --help`, which must not wait for torch) and `forgetbench.device` both take them from
here."""

from __future__ import annotations

DEVICE_SPEC = r"^(auto|cpu|cuda|cuda:\d+)$"  # `model.device`; the device module adds `meta`
DEVICE_WORDS = "auto, cpu, cuda or cuda:N"  # DEVICE_SPEC as an error message says it
DTYPE_NAMES = ("float32", "bfloat16", "float16")  # `model.dtype`
MIXED_PRECISIONS = ("no", "bf16", "fp16")  # `model.mixed_precision`
SHARDINGS = ("none", "fsdp")  # `model.sharding`
