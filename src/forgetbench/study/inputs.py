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

from forgetbench.benchmarks import mini as mini_data
from forgetbench.benchmarks.mini.generate import GENERATOR_VERSION
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.cache import shared_entry
from forgetbench.config import FORGET_SPLITS, RunConfig, TrainConfig, retain_split_for
from forgetbench.data.tofu import load_tofu
from forgetbench.errors import ConfigError, DataError, UnknownNameError
from forgetbench.io import atomic_write_json, read_json
from forgetbench.modeling import load_tokenizer, resolve_template
from forgetbench.study.given import given_data, given_model, is_miniature
from forgetbench.study.pool import InlinePool

# The miniature's stages are called through their modules, looked up when a stage runs, so that a
# stage can be replaced as a whole (the command-wiring tests replace the expensive ones).
from forgetbench.train import mini as mini_training
from forgetbench.train.loop import LoopConfig
from forgetbench.train.presets import unlearn_preset

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
    # forget split -> shadow models for LiRA / RMIA, each a JSON file {"model": folder,
    # "members": [question, ...]} (`read_shadow`); trained here for the miniature.
    shadows: dict[str, list[Path]] = field(default_factory=dict)
    # The learning rate the finetuned model was trained with: the relearning attack's default.
    finetune_lr: float | None = None
    # The finetuned model's training loop when this study trained it (the miniature's recipe
    # under the user's train.*): results record it. None for a model of the user's.
    finetune_loop: LoopConfig | None = None
    # The preset (forgetbench/presets) that `unlearn_defaults` reads: what results record.
    unlearn_preset: str = "tofu"
    # A document benchmark's name (`forgetbench.benchmarks.corpus`): unlearning then trains on
    # its forget and retain documents, cut into chunks, instead of the data's TOFU splits.
    documents: str | None = None


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


def shadow_candidates(tofu: Path, split: str) -> list[Any] | None:
    """The records the MIA task scores for forget split `split`, in its order: the forget
    questions (members of the finetuned model), then the holdout's; None without a holdout."""
    holdout = split.replace("forget", "holdout")
    if not (tofu / f"{holdout}.json").is_file():
        return None
    return [*load_tofu(tofu, split), *load_tofu(tofu, holdout)]


def shadow_pool(tofu: Path, split: str) -> str:
    """The forget split whose shadow models serve `split`: the one with the most candidates among
    those whose candidates include all of `split`'s and whose retain set is inside `split`'s
    (ties: the later split). TOFU's splits nest (forget01 in forget05 in forget10, holdouts
    likewise, retain90 in retain95 in retain99), so one set of shadows trained on retain90 plus
    halves of forget10 and holdout10 serves all three: in Carlini et al. (2022)'s setting a
    shadow is a model trained on a random half of a pool that holds the target's candidates, and
    the pool here is the largest split's. The choice depends on the data only, not on which
    splits a study runs, so a split's LiRA and RMIA are the same in any study."""

    def questions(name: str) -> set[str]:
        return {r.question for r in load_tofu(tofu, name)}

    wanted = shadow_candidates(tofu, split)
    if wanted is None:
        return split
    wanted_questions = {r.question for r in wanted}
    retain = questions(retain_split_for(split))
    eligible = [(len(wanted), FORGET_SPLITS.index(split), split)]
    for other in FORGET_SPLITS:
        pool = shadow_candidates(tofu, other) if other != split else None
        if pool is None or not (tofu / f"{retain_split_for(other)}.json").is_file():
            continue
        if wanted_questions <= {r.question for r in pool} and (
            questions(retain_split_for(other)) <= retain
        ):
            eligible.append((len(pool), FORGET_SPLITS.index(other), other))
    return max(eligible)[2]


def split_files(split: str) -> tuple[str, ...]:
    """The TOFU-layout files a study of forget split `split` reads for that split (the rest of
    the data, Real Authors, World Facts, formats, LUME, is the same for every split)."""

    holdout = split.replace("forget", "holdout")
    return (f"{split}.json", f"{split}_perturbed.json", f"{holdout}.json",
            f"{retain_split_for(split)}.json")  # fmt: skip


def same_data_splits(tofu: Path, splits: Iterable[str]) -> dict[str, str]:
    """`{split: computed}` for each of `splits` whose files (`split_files`) are byte for byte
    those of another of `splits`: the study computes the group's last split (TOFU order, so a
    forget10-only study shares its cache entries) and reports its rows under each name. At the
    tiny scale forget01, forget05 and forget10 are all one author, the same questions: computing
    them once is a third of the work, and nothing a split's rows hold can differ (every seed, the
    attacks' halves and the shadow models depend on the data, not on the split's name)."""

    def contents(split: str) -> tuple[bytes | None, ...]:
        return tuple(
            (tofu / name).read_bytes() if (tofu / name).is_file() else None
            for name in split_files(split)
        )

    groups: dict[tuple[bytes | None, ...], list[str]] = {}
    for split in splits:
        groups.setdefault(contents(split), []).append(split)
    same = {}
    for members in groups.values():
        computed = max(members, key=FORGET_SPLITS.index)
        same.update({split: computed for split in members if split != computed})
    return same


def write_shadow(path: Path, model_dir: Path, members: Iterable[str], **info: Any) -> Path:
    """A shadow model's record: its folder and the candidate questions it trained on (its
    membership mask, by question), plus `info` (how it was drawn)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"model": str(model_dir), "members": list(members), **info})
    return path


def read_shadow(path: str | Path) -> tuple[Path, set[str]]:
    """(model folder, member questions) of a shadow-model file (`write_shadow`'s layout)."""
    data = read_json(Path(path), what="shadow model file")
    members = data.get("members") if isinstance(data, dict) else None
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, str) or not (
        isinstance(members, list) and all(isinstance(m, str) for m in members)
    ):
        raise DataError(
            f'shadow model file {path} needs a "model" folder and a "members" list of the '
            "forget/holdout questions the shadow was trained on",
            'write it as {"model": "path/to/model", "members": ["question", ...]}',
        )
    return Path(model), set(members)


def _train_job(
    out: Path, data_dir: Path, base_dir: Path, split: str, options: dict[str, Any]
) -> tuple[Any, float]:
    # A module-level function: process pools pickle it by name.

    started = time.perf_counter()
    stage = mini_training.finetune_mini(out, data_dir, base_dir, split=split, **options)
    return stage, time.perf_counter() - started


def external_unlearn_defaults() -> tuple[LoopConfig, dict[str, object]]:
    # TOFU's unlearning recipe (forgetbench/presets/tofu.yaml), the same for every method.
    return unlearn_preset("tofu")


def external_defaults(name: str) -> tuple[Any, dict[str, object]]:
    """Every method's unlearning defaults on a model of the user's (`Study.unlearn_defaults`):
    TOFU's recipe. Module level, not a lambda: a Study travels to worker processes pickled."""
    return external_unlearn_defaults()


def miniature(config: RunConfig, out: Path, *, progress: bool) -> Miniature:
    return Miniature(out, config.scale, config.seed, config.train, progress, size=config.model.size)


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
