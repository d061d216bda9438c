"""The suite's one two-process launch for the evaluation and the training loop (CI time: a launch
starts three interpreters, 12 s of CPU): in each process, the evaluation of
tests/eval/eval_script.py first (its test checks what the evaluation sees of the launch before
anything else touched accelerate's state), then the finetunes of tests/train/finetune_script.py,
the last of which may stop the launch as a kill would.

usage: two_process_script.py EVAL-ARGUMENT... -- FINETUNE-ARGUMENT...
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "eval"), str(HERE / "train")]

split = sys.argv.index("--")
import eval_script  # noqa: E402

eval_script.main(sys.argv[1:split])
import finetune_script  # noqa: E402

finetune_script.main(sys.argv[split + 1 :])
