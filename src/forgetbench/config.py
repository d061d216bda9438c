"""Typed run configuration: YAML holds data only, `a.b=c` overrides, unknown keys are errors.

Every option lives here once, with its default, its valid range and its description; the CLI
(forgetbench.options), `forgetbench config --schema` and docs/config.md are generated from these
models, and the CLI and the Python API both go through `load_config`, so a typo or an
out-of-range value fails the same way everywhere.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError, core_schema

from forgetbench.device_names import (
    DEVICE_SPEC,
    DEVICE_WORDS,
    DTYPE_NAMES,
    MIXED_PRECISIONS,
    SHARDINGS,
)
from forgetbench.errors import ConfigError, UnknownNameError, did_you_mean
from forgetbench.io import MAX_DEPTH, check_depth, read_text

SCALES = ("tiny", "small", "full")
# `model.size`: the built-in model's shape (forgetbench.modeling holds each one's numbers).
MODEL_SIZES = ("auto", *SCALES, "125m", "1b", "8b")
# TOFU's splits (the miniature has the same): a forget split, its complement, and `full` = both.
FORGET_SPLITS = ("forget01", "forget05", "forget10")
# Joshi et al. (2024)'s data-transformation formats, in their order: what the miniature generates,
# the evaluation scores and the report draws.
FORMATS = (
    "mcqa",
    "cloze",
    "analogy_qa",
    "analogy_mcqa",
    "odd_one_out",
    "comprehension_qa",
    "comprehension_mcqa",
)
RETAIN_SPLITS = ("retain99", "retain95", "retain90")
SPLITS = ("full", *FORGET_SPLITS, *RETAIN_SPLITS)
# The miniature's instance-level forget splits (single questions over many authors, nested like
# TOFU's): a sequence of requests may run on them where the author splits coincide (tiny scale).
INSTANCE_SPLITS = tuple(f"{s}_instances" for s in FORGET_SPLITS)


def retain_split_for(split: str) -> str:
    """forgetNN -> retain(100-NN); the miniature's forgetNN_instances -> retain(100-NN)_instances."""
    match = re.fullmatch(r"forget(\d\d)(_instances)?", split)
    if match is None or split.removesuffix("_instances") not in FORGET_SPLITS:
        raise ConfigError(
            f"unlearning split '{split}' is not a forget split",
            f"use one of {', '.join(FORGET_SPLITS)}",
        )
    return f"retain{100 - int(match.group(1))}{match.group(2) or ''}"


# The formats a forget set can be unlearned in (`study.unlearn_formats`): qa is TOFU's own.
UNLEARN_FORMATS = ("qa", "cloze", "mcqa", "analogy", "comprehension")
# mini = the built-in TOFU-shaped miniature; muse and wmdp study their documents
# (`forgetbench.benchmarks.corpus`), on their built-in miniatures unless --data names a folder.
BENCHMARKS = ("mini", "tofu", "lume", "muse", "wmdp")
DOCUMENT_BENCHMARKS = ("muse", "wmdp")


# Per-setup defaults shipped as YAML (forgetbench/presets); train.presets turns one into a loop.
PRESETS = files("forgetbench") / "presets"


def preset_names() -> list[str]:
    return sorted(
        p.name.removesuffix(".yaml") for p in PRESETS.iterdir() if p.name.endswith(".yaml")
    )


def read_preset(name: str, *, kind: str = "preset") -> dict[str, Any]:
    # Checked against the shipped names, not as a path: a name is never a file to go looking for.
    known = preset_names()
    if name not in known:
        raise UnknownNameError(kind, name, known)
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text(encoding="utf-8"))


def _registered_methods() -> tuple[str, ...]:
    # Imported when a method name is checked, not with this module: the methods import torch,
    # and `forgetbench --help` should not wait for it.
    from forgetbench.methods.base import method_names

    return method_names()


