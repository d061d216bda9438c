"""Start a script in two real CPU processes under `accelerate launch`, as a user would.

`accelerate launch --cpu --num_processes 2` starts ONE process in accelerate 1.x; a real
two-process CPU group needs the multi-GPU launcher with CPU forced (ACCELERATE_USE_CPU)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def launch_two_cpu_processes(script: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "ACCELERATE_USE_CPU": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launcher = Path(sys.executable).with_name("accelerate")
    return subprocess.run(
        [
            str(launcher), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
            "--main_process_port", str(port), "--mixed_precision", "no", "--dynamo_backend", "no",
            str(script), *args,
        ],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
