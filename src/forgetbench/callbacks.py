"""Evaluation inside your own training run: a Hugging Face `TrainerCallback` that scores the model
being trained every N optimizer steps with `forgetbench.evaluate` and logs forget quality, model
utility, forget ROUGE-L and truth ratio through the Trainer, so they reach every logger it reports to
(TensorBoard, W&B, ...) and `trainer.state.log_history`.

    callback = ForgetbenchCallback(data="data/tofu", retain_log="logs/retain90", every=50)
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    callback.attach(trainer)
    trainer.train()

It logs through `trainer.log`, which a callback can reach only through the trainer it is
attached to: a callback passed as `Trainer(callbacks=[...])` is refused when training starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from forgetbench.api import Evaluation, evaluate

# The scores logged, as `forgetbench/<score>`: the TOFU summary numbers, where they were measured.
LOGGED = ("forget_quality", "model_utility", "forget/rougeL", "forget/truth_ratio")


class ForgetbenchCallback(TrainerCallback):
    """Every `every` optimizer steps (and at the end of training), evaluate the model on `data`'s
    `split` (against `retain_log` for forget quality) and log the scores. `eval_options` are
    `forgetbench.evaluate`'s `eval.*` options; evaluating is the cost of a `forgetbench eval`,
    so keep it small (`max_questions=50, mia=False, formats=False`) for frequent steps."""

    def __init__(
        self,
        *,
        data: str | Path,
        split: str = "forget10",
        retain_log: str | Path | None = None,
        every: int = 100,
        tokenizer: Any = None,
        **eval_options: Any,
    ) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"ForgetbenchCallback every= must be an integer >= 1, got {every!r}")
        self.data, self.split, self.retain_log = data, split, retain_log
        self.every, self.tokenizer, self.eval_options = every, tokenizer, eval_options
        self.trainer: Any = None
        # (optimizer step, the evaluation): every score, not only the logged ones.
        self.evaluations: list[tuple[int, Evaluation]] = []

    def attach(self, trainer: Any) -> ForgetbenchCallback:
        """Add this callback to `trainer` and log through it."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.trainer is None:
            raise ValueError(
                "ForgetbenchCallback logs through its Trainer: create the Trainer without it, "
                "then call callback.attach(trainer)"
            )

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step % self.every == 0:
            # `trainer.log` ends in the callbacks' `on_log`, where transformers' flow callback
            # clears `control.should_log`: at a step due for the Trainer's own loss entry, that
            # entry would be dropped and its loss folded into the next one. Keep the flag.
            should_log = control.should_log
            self._evaluate(state, kwargs)
            control.should_log = should_log

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        done = {step for step, _ in self.evaluations}
        if state.global_step not in done:
            self._evaluate(state, kwargs)

    def _evaluate(self, state: Any, kwargs: dict[str, Any]) -> None:
        model = self.trainer.accelerator.unwrap_model(kwargs.get("model") or self.trainer.model)
        tokenizer = self.tokenizer or kwargs.get("processing_class")
        if tokenizer is None:
            raise ValueError(
                "ForgetbenchCallback needs the tokenizer: give it to the Trainer "
                "(processing_class=) or to the callback (tokenizer=)"
            )
        # Under a multi-process launch one process scores; the others wait for the next step.
        if not state.is_world_process_zero:
            return
        result = evaluate(
            model, tokenizer, data=self.data, split=self.split, retain_log=self.retain_log,
            **self.eval_options,
        )  # fmt: skip
        self.evaluations.append((state.global_step, result))
        logged = {
            f"forgetbench/{key}": float(result.scores[key])
            for key in LOGGED
            if isinstance(result.scores.get(key), int | float)
        }
        self.trainer.log(logged)
