"""Run the forgetbench command line in this process and kill it with SIGKILL right after the
train log of its first training loop gets step N: no cleanup runs, the checkpoint of step N (if
any) is not written, as when `kill -9` lands between two checkpoints. tests/test_faults_process.py
kills a forked process with it, tests/train/cli_sequence.py its last command line.

usage: kill_at_step.py N FORGETBENCH-ARGUMENT...
"""

import os
import signal
import sys

from forgetbench.cli import main
from forgetbench.train import train_log


def kill_at(step: int) -> None:
    """From now on, the process that logs training step `step` kills itself once it is logged."""
    append = train_log.append_log

    def append_then_die(path, row):
        append(path, row)
        if row["step"] == step:
            os.kill(os.getpid(), signal.SIGKILL)

    train_log.append_log = append_then_die


if __name__ == "__main__":
    kill_at(int(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
