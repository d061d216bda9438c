"""The one place that builds or loads a study's models (`resolve`): the built-in miniature's,
trained or reused in the study's folder with a retain model per forget split and its shadow
models, or the user's model and TOFU-layout data, loaded as given."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from forgetbench.config import RunConfig
from forgetbench.config_names import FORGET_SPLITS, retain_split_for
from forgetbench.errors import ConfigError, UnknownNameError
from forgetbench.modeling.loading import load_tokenizer
from forgetbench.modeling.templates import resolve_template
from forgetbench.study.given import given_data, given_model, is_miniature
from forgetbench.study.inputs import Study, external_defaults
from forgetbench.study.miniature import Miniature, miniature
from forgetbench.study.pool import InlinePool
from forgetbench.study.shadows import shadow_candidates, shadow_pool, write_shadow


def resolve(
    config: RunConfig,
    out: Path,
    *,
    progress: bool,
    forget_splits: Iterable[str] = (),
    pool: Any = None,
    command: str = "run",
    with_shadows: bool = True,
    mini: Miniature | None = None,
    retain_only: Iterable[str] = (),
    builtin: bool = False,
) -> tuple[Study, dict[str, float]]:
    """The study's models: the miniature's (trained or reused in `out`, with a retain model per
    forget split in `forget_splits`, and its shadow models unless `with_shadows` is off: only
    the shadow attacks of an evaluation read them) or the given model and data. Returns the study
    and the wall time of each stage this run. `mini`: the caller's `miniature(config, out)`, when
    it already read the miniature's data (its stages' times are then this run's too).
    `retain_only`: more forget splits that need their retain model and no shadow models (a
    sequence of requests' unions). `builtin`: the miniature's models even when the config
    names a model of the user's (`forgetbench attack` of one on the miniature's data)."""

    miniature_data = config.benchmark.name == "mini" and given_data(config) is None
    if is_miniature(config) or (builtin and miniature_data):
        if config.study.mia_shadow_models:
            raise ConfigError(
                "study.mia_shadow_models names shadow models for a study of your own model; "
                "the built-in miniature trains its own",
                "drop study.mia_shadow_models, and set eval.mia_shadows to choose how many",
            )
        mini = mini or miniature(config, out, progress=progress)
        splits = list(forget_splits)
        stages: dict[str, Any] = {"finetune": "full"}
        stages.update({f"retain_{s}": retain_split_for(s) for s in splits})
        more = [s for s in retain_only if s not in splits]
        stages.update({f"retain_{s}": retain_split_for(s) for s in more})
        shadows = config.eval.mia_shadows if config.eval.mia and with_shadows else 0
        tofu = mini.data / "tofu"
        pools = {s: shadow_pool(tofu, s) for s in splits} if shadows else {}
        shadow_stages = {p: mini.shadow_stages(p, shadows) for p in set(pools.values())}
        for per_pool in shadow_stages.values():
            stages.update(per_pool)
        trained = mini.models(stages, pool or InlinePool())
        shadow_files = {}
        for split, shadow_from in pools.items():
            if not shadow_stages[shadow_from]:
                continue
            # A shadow's members, as the split sees them: its half of the pool, on the split's
            # candidates (the pairs stay complementary on any subset).
            candidates = {r.question for r in shadow_candidates(tofu, split) or ()}
            shadow_files[split] = [
                write_shadow(
                    out / "mia" / split / f"shadow-{i}.json",
                    trained[label].model_dir,
                    (r.question for r in options["extra"] if r.question in candidates),
                    split=split,
                    pool=shadow_from,
                    index=i,
                    seed=config.seed,
                )  # fmt: skip
                for i, (label, (_, options)) in enumerate(shadow_stages[shadow_from].items())
            ]
        study = mini.study(
            trained["finetune"].model_dir,
            {split: trained[f"retain_{split}"].model_dir for split in [*splits, *more]},
            shadows=shadow_files,
        )
        return study, mini.timings
    model, data = given_model(config), given_data(config)
    if model is None or data is None:
        raise ConfigError(
            f"forgetbench {command} needs both --model and --data (a TOFU-layout folder or "
            "Hugging Face dataset id)",
            "or neither, for the built-in miniature study (--benchmark mini)",
        )
    if config.benchmark.name == "lume":
        raise ConfigError(
            f"forgetbench {command} --benchmark lume is not supported yet",
            "evaluate LUME models with 'forgetbench eval --benchmark lume'",
        )
    for split in config.study.mia_shadow_models:
        if split not in FORGET_SPLITS:
            raise UnknownNameError("split in study.mia_shadow_models", split, FORGET_SPLITS)
    forget_splits = list(forget_splits)

    tokenizer = load_tokenizer(model, trust_remote_code=config.model.trust_remote_code)
    study = Study(
        Path(data),
        Path(model),
        None,
        {},
        resolve_template(config.model.template, tokenizer, model),
        config.train.max_length,
        external_defaults,
        # The default benchmark name: a TOFU-layout folder that may carry the miniature's
        # formats and LUME folders beside it.
        benchmark="mini" if config.benchmark.name == "mini" else "tofu",
        finetune_lr=config.train.lr,
        shadows={
            split: [Path(p) for p in files]
            for split, files in config.study.mia_shadow_models.items()
            if split in forget_splits
        },
    )
    return study, {}
