"""The sections of a run config that only a study over many runs reads: what `forgetbench run`
covers (`study.*`: methods, splits, seeds, attacks, sequences, formats, workers), each method's
own settings in it (`MethodSettings`), and the robustness attacks' budget (`attack.*`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from forgetbench.config_names import (
    ATTACKS,
    FORGET_SPLITS,
    INSTANCE_SPLITS,
    QUANT_SCHEMES,
    UNLEARN_FORMATS,
    MethodName,
    _every_method,
)
from forgetbench.config_sections import _Section


class MethodSettings(_Section):
    """One method's own settings in a study, over `unlearn.*` and `method.*` (what
    `forgetbench sweep` selects and writes)."""

    lr: float | None = Field(None, gt=0, le=1.0, description="unlearning learning rate")
    epochs: int | None = Field(None, ge=1, le=10_000, description="unlearning epochs")
    options: dict[str, Any] = Field(default_factory=dict, description="the method's options")


def _nested_sequence(splits: list[str]) -> list[str]:
    # Requests are the differences of nested splits, so the order is the nesting order and one
    # kind of split throughout (author splits, or the instance splits).
    if len(splits) == 1:
        # Its sequential rows would be its one-shot rows again, under another name.
        raise PydanticCustomError(
            "sequence_one",
            "lists one request, and a sequence is two or more one after another (one request "
            "is the study's own run of that split): add the splits before it, e.g. [forget01, "
            "forget05, forget10], or drop study.sequence",
        )
    for kind in (FORGET_SPLITS, INSTANCE_SPLITS):
        if all(s in kind for s in splits):
            if [kind.index(s) for s in splits] != sorted({kind.index(s) for s in splits}):
                raise PydanticCustomError(
                    "sequence_order",
                    "lists nested forget splits, smallest first, each once (e.g. [forget01, "
                    "forget05, forget10])",
                )
            return splits
    raise PydanticCustomError(
        "sequence_kind",
        "mixes author and instance splits: use forget01/05/10 or forget01/05/10_instances",
    )


class StudyConfig(_Section):
    """What `forgetbench run` covers: every method on every split, each evaluated along its
    trajectory (one snapshot per epoch by default)."""

    # In registration order (forgetbench.methods): the order of the study's rows and report.
    methods: list[MethodName] = Field(
        default_factory=_every_method,
        min_length=1,
        description="unlearning methods; default: every registered one that trains",
    )
    splits: list[Literal[FORGET_SPLITS]] = Field(  # type: ignore[valid-type]
        list(FORGET_SPLITS), min_length=1, description="forget splits"
    )
    # Snapshots along a trajectory get the TOFU metrics and MIA; the formats and LUME tasks, which
    # generate many more answers, run on the final model and the reference models.
    trajectory_formats: bool = Field(
        False, description="also run the formats and LUME tasks on every trajectory snapshot"
    )
    examples: int = Field(3, ge=0, description="forget-set generations shown per method")
    # On each method's final model and the finetuned and retain models (the references).
    attacks: list[Literal[ATTACKS]] = Field(  # type: ignore[valid-type]
        list(ATTACKS), description="robustness attacks in the study; [] = none"
    )
    # Trains two more pools of miniature models (forgetbench.study.meta_eval), minutes at tiny
    # scale and tens of minutes at small, so it is off unless asked for.
    meta_eval: bool = Field(
        False,
        description="also meta-evaluate the metrics (faithfulness on pools of models that saw or "
        "never saw the largest forget split; meta_eval.json, report); built-in miniature only",
    )
    # For forget quality when the models are not ours (`--benchmark tofu --model <hub id>`), and
    # the retain row and PrivLeak of a MUSE or WMDP study of the user's model.
    retain_logs: dict[str, str] = Field(
        default_factory=dict,
        description="a retain model's eval log per split, e.g. {forget10: .../retain90_wd0}; "
        "muse, wmdp: {forget: DIR} ('forgetbench eval --out DIR'); run's --retain-log sets one",
    )
    # Shadow models for LiRA / RMIA when the models are not ours: per split, JSON files
    # {"model": folder, "members": [question, ...]}, the layout forgetbench writes for its own.
    mia_shadow_models: dict[str, list[str]] = Field(
        default_factory=dict,
        description="shadow models per split for LiRA/RMIA with --model: JSON files "
        '{"model": path, "members": [questions]}, e.g. {forget10: [s0.json, s1.json]}',
    )
    # Unset keeps one run per method at `seed` (and results rows without a `seed` field).
    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=list,
        description="unlearning seeds: each method runs once per seed; the leaderboard shows the "
        "mean and a 95% bootstrap interval; empty = once, at seed",
    )
    method_settings: dict[MethodName, MethodSettings] = Field(
        default_factory=dict,
        description="per-method lr, epochs and options over unlearn.* and method.*, e.g. "
        "{npo: {lr: 1.0e-3, options: {beta: 0.2}}} (forgetbench sweep writes these)",
    )
    # Off by default: each extra format is one more unlearning run and full evaluation per method
    # and split (docs/transfer.md).
    unlearn_formats: list[Literal[UNLEARN_FORMATS]] = Field(  # type: ignore[valid-type]
        ["qa"],
        min_length=1,
        description="formats the forget (and retain) set is unlearned in, each evaluated in every "
        "format: the cross-format matrix (qa = TOFU's; cloze, mcqa, analogy, comprehension need "
        "the miniature's formats/)",
    )
    sequence: Annotated[
        list[Literal[(*FORGET_SPLITS, *INSTANCE_SPLITS)]],  # type: ignore[valid-type]
        AfterValidator(_nested_sequence),
    ] = Field(
        default_factory=list,
        description="unlearning requests one after another on the same model: nested splits, "
        "each request the next one's new questions, e.g. [forget01, forget05, forget10]; "
        "[] = none",
    )
    requests: bool = Field(
        True,
        description="a document benchmark's series of forget requests beside its study (MUSE "
        "News' scal/ and sust/: scalability and sustainability), when its folder has them; "
        "false skips their unlearning runs",
    )
    # A ~3M-parameter model cannot keep two CPU threads busy (measured: one process evaluates as
    # fast with 1 thread as with 2), so the built-in study runs its independent jobs (models,
    # reference evaluations, each method's trajectory) in parallel processes of 1 thread each.
    workers: int = Field(
        0,
        ge=0,
        description="parallel processes; 0 = one per CPU core for the built-in study on "
        "CPU, 1 on a GPU, under accelerate launch or with --model",
    )


class AttackConfig(_Section):
    """Robustness attacks: `forgetbench attack`, and `study.attacks` in `forgetbench run`. Every
    attacked model gets the same budget."""

    relearn_lr: float | None = Field(
        None,
        gt=0,
        description="relearning learning rate; unset = the model's finetuning rate (the "
        "miniature's recipe, else train.lr)",
    )
    relearn_epochs: int = Field(1, ge=1, description="relearning epochs on the forget set's A half")
    relearn_batch_size: int = Field(4, ge=1, description="relearning batch size (questions)")
    relearn_full_rounds: int = Field(
        5,
        ge=1,
        description="relearn_full: at most this many rounds of relearn_epochs on the whole "
        "forget set",
    )
    relearn_target: float = Field(
        0.9,
        gt=0,
        le=1,
        description="relearn_full stops once forget ROUGE-L reaches this fraction of the "
        "finetuned model's",
    )
    quantize: list[Literal[QUANT_SCHEMES]] = Field(  # type: ignore[valid-type]
        list(QUANT_SCHEMES), description="quantisation schemes (simulated, see docs/metrics.md)"
    )
    group_size: int = Field(
        0, ge=0, description="int8/int4 weights per scale along a row; 0 = one per output channel"
    )
    incontext_k: int = Field(
        3, ge=1, description="A-half facts about the same author shown before each B question"
    )
