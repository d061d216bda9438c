"""What a study runs on, built or loaded in one place: the data, the base model, the finetuned
model and the retain models, for the built-in miniature (trained here, each stage cached by its
inputs) or for a Hugging Face model with TOFU-layout data (loaded as given).

Every command that needs models (`run`, `unlearn`, `finetune`, `sanity`, `bench`) gets them from
`Miniature` or `resolve`, so the generate -> pretrain -> finetune -> retain chain and the
miniature-or-Hugging-Face branch exist once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from forgetbench.config import RunConfig, TrainConfig
from forgetbench.errors import ConfigError
from forgetbench.study.pool import InlinePool

UnlearnDefaults = Callable[[str], tuple[Any, dict[str, object]]]


@dataclass(frozen=True)
class Study:
    """The models and data a study runs on, resolved once."""

    data: Path  # the benchmark folder (the miniature's root, or a TOFU-layout folder)
    finetuned: Path
    base: Path | None
    retain: dict[str, Path]  # forget split -> its retain model
    template: Any  # forgetbench.modeling.PromptTemplate
    max_length: int
    unlearn_defaults: UnlearnDefaults  # method name -> (LoopConfig, options) for this model
    benchmark: str = "tofu"  # the evaluation's data layout: "mini" or "tofu"


@dataclass(frozen=True)
class Variant:
    """One finetuned (`full`) or retain (`retainNN`) model of the miniature at its own seed and,
    when set, its own finetuning epochs and learning rate (None: the study's)."""

    split: str
    seed: int | None = None
    epochs: int | None = None
    lr: float | None = None


@dataclass
class Miniature:
    """The built-in benchmark's stages in `out`: data, tokenizer, base, and any finetuned or
    retain model. A stage trains only if its inputs' cache key has no finished folder."""

    out: Path
    scale: str
    seed: int = 0
    train: TrainConfig | None = None  # the user's train.* options for finetuned/retain models
    progress: bool = True
    timings: dict[str, float] = field(default_factory=dict)  # wall time of this run per stage

    @cached_property
    def data(self) -> Path:
        from forgetbench.benchmarks.mini import generate_mini
        from forgetbench.benchmarks.mini.generate import GENERATOR_VERSION
        from forgetbench.cache import shared_entry

        started = time.perf_counter()
        folder = self.out / "data"
        # generate_mini checks every file against the manifest it computes, so an entry of an
        # older generator with the same version string would be rewritten, not trusted.
        name = f"mini-{self.scale}-seed{self.seed}-v{GENERATOR_VERSION}"
        with shared_entry(folder, kind="data", name=name):
            generate_mini(folder, scale=self.scale, seed=self.seed)
        self.timings["data"] = time.perf_counter() - started
        return folder

    @cached_property
    def base(self) -> Any:  # StageResult
        from forgetbench.train.mini import pretrain_base

        data = self.data
        started = time.perf_counter()
        base = pretrain_base(
            self.out, data, scale=self.scale, seed=self.seed, progress=self.progress
        )
        self.timings["pretrain"] = time.perf_counter() - started
        return base

    def tokenizer_dir(self) -> Path:
        from forgetbench.train.mini import build_tokenizer

        return build_tokenizer(self.out, self.data, scale=self.scale)

    def model(
        self,
        split: str,
        *,
        seed: int | None = None,
        epochs: int | None = None,
        lr: float | None = None,
    ) -> Any:  # StageResult
        """`full` -> the finetuned model; `retainNN` -> a retain model. `seed` (default the
        study's), `epochs` and `lr` (default the user's train.* over the recipe) make a variant:
        another cached stage, as the meta-evaluation's pools need."""
        variant = Variant(split, seed, epochs, lr)
        options = self._options(progress=self.progress, variant=variant)
        return _train_job(self.out, self.data, self.base.model_dir, split, options)[0]

    def models(self, stages: dict[str, str | Variant], pool: Any) -> dict[str, Any]:
        """Finetuned/retain models (stage label -> split, or a `Variant` of one) that only need
        the base, trained side by side in `pool`; each label's wall time goes to `timings`."""
        base = self.base.model_dir
        # Progress bars from parallel workers would interleave; in this process they show.
        progress = self.progress and isinstance(pool, InlinePool)
        variants = {
            label: stage if isinstance(stage, Variant) else Variant(stage)
            for label, stage in stages.items()
        }
        jobs = {
            label: pool.submit(
                _train_job,
                self.out,
                self.data,
                base,
                variant.split,
                self._options(progress=progress, variant=variant),
            )
            for label, variant in variants.items()
        }
        trained = {label: job.result() for label, job in jobs.items()}
        self.timings.update({label: seconds for label, (_, seconds) in trained.items()})
        return {label: stage for label, (stage, _) in trained.items()}

    def study(self, finetuned: Path, retain: dict[str, Path]) -> Study:
        """The study on this miniature's data and base, with the given finetuned model and retain
        model per forget split."""
        return Study(
            self.data,
            finetuned,
            self.base.model_dir,
            retain,
            self.template,
            self.max_length,
            self.unlearn_defaults(),
            benchmark="mini",
        )

    def recipe(self) -> tuple[int, float]:
        """The finetuned and retain models' (epochs, learning rate): the miniature's recipe with
        the user's train.* on top; a `Variant` departs from these."""
        from forgetbench.train.mini import mini_finetune_config

        loop, _ = mini_finetune_config(self.scale, seed=self.seed, train=self.train)
        return loop.epochs, loop.lr

    def _options(self, *, progress: bool, variant: Variant | None = None) -> dict[str, Any]:
        variant = variant or Variant("full")
        seed = self.seed if variant.seed is None else variant.seed
        train = self.train
        changed = {
            k: v for k, v in (("epochs", variant.epochs), ("lr", variant.lr)) if v is not None
        }
        if changed:
            # Validated like the user's own options, and marked as set, so the recipe takes them.
            given = train.model_dump(include=train.model_fields_set) if train else {}
            train = TrainConfig.model_validate({**given, **changed})
        return {"scale": self.scale, "seed": seed, "train": train, "progress": progress}

    @property
    def template(self) -> Any:
        from forgetbench.train.mini import TEMPLATE

        return TEMPLATE

    @property
    def max_length(self) -> int:
        from forgetbench.modeling import TINY_SIZES

        return TINY_SIZES[self.scale].max_positions

    def unlearn_defaults(self) -> UnlearnDefaults:
        from forgetbench.modeling import TINY_SIZES
        from forgetbench.train.mini import mini_unlearn_defaults

        return partial(mini_unlearn_defaults, layers=TINY_SIZES[self.scale].layers)


def _train_job(
    out: Path, data_dir: Path, base_dir: Path, split: str, options: dict[str, Any]
) -> tuple[Any, float]:
    # A module-level function: process pools pickle it by name.
    from forgetbench.train.mini import finetune_mini

    started = time.perf_counter()
    stage = finetune_mini(out, data_dir, base_dir, split=split, **options)
    return stage, time.perf_counter() - started


def _external_defaults(name: str) -> tuple[Any, dict[str, object]]:
    # Module level, not a lambda: a Study travels to worker processes pickled.
    from forgetbench.study.unlearn import external_unlearn_defaults

    return external_unlearn_defaults()


def is_miniature(config: RunConfig, model: str | None, data: str | None) -> bool:
    return config.benchmark.name == "mini" and model is None and data is None


def miniature(config: RunConfig, out: Path, *, progress: bool) -> Miniature:
    return Miniature(out, config.scale, config.seed, config.train, progress)


def resolve(
    config: RunConfig,
    out: Path,
    *,
    model: str | None,
    data: str | None,
    progress: bool,
    forget_splits: Iterable[str] = (),
    pool: Any = None,
    command: str = "run",
) -> tuple[Study, dict[str, float]]:
    """The study's models: the miniature's (trained or reused in `out`, with a retain model per
    forget split in `forget_splits`) or the given model and data. Returns the study and the wall
    time of each stage this run."""
    from forgetbench.study.unlearn import retain_split_for

    if is_miniature(config, model, data):
        mini = miniature(config, out, progress=progress)
        splits = list(forget_splits)
        stages = {"finetune": "full", **{f"retain_{s}": retain_split_for(s) for s in splits}}
        trained = mini.models(stages, pool or InlinePool())
        study = mini.study(
            trained["finetune"].model_dir,
            {split: trained[f"retain_{split}"].model_dir for split in splits},
        )
        return study, mini.timings
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
    from forgetbench.modeling import load_tokenizer, resolve_template

    tokenizer = load_tokenizer(model, trust_remote_code=config.model.trust_remote_code)
    study = Study(
        Path(data),
        Path(model),
        None,
        {},
        resolve_template(config.model.template, tokenizer, model),
        config.train.max_length,
        _external_defaults,
        # The default benchmark name: a TOFU-layout folder that may carry the miniature's
        # formats and LUME folders beside it.
        benchmark="mini" if config.benchmark.name == "mini" else "tofu",
    )
    return study, {}
