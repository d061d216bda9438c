"""The built-in miniature's stages in a study's folder, each trained only if its inputs' cache
key has no finished folder: the data, the tokenizer, the base model, and any finetuned, retain or
shadow model (`Miniature`), with a `Variant` of one at its own seed, epochs or learning rate (the
meta-evaluation's pools); `miniature` makes one from a config."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from forgetbench.benchmarks import mini as mini_data
from forgetbench.benchmarks.mini.generate import GENERATOR_VERSION
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.cache import shared_entry
from forgetbench.config import RunConfig
from forgetbench.config_names import retain_split_for
from forgetbench.config_sections import TrainConfig
from forgetbench.study.inputs import Study, UnlearnDefaults
from forgetbench.study.pool import InlinePool
from forgetbench.study.shadows import shadow_candidates

# The miniature's stages are called through their modules, looked up when a stage runs, so that a
# stage can be replaced as a whole (the command-wiring tests replace the expensive ones).
from forgetbench.train import mini as mini_training


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
    size: str = "auto"  # model.size: the built-in model's shape
    timings: dict[str, float] = field(default_factory=dict)  # wall time of this run per stage
    peak_gpu_mib: dict[str, float] = field(default_factory=dict)  # per trained stage, on a GPU

    @cached_property
    def data(self) -> Path:
        started = time.perf_counter()
        folder = self.out / "data"
        # generate_mini checks every file against the manifest it computes, so an entry of an
        # older generator with the same version string would be rewritten, not trusted.
        name = f"mini-{self.scale}-seed{self.seed}-v{GENERATOR_VERSION}"
        with shared_entry(folder, kind="data", name=name):
            mini_data.generate_mini(folder, scale=self.scale, seed=self.seed)
        self.timings["data"] = time.perf_counter() - started
        return folder

    @cached_property
    def base(self) -> Any:  # StageResult

        data = self.data
        started = time.perf_counter()
        base = mini_training.pretrain_base(
            self.out, data, scale=self.scale, seed=self.seed, progress=self.progress,
            size=self.size,
        )  # fmt: skip
        self.timings["pretrain"] = time.perf_counter() - started
        if base.peak_gpu_mib is not None:
            self.peak_gpu_mib["pretrain"] = base.peak_gpu_mib
        return base

    def tokenizer_dir(self) -> Path:
        return mini_training.build_tokenizer(self.out, self.data, scale=self.scale)

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

    def models(
        self, stages: dict[str, str | Variant | tuple[str, dict[str, Any]]], pool: Any
    ) -> dict[str, Any]:
        """Finetuned/retain/shadow models that only need the base, trained side by side in
        `pool`: stage label -> split, a `Variant` of one, or (split, extra options of
        `finetune_mini`) for a shadow model. Each label's wall time goes to `timings`."""
        base = self.base.model_dir
        # Progress bars from parallel workers would interleave; in this process they show.
        progress = self.progress and isinstance(pool, InlinePool)
        jobs = {}
        for label, stage in stages.items():
            more: dict[str, Any] = {}
            if isinstance(stage, tuple):
                stage, more = stage
            variant = stage if isinstance(stage, Variant) else Variant(stage)
            options = {**self._options(progress=progress, variant=variant), **more}
            jobs[label] = pool.submit(_train_job, self.out, self.data, base, variant.split, options)
        trained = {label: job.result() for label, job in jobs.items()}
        self.timings.update({label: seconds for label, (_, seconds) in trained.items()})
        self.peak_gpu_mib.update(
            {label: s.peak_gpu_mib for label, (s, _) in trained.items() if s.peak_gpu_mib}
        )
        return {label: stage for label, (stage, _) in trained.items()}

    def shadow_stages(self, pool: str, count: int) -> dict[str, tuple[str, dict[str, Any]]]:
        """The `count` shadow models drawn from forget split `pool`'s candidates (its forget and
        holdout questions) as `models` stages: each a retain model (same recipe, `retainNN` of
        `pool`) trained also on its seeded half of the candidates (`shadow_memberships`); every
        split whose `shadow_pool` is `pool` reads them. Empty without a holdout."""
        candidates = shadow_candidates(self.data / "tofu", pool)
        if count == 0 or candidates is None:
            return {}
        masks = mini_training.shadow_memberships(len(candidates), count, seed=self.seed, split=pool)
        return {
            f"shadow_{pool}_{i}": (
                retain_split_for(pool),
                {
                    "extra": tuple(r for r, inside in zip(candidates, mask, strict=True) if inside),
                    "name": f"shadow-{pool}",
                },
            )
            for i, mask in enumerate(masks)
        }

    def study(
        self,
        finetuned: Path,
        retain: dict[str, Path],
        shadows: dict[str, list[Path]] | None = None,
    ) -> Study:
        """The study on this miniature's data and base, with the given finetuned model, retain
        model per forget split and shadow models' files per split."""
        return Study(
            self.data,
            finetuned,
            self.base.model_dir,
            retain,
            self.template,
            self.max_length,
            self.unlearn_defaults(),
            benchmark="mini",
            shadows=shadows or {},
            finetune_lr=self.finetune_loop().lr,
            finetune_loop=self.finetune_loop(),
            unlearn_preset="mini",
        )

    def recipe(self) -> tuple[int, float]:
        """The finetuned and retain models' (epochs, learning rate): the miniature's recipe with
        the user's train.* on top; a `Variant` departs from these."""
        loop = self.finetune_loop()
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

    def finetune_loop(self) -> Any:  # LoopConfig
        """The finetuned and retain models' training loop (the recipe under the user's train.*)."""
        return mini_training.mini_finetune_config(self.scale, seed=self.seed, train=self.train)[0]

    @property
    def template(self) -> Any:
        return mini_training.TEMPLATE

    @property
    def max_length(self) -> int:
        return get_scale(self.scale).model.max_positions

    def unlearn_defaults(self) -> UnlearnDefaults:
        return partial(
            mini_training.mini_unlearn_defaults, layers=get_scale(self.scale).model.layers
        )


def _train_job(
    out: Path, data_dir: Path, base_dir: Path, split: str, options: dict[str, Any]
) -> tuple[Any, float]:
    # A module-level function: process pools pickle it by name.

    started = time.perf_counter()
    stage = mini_training.finetune_mini(out, data_dir, base_dir, split=split, **options)
    return stage, time.perf_counter() - started


def miniature(config: RunConfig, out: Path, *, progress: bool) -> Miniature:
    return Miniature(out, config.scale, config.seed, config.train, progress, size=config.model.size)
