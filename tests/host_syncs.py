"""Counting the host synchronisations forgetbench's own code makes: on a GPU every `.item()`,
`float(t)`, `int(t)`, `.tolist()` or `if t:` makes the host wait for the device. The CPU cannot
show the wait, but it can count the calls (torch's and transformers' internals, which convert
CPU-side numbers such as AdamW's step count, are not ours and not counted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

PACKAGE = str(Path(__file__).resolve().parents[1] / "src" / "forgetbench")
# The epoch order, drawn from a CPU generator once per epoch; padding-free packing, made on the
# host from the collated CPU tensors before the batch goes to the device.
HOST_SIDE = {"order.py", "packing.py"}
CONVERSIONS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "numpy")


class SyncCounter:
    """Counts tensor-to-host conversions called from forgetbench's code (the caller's frame)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        self.on = False
        for name in CONVERSIONS:
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._counted(name, original))

    def _counted(self, name, original):
        def conversion(tensor, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if self.on and caller.startswith(PACKAGE) and Path(caller).name not in HOST_SIDE:
                self.calls.append(f"{name} in {Path(caller).name}:{sys._getframe(1).f_lineno}")
            return original(tensor, *args, **kwargs)

        return conversion
