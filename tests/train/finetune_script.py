"""Run toy finetunes; used by tests as a subprocess (kill/resume) and under `accelerate launch`.

usage: finetune_script.py RUN [then RUN ...]
  RUN: OUT_DIR PER_DEVICE_BATCH [CHECKPOINT_EVERY] [STEP_DELAY_S] [--stop-after STEP] [--rank-noise]

The runs go one after the other in this process (one interpreter start and one launch for all:
CI time); each starts from the same seeded model, so a run's numbers do not depend on the runs
before it.

--stop-after: every process exits at once after that step (and its checkpoint), as if killed.
--rank-noise: each process scales its loss by noise from its own torch RNG (seeded by rank), so a
resumed run matches an uninterrupted one only if every process's RNG was restored.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from forgetbench.methods._terms import per_sample_nll  # noqa: E402
from forgetbench.modeling.builtin import build_tiny_model  # noqa: E402
from forgetbench.modeling.encoding import collate  # noqa: E402
from forgetbench.modeling.forward import forward_logits  # noqa: E402
from forgetbench.modeling.loading import save_model  # noqa: E402
from forgetbench.train.loop import train_loop  # noqa: E402
from forgetbench.train.loop_config import LoopConfig  # noqa: E402
from toy import toy_examples, toy_tokenizer  # noqa: E402


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("per_device", type=int)
    parser.add_argument("checkpoint_every", type=int, nargs="?", default=0)
    parser.add_argument("delay", type=float, nargs="?", default=0.0)
    parser.add_argument("--stop-after", type=int)
    parser.add_argument("--rank-noise", action="store_true")
    args = parser.parse_args(argv)
    from accelerate import PartialState

    # cpu=True as the loop's Accelerator: a bare PartialState() on a machine without GPUs is one
    # undistributed process, and the loop would inherit that.
    state = PartialState(cpu=not torch.cuda.is_available())
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    if args.rank_noise:
        torch.manual_seed(1000 + state.process_index)
    config = LoopConfig(
        lr=3e-3,
        epochs=6,
        batch_size=8,
        per_device_batch_size=args.per_device,
        weight_decay=0.01,
        checkpoint_every=args.checkpoint_every,
    )

    def loss_fn(m, batch):
        loss = per_sample_nll(forward_logits(m, batch), batch["labels"]).mean()
        return loss * (1 + 0.1 * torch.rand(())) if args.rank_noise else loss

    def after_step(step, _model):
        time.sleep(args.delay)  # lets the kill test land between checkpoints
        if step == args.stop_after:
            os._exit(3)  # no cleanup, no final model: what a kill leaves

    train_loop(
        model,
        toy_examples(),
        loss_fn=loss_fn,
        collate_fn=lambda b: collate(b, pad_id=tokenizer.pad_token_id),
        config=config,
        out_dir=args.out,
        progress=False,
        on_step=after_step if args.delay or args.stop_after else None,
    )
    if state.is_main_process:
        save_model(model, tokenizer, args.out / "model")


def main(argv: list[str] | None = None) -> None:
    runs: list[list[str]] = [[]]
    for argument in sys.argv[1:] if argv is None else argv:
        if argument == "then":
            runs.append([])
        else:
            runs[-1].append(argument)
    for argv in runs:
        run(argv)


if __name__ == "__main__":
    main()
