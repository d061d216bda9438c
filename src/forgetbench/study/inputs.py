"""What a study runs on: the data, the base model, the finetuned model and the retain (and
shadow) models, resolved once into a `Study` record, and the unlearning defaults on a model of the
user's. Every command that needs models (`run`, `unlearn`, `finetune`, `sanity`, `bench`) gets
them from `study/resolved.py`'s `resolve` or `study/miniature.py`'s `Miniature`, so the
generate -> pretrain -> finetune -> retain chain and the miniature-or-Hugging-Face branch exist
once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.presets import unlearn_preset

UnlearnDefaults = Callable[[str], tuple[Any, dict[str, object]]]


@dataclass(frozen=True)
class Study:
    """The models and data a study runs on, resolved once."""

    data: Path  # the benchmark folder (the miniature's root, or a TOFU-layout folder)
    finetuned: Path
    base: Path | None
    retain: dict[str, Path]  # forget split -> its retain model
    template: Any  # forgetbench.modeling.templates.PromptTemplate
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
    # Where unlearning reads a document benchmark's forget corpora when not from `data`: the
    # folder, in the data's layout, that the model being unlearnt wrote (RWKU's rwku.corpus
    # generated, `CorpusBenchmark.corpus_to_write`). The evaluation reads `data` regardless.
    corpus: Path | None = None


def external_unlearn_defaults() -> tuple[LoopConfig, dict[str, object]]:
    # TOFU's unlearning recipe (forgetbench/presets/tofu.yaml), the same for every method.
    return unlearn_preset("tofu")


def external_defaults(name: str) -> tuple[Any, dict[str, object]]:
    """Every method's unlearning defaults on a model of the user's (`Study.unlearn_defaults`):
    TOFU's recipe. Module level, not a lambda: a Study travels to worker processes pickled."""
    return external_unlearn_defaults()
