"""Run several forgetbench command lines in this one process, one Python start and one import for
all of them (under torchrun: in each process). The command lines are separated by `--`; after
each, the main process prints the exit codes so far as one JSON line `codes: [...]`.

A command line that starts with `kill-at-step N` is killed as tests/kill_at_step.py kills one:
the process writing its train log kills itself (SIGKILL) once step N is logged. Under torchrun
that ends the launch, so such a line comes last.

usage: cli_sequence.py COMMAND-LINE [-- COMMAND-LINE ...]
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forgetbench.cli import main  # noqa: E402
from kill_at_step import kill_at  # noqa: E402

lines: list[list[str]] = [[]]
for argument in sys.argv[1:]:
    if argument == "--":
        lines.append([])
    else:
        lines[-1].append(argument)
codes: list[int] = []
for line in filter(None, lines):
    if line[0] == "kill-at-step":
        kill_at(int(line[1]))
        line = line[2:]
    codes.append(main(line))
    if os.environ.get("RANK", "0") == "0":
        print("codes: " + json.dumps(codes), flush=True)
