"""The models TOFU's sanity checks compare (forgetbench.eval.sanity), built on the miniature:
retain90 at two seeds, the finetuned model, the pretrained base and random weights, each
evaluated once (TOFU metrics, cached)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from forgetbench.config_sections import EvalConfig
from forgetbench.eval.sanity import run_checks
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.loading import save_model
from forgetbench.study.evaluate import evaluate_cached
from forgetbench.study.inputs import Study
from forgetbench.study.miniature import Miniature

REFERENCE_HIDDEN = 4096  # Llama-2-7B, TOFU's model: the random model's logit scale (random_model)


def random_model(tokenizer: Any, *, scale: str, seed: int) -> Any:
    """Random weights with the logit spread of a randomly initialised LLM.

    With the usual N(0, 0.02) init, the logits' standard deviation is 0.02 * sqrt(hidden): about
    1.3 for Llama-2-7B (hidden 4096) but 0.2 for a tiny model (hidden 96), whose next-token
    distribution is then nearly uniform and every truth ratio 1 +- 0.03. A point mass at 1 is
    what the KS test tells apart from any retain model, so the tiny random model would fail
    "retain vs random on forget: high p" for its width, not for what it knows. Scaling the final
    norm's gain by sqrt(REFERENCE_HIDDEN / hidden) gives the 7B's logit spread and changes nothing
    else (measured at tiny scale: p 0.034 unscaled, 0.57 scaled; docs/commands.md, "sanity")."""
    model = build_tiny_model(tokenizer, scale=scale, seed=seed)
    with torch.no_grad():
        model.model.norm.weight.mul_((REFERENCE_HIDDEN / model.config.hidden_size) ** 0.5)
    return model


def sanity_models(mini: Miniature) -> dict[str, Path]:
    """Model folders by role, training what the cache does not hold."""
    models = {
        "pretrained": mini.base.model_dir,
        "finetuned": mini.model("full").model_dir,
        "retain": mini.model("retain90").model_dir,
        "retain_seed1": mini.model("retain90", seed=mini.seed + 1).model_dir,
    }
    tokenizer_dir = mini.tokenizer_dir()
    name = f"random-{mini.scale}-seed{mini.seed}-logits{REFERENCE_HIDDEN}-{tokenizer_dir.name}"
    random_dir = mini.out / "models" / name / "model"
    if not (random_dir / "config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        save_model(random_model(tokenizer, scale=mini.scale, seed=mini.seed), tokenizer, random_dir)
    models["random"] = random_dir
    return models


def sanity_study(
    run_dir: Path, *, scale: str, seed: int, eval_config: EvalConfig, progress: bool
) -> dict[str, Any]:
    """Train or reuse the five models, evaluate each once (TOFU metrics, cached), run the checks."""
    start = time.perf_counter()
    mini = Miniature(run_dir, scale, seed, progress=progress)
    models = sanity_models(mini)
    study = Study(mini.data, models["finetuned"], models["pretrained"], {"forget10": models["retain"]},
                  mini.template, mini.max_length, mini.unlearn_defaults(), benchmark="mini")  # fmt: skip
    # The checks read TOFU's logs and model utility alone.
    tofu_only = eval_config.model_copy(
        update={"formats": False, "mia": False, "lume": False, "probes": False}
    )
    logs, utilities = {}, {}
    for role, model_dir in models.items():
        evaluated = evaluate_cached(
            model_dir, study, split="forget10", eval_config=tofu_only,
            folder=run_dir / "eval" / f"sanity-{role}",
            info={"model": str(model_dir), "role": role},
        )  # fmt: skip
        logs[role], utilities[role] = evaluated.log, evaluated.scores["model_utility"]
    checks = run_checks(logs, utilities, form=eval_config.truth_ratio_form)
    return {
        "checks": [c.as_dict() for c in checks],
        "all_hold": all(c.holds for c in checks),
        "utilities": utilities,
        "models": {role: str(path) for role, path in models.items()},
        "scale": scale,
        "seconds": round(time.perf_counter() - start, 1),
    }