class RegisteredMethod:
    """`Annotated[str, RegisteredMethod()]`: a name the method registry knows, so a method
    registered anywhere is accepted without a list here; the JSON schema lists the names."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return {**handler(schema), "enum": list(_registered_methods())}

    @staticmethod
    def _check(name: str) -> str:
        known = _registered_methods()
        if name not in known:
            raise PydanticCustomError(
                "unknown_method", "unknown method {name}", {"name": name, "known": known}
            )
        return name


MethodName = Annotated[str, RegisteredMethod()]


def _every_method() -> list[str]:
    return list(_registered_methods())


class _Section(BaseModel):
    # Once for every section: no number of the config means anything at infinity (an lr, a
    # warm-up, a threshold), and NaN compares false with every bound, so both are refused here
    # rather than field by field; an empty string is never a name, a path or a folder.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, str_min_length=1)


class BenchmarkConfig(_Section):
    name: Literal[BENCHMARKS] = Field(  # type: ignore[valid-type]
        "mini",
        description="mini = the built-in offline miniature; tofu or lume need data; muse and "
        "wmdp train the built-in tiny models on their miniature (or on --data), or study your "
        "own with --model and --data",
    )
    path: str | None = Field(None, description="local folder or Hugging Face dataset id")
    # Checked here, so a misspelt split fails before any data or training work.
    split: Literal[SPLITS] = Field(  # type: ignore[valid-type]
        "forget10",
        description="the split: a forget split (forget01, forget05, forget10) to unlearn or "
        "evaluate; full or retainNN to finetune",
    )


class ModelConfig(_Section):
    name: str = Field(
        "tiny-llama", description="Hugging Face id or local path; tiny-llama = built-in"
    )
    # llama2 is the old name of tofu_llama2.
    template: Literal[
        "auto", "question_answer", "tofu_llama2", "tofu_question_answer", "chat", "llama2"
    ] = Field(
        "auto",
        description="how a question and its answer are laid out; auto = TOFU's own format for "
        "TOFU's checkpoints",
    )
    dtype: Literal[DTYPE_NAMES] = Field(  # type: ignore[valid-type]
        "float32", description="weights' dtype: loaded models and the built-in ones"
    )
    device: str = Field(
        "auto",
        pattern=DEVICE_SPEC,
        description="where every model runs: auto (the GPU when torch sees one), cpu, cuda, cuda:N",
    )
    size: Literal[MODEL_SIZES] = Field(  # type: ignore[valid-type]
        "auto",
        description="the built-in model's shape: auto (the scale's), tiny, small, full, or the "
        "sizes people run: 125m, 1b, 8b (Llama-3 block shapes)",
    )
    mixed_precision: Literal[MIXED_PRECISIONS] = Field(  # type: ignore[valid-type]
        "no", description="training autocast over float32 weights (accelerate): no, bf16, fp16"
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute activations in training: less memory, ~30% more time"
    )
    sharding: Literal[SHARDINGS] = Field(  # type: ignore[valid-type]
        "none",
        description="how launched processes hold the trained model: none (each a full copy, DDP), "
        "fsdp (each a shard: PyTorch FSDP2)",
    )
    trust_remote_code: bool = Field(
        False, description="let a Hub model run its own code (auto_map); only for models you trust"
    )


class TrainConfig(_Section):
    # The built-in miniature trains with its own tuned recipe (forgetbench.train.mini); only the
    # train.* keys the user sets replace its values, not these LLM defaults.
    lr: float = Field(
        1e-5, gt=0, le=1.0, description="finetuning learning rate; the miniature's own unless set"
    )
    epochs: int = Field(
        5, ge=1, le=10_000, description="finetuning epochs; the miniature's own unless set"
    )
    batch_size: int = Field(32, ge=1, description="effective batch size")
    per_device_batch_size: int = Field(4, ge=1, description="examples per forward pass")
    weight_decay: float = Field(0.01, ge=0, le=1.0, description="AdamW weight decay")
    warmup_epochs: float = Field(1.0, ge=0, description="linear warm-up, in epochs")
    max_length: int = Field(512, ge=8, description="tokens per prompt+answer; longer ones are cut")
    checkpoint_every: int = Field(0, ge=0, description="optimizer steps; 0 = at each epoch end")
    group_by_length: bool = Field(
        False,
        description="batch questions of similar length together, as HF Trainer's "
        "group_by_length: less padding, another data order",
    )
    lora: bool = Field(False, description="train LoRA adapters instead of every weight")
    lora_rank: int = Field(8, ge=1, description="LoRA rank")
    lora_alpha: int = Field(16, ge=1, description="LoRA alpha")


class UnlearnConfig(_Section):
    method: MethodName = Field("grad_ascent", description="a registered unlearning method")
    # Unset = the model's preset (forgetbench/presets: tofu.yaml for real LLMs, mini.yaml for the
    # built-in tiny models, tuned per method).
    epochs: int | None = Field(
        None, ge=1, le=10_000, description="unlearning epochs; unset = the model's preset"
    )
    lr: float | None = Field(
        None, gt=0, le=1.0, description="unlearning learning rate; unset = the model's preset"
    )
    batch_size: int | None = Field(None, ge=1, description="effective batch (TOFU: 32)")
    per_device_batch_size: int | None = Field(None, ge=1, description="examples per forward pass")
    snapshot_every: int = Field(
        0, ge=0, description="optimizer steps between saved trajectory models; 0 = each epoch"
    )
    # docs/methods.md, "Loss reduction": which methods' terms this changes, and which papers and
    # code bases average which way.
    loss_reduction: Literal["tokens", "samples"] = Field(
        "tokens",
        description="how a method's token-averaged terms (NLL and the like) average over a "
        "batch: tokens = over every answer token of the batch (HF's loss; TOFU's and "
        "open-unlearning's code), samples = per sample, then over the samples",
    )
    # A file of forgetbench/presets (docs/config.md): its loop and per-method options replace the
    # model's defaults; the options that describe the model (RMU's steered block) are kept.
    preset: str | None = Field(
        None,
        description="unlearning preset, e.g. open_unlearning (its trainer configs); unset = the "
        "model's (mini for the built-in tiny models, tofu for any other)",
    )
    refusals_file: str | None = Field(
        None, description="one refusal a line for idk/dpo (default: forgetbench's own 100)"
    )
    lora: bool = Field(
        False,
        description="train LoRA adapters only; a method's reference model is the same weights "
        "with the adapters off (no second copy)",
    )
    lora_rank: int = Field(8, ge=1, description="LoRA rank")
    lora_alpha: int = Field(16, ge=1, description="LoRA alpha")
    lora_targets: list[str] | None = Field(
        None,
        description="modules LoRA adapts; unset = found from the architecture (q_proj,v_proj; "
        "c_attn; query_key_value; else every linear layer)",
    )


def _no_single_shadow(n: int) -> int:
    # LiRA and RMIA compare shadow models that trained on a candidate with ones that did not.
    if n == 1:
        raise PydanticCustomError(
            "one_shadow",
            "needs 0 (no shadow attacks) or at least 2: LiRA and RMIA compare shadow models "
            "that trained on a candidate with ones that did not",
        )
    return n


def _batch_size_or_auto(value: Any) -> int | str:
    if value == "auto":
        return value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PydanticCustomError(
            "batch_size", "must be an integer >= 1 or auto, got {value}", {"value": repr(value)}
        )
    return value


class EvalConfig(_Section):
    max_new_tokens: int = Field(
        200, ge=1, le=8192, description="new tokens per generated TOFU answer"
    )
    batch_size: Annotated[int | str, BeforeValidator(_batch_size_or_auto)] = Field(
        16,
        description="sequences per scoring or generation batch (the built-in miniature's "
        "preset: 64); auto = the largest that fits the GPU (halving on out-of-memory)",
    )
    truth_ratio_form: Literal["tofu_code", "paper", "prob_mean"] = Field(
        "tofu_code", description="tofu_code = TOFU's code; paper = its paper's arithmetic mean"
    )
    formats: bool = Field(
        True, description="the data-transformation formats, where the data has them"
    )
    probes: bool = Field(
        True,
        description="the generalisation probes (paraphrase, reverse, two_hop, shared), where "
        "the data has them",
    )
    mia: bool = Field(True, description="membership inference: forget set vs its holdout split")
    mia_k: float = Field(0.4, gt=0, le=1, description="Min-K% / Min-K%++ fraction")
    # Row-time options: the attacks they set up combine evaluations, so they are not part of any
    # one model's evaluation (nor of its cache key).
    mia_shadows: Annotated[int, AfterValidator(_no_single_shadow)] = Field(
        4,
        ge=0,
        le=64,
        description="shadow models per split for the LiRA and RMIA attacks (built-in miniature; "
        "0 = none, else at least 2)",
    )
    mia_rmia_gamma: float = Field(
        1.0, gt=0, description="RMIA's likelihood-ratio threshold gamma against each population z"
    )
    lume: bool = Field(True, description="LUME tasks, where the data has them (a lume/ folder)")
    # The SemEval-2025 scorer generates up to 256 new tokens per LUME prompt (its --max_new_tokens
    # default); TOFU's answers are short and keep `max_new_tokens`.
    lume_max_new_tokens: int = Field(
        256, ge=1, le=8192, description="new tokens per LUME continuation"
    )
    lm_eval_tasks: list[str] = Field(
        default_factory=list,
        description="lm-evaluation-harness tasks for utility, e.g. [mmlu] "
        "(pip install forgetbench[lmeval])",
    )
    lm_eval_chat_template: bool = Field(
        False, description="apply the tokenizer's chat template in lm-eval"
    )
    lm_eval_include_path: str | None = Field(None, description="folder of extra lm-eval tasks")
    # Unset keeps the length the model was trained with, as evaluations always had; a prompt
    # that leaves no room for its answer is refused, never cut (docs/metrics.md).
    max_length: int | None = Field(
        None,
        ge=8,
        description="tokens per scored prompt+answer (answers past it are cut; a prompt that "
        "fills it is an error); unset = train.max_length; at most the model's context",
    )
    # TOFU's `ds_size`: its evaluation kept the first N questions of each of its four sets
    # (`select(range(min(ds_size, len)))`; 300 in its published logs, so Real Authors (100) and
    # World Facts (117) stay whole). MIA, formats and LUME are not cut.
    max_questions: int | None = Field(
        None,
        ge=1,
        description="score only the first N questions of each TOFU evaluation set (membership "
        "inference, the formats and LUME are not cut); unset = all; TOFU's published logs used 300",
    )
    # LUME's final score takes MMLU accuracy as utility (SemEval-2025 Task 4): measured through
    # lm-eval when lm_eval_tasks has mmlu, or given here for a model measured elsewhere
    # (`forgetbench eval` only: one model's number). Below 0.371 it is flagged.
    lume_mmlu: float | None = Field(
        None,
        ge=0,
        le=1,
        description="the evaluated model's MMLU accuracy, for LUME's final score (forgetbench "
        "eval; not with lm_eval_tasks=[mmlu])",
    )

    def scored_length(self, train_max_length: int) -> int:
        """Tokens per scored prompt+answer: eval.max_length, else train.max_length."""
        return self.max_length if self.max_length is not None else train_max_length


# Robustness attacks (forgetbench.attacks): each is scored on the B half of the forget set.
ATTACKS = ("relearn", "relearn_full", "quantize", "incontext")
QUANT_SCHEMES = ("int8", "int4", "nf4")


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
        description="unlearning methods; default: every registered one",
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


class RunConfig(_Section):
    seed: int = Field(0, ge=0, description="seeds data generation, training and sampling")
    scale: Literal[SCALES] = Field(  # type: ignore[valid-type]
        "small", description="size of the built-in miniature benchmark and its models"
    )
    out: str = Field("runs/forgetbench", description="output folder")
    # Imported before the rest of the config is validated, so the methods they register are
    # accepted by name everywhere (docs/methods.md, "Your own method").
    plugins: list[str] = Field(
        default_factory=list,
        description="method plugins: .py files or module names that register methods "
        "(from forgetbench import register_method)",
    )
    # Sections are built when a config is validated, not at import: the study's default methods
    # come from the method registry, which imports torch.
    benchmark: BenchmarkConfig = Field(default_factory=BenchmarkConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    unlearn: UnlearnConfig = Field(default_factory=UnlearnConfig)
    method: dict[str, Any] = Field(
        default_factory=dict,
        description="options of the chosen method (method.beta=0.05); see docs/methods.md",
    )
    eval: EvalConfig = Field(default_factory=EvalConfig)
    study: StudyConfig = Field(default_factory=StudyConfig)
    attack: AttackConfig = Field(default_factory=AttackConfig)


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    values: Mapping[str, tuple[str, Any]] | None = None,
    *,
    ignore: tuple[str, ...] = (),
) -> RunConfig:
    """Defaults, then the YAML file, then `a.b=c` overrides (values parsed as YAML scalars), then
    `values`: typed values by config key, each with the option that gave it (`{"unlearn.lr":
    ("--lr", 1e-4)}`), so an error names what the user typed. `ignore`: top-level sections of the
    file read by someone else (a sweep file's `sweep`)."""
    data: dict[str, Any] = {}
    if path is not None:
        data = {k: v for k, v in _read_yaml(Path(path)).items() if k not in ignore}
    for override in overrides:
        key, value = _parse_override(override)
        _set_dotted(data, key, value)
    values = dict(values or {})
    for key, (_, value) in values.items():
        _set_dotted(data, key, value)
    sources = ([str(path)] if path else []) + (["command line"] if overrides or values else [])
    given_as = {key: option for key, (option, _) in values.items()}
    return validate_config(data, source=" + ".join(sources) or "defaults", given_as=given_as)


def validate_config(
    data: dict[str, Any], *, source: str = "config", given_as: Mapping[str, str] | None = None
) -> RunConfig:
    _load_plugins(data, source, given_as or {})
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise _one_line(exc, source, given_as or {}) from None
    from forgetbench.methods.base import build_method  # lazy: torch, as method_names above

    build_method(config.unlearn.method, config.method)  # unknown or out-of-range options fail here
    if config.unlearn.preset is not None:
        read_preset(config.unlearn.preset, kind="unlearn.preset")  # unknown: fails with the known
    for name, settings in config.study.method_settings.items():
        try:
            build_method(name, settings.options)
        except ConfigError as exc:
            raise ConfigError(
                f"study.method_settings.{name}.options in {source}: {exc.what}", exc.hint
            ) from None
    _refuse_repeats(config, source, given_as or {})
    return config


def load_given_plugins(
    path: str | Path | None, overrides: list[str] | tuple[str, ...], flags: list[str] | None
) -> None:
    """Import the plugins a command line names, and only them: its --config file's `plugins:`,
    then a `plugins=[...]` override, then --plugin flags, the last given winning as in
    `load_config`. For `--help`, which lists every registered method before any config is read;
    the rest of the config is read (and checked) when the command runs."""
    data: dict[str, Any] = {}
    sources = []
    if path is not None:
        data["plugins"] = _read_yaml(Path(path)).get("plugins")
        sources.append(str(path))
    for override in overrides:
        key, value = _parse_override(override)
        if key == "plugins":
            data["plugins"], sources = value, [*sources, "command line"]
    given_as = {}
    if flags:
        data["plugins"], given_as = flags, {"plugins": "--plugin"}
    _load_plugins(data, " + ".join(sources) or "command line", given_as)


def _load_plugins(data: Any, source: str, given_as: Mapping[str, str]) -> None:
    """Import the config's plugins before it is validated: their methods are then registered
    names like the built-ins. A malformed list is left for validation to name."""
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if not (isinstance(plugins, list) and all(isinstance(p, str) and p for p in plugins)):
        return
    if plugins:
        from forgetbench.methods.plugins import load_plugins  # lazy: torch, as build_method

        load_plugins(plugins, source=given_as.get("plugins") or f"plugins in {source}")


def _refuse_repeats(model: BaseModel, source: str, given_as: Mapping[str, str]) -> None:
    """Every list in the config names each item once: a repeated method, split or seed is a
    typo for another one more often than a wish to run it twice, and running it twice would
    give two rows that are one; so it is refused rather than collapsed."""
    for key, values in _lists(model, ""):
        seen: set[Any] = set()
        for value in values:
            if value in seen:
                named = given_as.get(key) or f"{key} in {source}"
                raise ConfigError(f"{named} repeats {value!r}: {values}", "list each item once")
            seen.add(value)


def _lists(node: Any, key: str) -> list[tuple[str, list[Any]]]:
    if isinstance(node, BaseModel):
        # A method's own options (`dict[str, Any]`) are the method's to check.
        return [
            found
            for name, info in type(node).model_fields.items()
            if typing.get_args(info.annotation)[-1:] != (Any,)
            for found in _lists(getattr(node, name), f"{key}.{name}" if key else name)
        ]
    if isinstance(node, dict):
        return [found for k, v in node.items() for found in _lists(v, f"{key}.{k}")]
    if isinstance(node, list) and all(isinstance(v, str | int) for v in node):
        return [(key, node)]
    return []


class _RepeatedKey(Exception):
    def __init__(self, key: Any, line: int, first: int) -> None:
        self.key, self.line, self.first = key, line, first


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys in a mapping and drops the first without a word
    (a second `train:` section silently replaces the first); here a repeated key is an error."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first_line.get(key)
            except TypeError:  # an unhashable key: the base loader reports it
                continue
            if seen is not None:
                raise _RepeatedKey(key, key_node.start_mark.line + 1, seen)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file '{path}' does not exist", "check the --config path")
    text = read_text(path, error=ConfigError)
    try:
        data = _load_yaml(text)
    except _RepeatedKey as exc:
        raise ConfigError(
            f"{path} line {exc.line}: key '{exc.key}' is given twice (first on line {exc.first})",
            "keep one; the first would otherwise be dropped without a word",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{where}: invalid YAML", "fix the syntax") from None
    except RecursionError:
        raise ConfigError(
            f"{path}: YAML nested more than {MAX_DEPTH} levels deep", "a run config is flat"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config sections at the top level")
    # YAML aliases can make a few lines expand into billions of values.
    hint = "a run config is a few flat sections"
    check_depth(data, str(path), hint=hint, max_nodes=10_000, error=ConfigError)
    return data


def _parse_override(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override '{text}' is not of the form key=value", "e.g. train.lr=2e-5")
    try:
        value = _load_yaml(raw) if raw else ""
    except _RepeatedKey as exc:
        raise ConfigError(
            f"override '{text}' gives the key '{exc.key}' twice", "keep one"
        ) from None
    except yaml.YAMLError:
        value = raw
    return key, value


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override '{dotted}': '{part}' is a value, not a section")
        node = child
    node[parts[-1]] = value


def _one_line(exc: ValidationError, source: str, given_as: Mapping[str, str]) -> ConfigError:
    error = exc.errors()[0]
    loc = [str(p) for p in error["loc"]]
    key = ".".join(loc)
    if error["type"] == "extra_forbidden":
        known = _fields_at(loc[:-1])
        prefix = "".join(f"{part}." for part in loc[:-1])
        suggestion = did_you_mean(key, [prefix + k for k in known])
        return ConfigError(
            f"unknown config key '{key}' in {source}{suggestion}",
            f"known keys{' in ' + '.'.join(loc[:-1]) if loc[:-1] else ''}: {', '.join(known)}",
        )
    value = error.get("input")
    # A value from a flag is named by the flag (`--lr`), not by the config key it sets.
    option = next((o for k, o in given_as.items() if key == k or key.startswith(k + ".")), None)
    where = f"from {option}" if option else f"in {source}"
    if error["type"] == "unknown_method":
        known = error["ctx"]["known"]
        if option:  # worded as the registry's own miss, like every other unknown name
            unknown = UnknownNameError("method", str(value), known)
            return ConfigError(f"{option}: {unknown.what}", unknown.hint)
        return ConfigError(
            f"invalid value {key}={value!r} {where}{did_you_mean(str(value), known)}",
            f"registered methods: {', '.join(sorted(known))}",
        )
    if error["type"] in ("string_too_short", "too_short"):
        named = option or f"{key} in {source}"
        hint = "give a name or a path" if error["type"] == "string_too_short" else "name one"
        return ConfigError(f"{named} is empty", hint)
    if error["type"] == "literal_error":
        allowed = error.get("ctx", {}).get("expected", "")
        choices = [c.strip().strip("'") for c in allowed.replace(" or ", ", ").split(",")]
        return ConfigError(
            f"invalid value {key}={value!r} {where}{did_you_mean(str(value), choices)}",
            f"expected {allowed}",
        )
    if error["type"] == "string_pattern_mismatch" and error["ctx"]["pattern"] in PATTERN_WORDS:
        # The pattern itself is no answer to a user: the values it allows, in words.
        allowed = PATTERN_WORDS[error["ctx"]["pattern"]]
        return ConfigError(f"invalid value {key}={value!r} {where}", f"expected {allowed}")
    message = error["msg"]
    return ConfigError(f"invalid value {key}={value!r} {where}: {message[:1].lower()}{message[1:]}")


# Each `pattern=` of a config field, as the values it allows are said to a user.
PATTERN_WORDS = {DEVICE_SPEC: DEVICE_WORDS}


def _fields_at(loc: list[str]) -> list[str]:
    model: type[BaseModel] = RunConfig
    for part in loc:
        annotation = model.model_fields[part].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)
