"""Evaluate a saved model on a TOFU-layout folder; used by tests in-process and, as a subprocess,
under `accelerate launch` (each process scores a shard; every process gets the gathered log).

usage: eval_script.py MODEL_DIR DATA_DIR OUT_DIR [QUESTIONS_PER_SET]

Writes OUT_DIR/rank{R}.json (the log process R holds) and OUT_DIR/layout{R}.json: the
(rank, world size) `forgetbench.eval.distributed.process_layout` reports when it is the first to
touch accelerate's state, then the layout the evaluation ran with.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from forgetbench.data.logs import EvalLog, write_eval_log  # noqa: E402
from forgetbench.data.tofu import tofu_eval_sets  # noqa: E402
from forgetbench.eval.backend import FastBackend  # noqa: E402
from forgetbench.eval.distributed import process_layout  # noqa: E402
from forgetbench.eval.tasks.tofu import evaluate_tofu  # noqa: E402
from forgetbench.modeling.loading import load_model  # noqa: E402
from forgetbench.modeling.templates import PromptTemplate  # noqa: E402

OPTIONS = {"max_new_tokens": 8, "max_length": 256}
# Small batches, so every shard runs several of them and sorting by length matters.
BATCH_SIZE = 4


def evaluate(model_dir: str | Path, data_dir: str | Path, questions: int) -> EvalLog:
    model, tokenizer = load_model(model_dir)
    sets = {
        name: records[:questions] for name, records in tofu_eval_sets(data_dir, "forget10").items()
    }
    backend = FastBackend(model, tokenizer, batch_size=BATCH_SIZE)
    return evaluate_tofu(backend, tokenizer, PromptTemplate("question_answer"), sets, **OPTIONS)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    model_dir, data_dir, out = argv[0], argv[1], Path(argv[2])
    questions = int(argv[3]) if len(argv) > 3 else 7
    bare = process_layout()  # evaluation's own view of the launch, before anything else
    layout = process_layout()
    log = evaluate(model_dir, data_dir, questions)
    rank = layout[0]
    write_eval_log(out / f"rank{rank}.json", log)
    (out / f"layout{rank}.json").write_text(json.dumps({"bare": bare, "evaluated": layout}))


if __name__ == "__main__":
    main()
