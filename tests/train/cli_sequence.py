"""Run several forgetbench command lines in this one process, one Python start and one import for
all of them (under torchrun: in each process). The command lines are separated by `--`; the
exit code of each is printed, as one JSON line `codes: [...]`, by the main process.

usage: cli_sequence.py COMMAND-LINE [-- COMMAND-LINE ...]
"""

import json
import os
import sys

from forgetbench.cli import main

lines: list[list[str]] = [[]]
for argument in sys.argv[1:]:
    if argument == "--":
        lines.append([])
    else:
        lines[-1].append(argument)
codes = [main(line) for line in lines if line]
if os.environ.get("RANK", "0") == "0":
    print("codes: " + json.dumps(codes), flush=True)
