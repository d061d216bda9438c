"""TOFU's sanity checks (Maini et al., 2024, appendix E): the forget-quality KS test must tell
apart models that differ in what they know, and must not tell apart models that know the same.

Every check compares the forget-set or retain-set truth ratios of the retain model (seed 0)
with another model's by the two-sample KS test. "high p" holds when p >= ALPHA (the test
cannot tell them apart), "low p" when p < ALPHA. Utility checks compare model utility with
fixed bounds. The models are trained (or reused from the run folder's cache) on the miniature
benchmark: retain90 at two seeds, the finetuned model, the pretrained base, random weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetbench.data.logs import EvalLog
from forgetbench.metrics import tofu

ALPHA = 0.05
PRETRAINED_UTILITY_MIN = 0.1  # "high": the base model answers background questions
RANDOM_UTILITY_MAX = 0.05  # "low": random weights know nothing
REFERENCE_HIDDEN = 4096  # Llama-2-7B, TOFU's model: the random model's logit scale (random_model)

# (name, other model, set, expected): p-value expectations against the seed-0 retain model.
KS_CHECKS = (
    ("retain_vs_retain_seed_forget", "retain_seed1", "forget", "high"),
    ("retain_vs_retain_seed_retain", "retain_seed1", "retain", "high"),
    ("retain_vs_finetuned_forget", "finetuned", "forget", "low"),
    ("retain_vs_finetuned_retain", "finetuned", "retain", "high"),
    ("retain_vs_random_forget", "random", "forget", "high"),
    ("retain_vs_random_retain", "random", "retain", "low"),
    ("retain_vs_pretrained_forget", "pretrained", "forget", "high"),
    ("retain_vs_pretrained_retain", "pretrained", "retain", "low"),
)


@dataclass(frozen=True)
class Check:
    name: str
    holds: bool
    p_value: float | None
    expected: str
    value: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "holds": self.holds,
            "p_value": self.p_value,
            "expected": self.expected,
            "value": self.value,
        }


def _ratios(log: EvalLog, set_name: str, form: str):
    s = log.require(set_name, purpose="the sanity checks")
    return tofu.truth_ratio(s.paraphrased_loss, s.perturbed_loss, form=form)  # type: ignore[arg-type]


def run_checks(
    logs: dict[str, EvalLog], utilities: dict[str, float], *, form: str = "tofu_code"
) -> list[Check]:
    """`logs`/`utilities` keyed by retain, retain_seed1, finetuned, pretrained, random."""
    checks = []
    for name, other, set_name, expected in KS_CHECKS:
        _, p = tofu.ks_test(
            _ratios(logs[other], set_name, form), _ratios(logs["retain"], set_name, form)
        )
        holds = p >= ALPHA if expected == "high" else p < ALPHA
        checks.append(
            Check(name, holds, p, f"{expected} p ({'>=' if expected == 'high' else '<'} {ALPHA})")
        )
    u = utilities["pretrained"]
    checks.append(
        Check(
            "pretrained_utility_high",
            u >= PRETRAINED_UTILITY_MIN,
            None,
            f"utility >= {PRETRAINED_UTILITY_MIN}",
            u,
        )
    )
    u = utilities["random"]
    checks.append(
        Check(
            "random_utility_low",
            u <= RANDOM_UTILITY_MAX,
            None,
            f"utility <= {RANDOM_UTILITY_MAX}",
            u,
        )
    )
    return checks


def random_model(tokenizer: Any, *, scale: str, seed: int) -> Any:
    """Random weights with the logit spread of a randomly initialised LLM.

    With the usual N(0, 0.02) init, the logits' standard deviation is 0.02 * sqrt(hidden): about
    1.3 for Llama-2-7B (hidden 4096) but 0.2 for a tiny model (hidden 96), whose next-token
    distribution is then nearly uniform and every truth ratio 1 +- 0.03. A point mass at 1 is
    what the KS test tells apart from any retain model, so the tiny random model would fail
    "retain vs random on forget: high p" for its width, not for what it knows. Scaling the final
    norm's gain by sqrt(REFERENCE_HIDDEN / hidden) gives the 7B's logit spread and changes nothing
    else (measured at tiny scale: p 0.034 unscaled, 0.57 scaled; README, "Sanity checks")."""
    import torch

    from forgetbench.modeling import build_tiny_model

    model = build_tiny_model(tokenizer, scale=scale, seed=seed)
    with torch.no_grad():
        model.model.norm.weight.mul_((REFERENCE_HIDDEN / model.config.hidden_size) ** 0.5)
    return model


def sanity_models(
    run_dir: Path, *, scale: str, seed: int, progress: bool
) -> tuple[Path, dict[str, Path]]:
    """(data folder, model folders by role), training what the cache does not hold."""
    from transformers import AutoTokenizer

    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.modeling import save_model
    from forgetbench.train.mini import build_tokenizer, finetune_mini, pretrain_base

    data = run_dir / "data"
    generate_mini(data, scale=scale, seed=seed)
    base = pretrain_base(run_dir, data, scale=scale, seed=seed, progress=progress).model_dir
    models = {
        "pretrained": base,
        "finetuned": finetune_mini(
            run_dir, data, base, split="full", scale=scale, seed=seed, progress=progress
        ).model_dir,
        "retain": finetune_mini(
            run_dir, data, base, split="retain90", scale=scale, seed=seed, progress=progress
        ).model_dir,
        "retain_seed1": finetune_mini(
            run_dir, data, base, split="retain90", scale=scale, seed=seed + 1, progress=progress
        ).model_dir,
    }
    tokenizer_dir = build_tokenizer(run_dir, data, scale=scale)
    name = f"random-{scale}-seed{seed}-logits{REFERENCE_HIDDEN}-{tokenizer_dir.name}"
    random_dir = run_dir / "models" / name / "model"
    if not (random_dir / "config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        save_model(random_model(tokenizer, scale=scale, seed=seed), tokenizer, random_dir)
    models["random"] = random_dir
    return data, models


def sanity_study(
    run_dir: Path, *, scale: str, seed: int, eval_options: Any, progress: bool
) -> dict[str, Any]:
    """Train or reuse the five models, evaluate each once (TOFU metrics, cached), run the checks."""
    import time

    from forgetbench.eval.runner import (
        cached_evaluation,
        evaluate_model,
        evaluation_key,
        write_evaluation,
    )
    from forgetbench.modeling import TINY_SIZES, load_model
    from forgetbench.train.mini import TEMPLATE

    start = time.perf_counter()
    data, models = sanity_models(run_dir, scale=scale, seed=seed, progress=progress)
    options = eval_options.model_copy(update={"formats": False, "mia": False, "lume": False})
    logs, utilities = {}, {}
    for role, model_dir in models.items():
        out = run_dir / "eval" / f"sanity-{role}"
        key = evaluation_key(model_dir, data, "forget10", options, "mini")
        cached = cached_evaluation(out, key)
        if cached is None:
            model, tokenizer = load_model(model_dir)
            log, scores, extra = evaluate_model(
                model, tokenizer, TEMPLATE, data=data, split="forget10", benchmark="mini",
                options=options, max_length=TINY_SIZES[scale].max_positions,
            )  # fmt: skip
            write_evaluation(out, key, log, scores, extra, {"model": str(model_dir), "role": role})
            cached = (log, scores)
        logs[role], utilities[role] = cached[0], cached[1]["model_utility"]
    checks = run_checks(logs, utilities, form=options.truth_ratio_form)
    return {
        "checks": [c.as_dict() for c in checks],
        "all_hold": all(c.holds for c in checks),
        "utilities": utilities,
        "models": {role: str(path) for role, path in models.items()},
        "scale": scale,
        "seconds": round(time.perf_counter() - start, 1),
    }
