"""RWKU's utility through lm-evaluation-harness (`eval.rwku_utility=lm_eval`): general ability as
MMLU, reasoning as BBH, truthfulness as TruthfulQA and factuality as TriviaQA are tasks lm-eval
has (`mmlu`, `bbh` with its 3-shot chain of thought, `truthfulqa_mc2`, `triviaqa`), run whole on
the model instead of RWKU's per-target samples of them. Fluency is RWKU's own (lm-eval has no
such task) and stays in the `rwku` task. The model's utility does not depend on the target, so
one run serves every target of an evaluation."""

from __future__ import annotations

from typing import Any

from forgetbench.config import RunConfig
from forgetbench.errors import ConfigError

# lm-eval's task -> the metric RWKU reports for it (its eval_*.py: MMLU and TruthfulQA MC2
# accuracies, BBH and TriviaQA exact match).
LM_EVAL_TASKS = {"mmlu": "acc", "bbh": "exact_match", "truthfulqa_mc2": "acc",
                 "triviaqa": "exact_match"}  # fmt: skip
# The `rwku` task's utility sets that lm-eval's tasks replace.
REPLACED_SUBSETS = ("mmlu", "bbh", "truthful", "triviaqa")


def uses_lm_eval(config: RunConfig) -> bool:
    return config.eval.rwku_utility == "lm_eval"


def require_lm_eval() -> None:
    """lm-eval is importable, or one ConfigError before any work."""
    from forgetbench.eval.lmeval import INSTALL_HINT

    try:
        import lm_eval  # noqa: F401
    except ImportError:
        raise ConfigError(
            "eval.rwku_utility=lm_eval scores RWKU's utility with lm-evaluation-harness, which is "
            "not installed",
            f"{INSTALL_HINT}, or drop eval.rwku_utility to score RWKU's own utility sets",
        ) from None


def lm_eval_rwku_utility(model: str, config: RunConfig) -> dict[str, Any]:
    """`lm_eval/<task>/<metric>` of the model folder or Hub id `model` on `LM_EVAL_TASKS` (each
    task's group and subtask scores too), lm-eval's data from the Hub or its cache: offline
    without it, one DataError naming what could not be fetched."""
    from forgetbench.eval.lmeval import lm_eval_utility

    require_lm_eval()
    scores = lm_eval_utility(
        model,
        list(LM_EVAL_TASKS),
        batch_size=config.eval.batch_size,  # type: ignore[arg-type]
        apply_chat_template=config.eval.lm_eval_chat_template,
        dtype=config.model.dtype,
        trust_remote_code=config.model.trust_remote_code,
        include_path=config.eval.lm_eval_include_path,
    )
    return {f"lm_eval/{key}": value for key, value in scores.items()}
