"""The command line as a view of the typed config (forgetbench.config).

A flag is a shorthand for one config key, declared once in `FLAGS`; its type, description and
default are the config field's. Which command reads which key, and why the others do not, is
`UNUSED`. From these two tables come each command's argparse options, its `--help` (only what
it reads), the refusal of what it does not read ("forgetbench eval does not use --epochs: eval
trains nothing"), and docs/config.md (`config_reference`).
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from forgetbench.config import (
    ATTACKS,
    FORGET_SPLITS,
    RETAIN_SPLITS,
    SCALES,
    SPLITS,
    RegisteredMethod,
    RunConfig,
    read_preset,
)

# The commands that read a run config; the others (data, compare, report) take their own options.
COMMANDS = (
    "config", "finetune", "unlearn", "eval", "sanity", "run", "bench", "attack", "sweep",
    "meta-eval",
)  # fmt: skip


@dataclass(frozen=True)
class Flag:
    """`--lr 1e-4` sets `unlearn.lr`; in `keys`' commands it sets another key (finetune's --lr is
    `train.lr`). A singular flag setting a list key gives a list of one (run's --method)."""

    name: str
    key: str
    keys: Mapping[str, str] = field(default_factory=dict)
    # A command's own default when neither the flag nor a KEY=VALUE sets the key; it wins over a
    # --config file, which may hold settings for other commands.
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # Where the flag means more than its field's description says. The text is the whole help:
    # it states its default itself, since the field's may not be the one that applies. A
    # callable is called when --help is shown (its numbers come from modules that import torch).
    help: Mapping[str, str | Callable[[], str]] = field(default_factory=dict)
    # Commands that cannot run without it on the command line: argparse requires it, so the
    # usage line and --help say so.
    required: tuple[str, ...] = ()
    # The word that gives the empty list (`--attacks none`), for a list the user may empty, and
    # the commands whose usage and errors offer it (one that needs an item refuses the empty list).
    none: str | None = None
    none_in: tuple[str, ...] = ()
    # Commands where this singular flag is an alias of its plural: hidden from --help, where the
    # plural's line names it, and still accepted (`run --method npo` = `run --methods npo`).
    alias_in: tuple[str, ...] = ()
    # Given once per item (`--plugin a.py --plugin b.py`) rather than as a comma list: an item
    # is a path, which may hold a comma.
    repeat: bool = False

    @property
    def dest(self) -> str:
        return self.name[2:].replace("-", "_")

    def key_for(self, command: str) -> str:
        return self.keys.get(command, self.key)


# The splits each command accepts for --split: finetune trains on `full` (the finetuned model) or
# a retain split (a retain model); the others unlearn, score or attack a forget split. cli/config.py
# refuses every other split with these, so --help offers exactly what the command runs
# (tests/test_options.py checks both ways).
SPLIT_CHOICES: dict[str, tuple[str, ...]] = {
    "config": SPLITS,
    "finetune": ("full", *RETAIN_SPLITS),
    **{c: FORGET_SPLITS for c in ("unlearn", "eval", "bench", "attack", "meta-eval", "run")},
}


def _mini_finetune(what: str) -> str:
    # The recipe forgetbench.train.mini trains the built-in miniature with (its numbers live in
    # the torch-free scales module: every parse builds this help, and parsing must not import
    # the trainer); the train.* defaults are an LLM's (TOFU's) and apply only to --model.
    from forgetbench.benchmarks.mini.scales import MINI_LR, get_scale

    if what == "epochs":
        mini = "/".join(str(get_scale(scale).finetune_epochs) for scale in SCALES)
        return (
            f"finetuning epochs (default: {field_at('train.epochs').default} for --model; the "
            f"built-in miniature's own recipe otherwise: {mini} at {'/'.join(SCALES)})"
        )
    return (
        f"finetuning learning rate (default: {field_at('train.lr').default:g} for --model; the "
        f"built-in miniature's own recipe otherwise: {MINI_LR:g})"
    )


def _unlearn_loop(what: str) -> str:

    presets = {name: read_preset(name)["loop"][what] for name in ("tofu", "mini")}
    noun = "epochs" if what == "epochs" else "learning rate"
    return (
        f"unlearning {noun} (default: the method's preset: {presets['tofu']:g} for --model, "
        f"TOFU's recipe; {presets['mini']:g} on the built-in miniature, some methods their own)"
    )


_RUN_FOLDER = "run folder; finished stages there are reused"
_FORGET = ", ".join(FORGET_SPLITS)
_LOOP = ("unlearn", "run", "sweep")
FLAGS = (
    Flag("--scale", "scale"),
    Flag("--benchmark", "benchmark.name"),
    Flag(
        "--model",
        "model.name",
        required=("eval",),
        help={
            "finetune": "the model to finetune: a Hugging Face id or a local folder, with --data "
            "(default: the built-in miniature's pretrained model)",
            "unlearn": "the finetuned model to unlearn: a Hugging Face id or a local folder, with "
            "--data (default: the built-in miniature's finetuned model)",
            "eval": "the model to score: a Hugging Face id or a local folder (required)",
            "run": "your finetuned model: a Hugging Face id or a local folder, with --data "
            "(default: the built-in miniature's models)",
            "sweep": "your finetuned model, with --data (default: the built-in miniature's models)",
            "attack": "the model to attack (default: the built-in miniature's finetuned and "
            "retain models only)",
            "bench": "bench eval: the model to time, with --data (default: the built-in "
            "miniature's finetuned model)",
        },
    ),
    Flag(
        "--data",
        "benchmark.path",
        required=("eval",),
        help={
            "eval": "TOFU-layout folder (docs/your-model.md lists the files) or a Hugging Face "
            "dataset id; a LUME folder with --benchmark lume (required)",
        },
    ),
    Flag(
        "--split",
        "benchmark.split",
        keys={"run": "study.splits"},
        defaults={"finetune": "full"},
        alias_in=("run",),
        help={
            "finetune": "what to train on: full = the finetuned model, retainNN = a retain model "
            "(default: full)",
            "unlearn": "the forget split to unlearn (default: forget10)",
            "eval": "the forget split to score, with its retain and holdout sets (default: "
            "forget10)",
            "attack": "the forget split whose B half is attacked (default: forget10)",
            "bench": "bench eval: the forget split to score (default: forget10)",
            "meta-eval": "the forget split the pools are told apart on (default: forget10)",
        },
    ),
    Flag("--method", "unlearn.method", keys={"run": "study.methods"}, alias_in=("run",)),
    Flag(
        "--methods",
        "study.methods",
        help={
            "run": "unlearning methods, listed below (default: every registered one; --method "
            "NAME is the same with one)",
            "meta-eval": "methods whose unlearned models the robustness attacks (default: 3 at "
            "tiny scale, 8 at small)",
        },
    ),
    Flag(
        "--splits",
        "study.splits",
        help={
            "run": f"forget splits (default: {','.join(FORGET_SPLITS)}; --split NAME is the same "
            "with one)"
        },
    ),
    Flag(
        "--attacks",
        "study.attacks",
        none="none",
        none_in=("run", "config"),
        help={
            "run": "robustness attacks on each final model; none = no attacks (default: "
            f"{','.join(ATTACKS)})",
            "attack": f"the attacks to run (default: {','.join(ATTACKS)})",
        },
    ),
    Flag(
        "--epochs",
        "unlearn.epochs",
        keys={"finetune": "train.epochs"},
        help={
            "finetune": lambda: _mini_finetune("epochs"),
            **dict.fromkeys(_LOOP, lambda: _unlearn_loop("epochs")),
        },
    ),
    Flag(
        "--lr",
        "unlearn.lr",
        keys={"finetune": "train.lr"},
        help={
            "finetune": lambda: _mini_finetune("lr"),
            **dict.fromkeys(_LOOP, lambda: _unlearn_loop("lr")),
        },
    ),
    Flag("--preset", "unlearn.preset"),
    Flag("--seed", "seed"),
    Flag(
        "--plugin",
        "plugins",
        repeat=True,
        help=dict.fromkeys(
            COMMANDS,
            "a .py file or module that registers a method (repeatable; docs/methods.md, "
            '"Your own method")',
        ),
    ),
    Flag(
        "--out",
        "out",
        required=("finetune", "unlearn", "eval", "bench", "attack", "sweep", "meta-eval"),
        help={
            "attack": "folder for the attacks' models, logs and attacks.json",
            "meta-eval": "folder for the pools' models, their evaluations and meta_eval.json; "
            "a run folder's report gains the meta-evaluation",
            "finetune": _RUN_FOLDER,
            "unlearn": _RUN_FOLDER,
            "eval": "folder for the per-question logs and the summary",
            "sanity": "run folder (default: runs/sanity-SCALE)",
            "bench": "scratch run folder",
            "sweep": "sweep folder: trials, sweep.json, selected.yaml, sweep.html",
        },
    ),
)

# What each command does not read, by config key or section (the longest match wins), with the
# reason given when the command line sets it anyway, as a flag or a KEY=VALUE. A --config file
# may hold settings for several commands, so only the command line is checked. READ marks a key
# read inside a section that is not.
READ = None
_NO_UNLEARNING = "it runs no unlearning"
_STUDY = "study.* is for 'forgetbench run'"
UNUSED: dict[str, dict[str, str | None]] = {
    "config": {},
    "finetune": {
        "plugins": "finetune runs no unlearning, so it reads no method plugin",
        "unlearn.method": "finetune trains on one split; methods are for 'forgetbench unlearn'",
        "study.methods": "finetune trains on one split; methods are for 'forgetbench run'",
        "study.splits": "finetune trains on one split: use --split",
        "unlearn": "finetune runs no unlearning (unlearn.* is for 'unlearn' and 'run')",
        "method": "finetune runs no unlearning (method.* is for 'unlearn' and 'run')",
        "study": _STUDY,
        "eval": "finetune evaluates nothing (eval.* is for 'eval', 'sanity' and 'run')",
    },
    "unlearn": {
        "study.methods": "unlearn runs one method: use --method (or 'forgetbench run --methods')",
        "study.splits": "unlearn runs on one split: use --split (or 'forgetbench run --splits')",
        "study": _STUDY,
        "eval": "unlearn evaluates nothing (eval.* is for 'eval', 'sanity' and 'run')",
    },
    "eval": {
        "plugins": "eval " + _NO_UNLEARNING + ", so it reads no method plugin",
        "scale": "eval scores the given --model and trains nothing",
        "seed": "eval is deterministic (greedy generation) and trains nothing",
        "unlearn.method": "eval scores the given --model; " + _NO_UNLEARNING,
        "study.methods": "eval scores the given --model; " + _NO_UNLEARNING,
        "study.splits": "eval scores one split: use --split",
        "unlearn.epochs": "eval trains nothing",
        "unlearn.lr": "eval trains nothing",
        "train": "eval trains nothing",
        "model.sharding": "eval trains nothing (under torchrun its processes split the "
        "questions, each with the whole model)",
        "train.max_length": READ,
        "unlearn": "eval " + _NO_UNLEARNING,
        "method": "eval " + _NO_UNLEARNING,
        "study": _STUDY,
        "eval.mia_shadows": "eval scores one model; the shadow-model attacks are made by "
        "'forgetbench run', from several",
        "eval.mia_rmia_gamma": "eval scores one model; RMIA is made by 'forgetbench run', from "
        "its shadow models",
        "model.mixed_precision": "eval trains nothing (it is training's autocast; model.dtype "
        "sets the precision eval scores in)",
        "model.gradient_checkpointing": "eval trains nothing",
        "model.size": "it shapes only the built-in model; eval scores the given --model",
    },
    "sanity": {
        "plugins": "sanity " + _NO_UNLEARNING + ", so it reads no method plugin",
        "model.name": "sanity trains its own models at --scale (TOFU appendix E)",
        "benchmark.path": "sanity generates its own miniature data at --scale",
        "benchmark.split": "sanity's checks are defined on forget10",
        "unlearn.method": "sanity " + _NO_UNLEARNING,
        "study.methods": "sanity " + _NO_UNLEARNING,
        "study.splits": "sanity's checks are defined on forget10",
        "unlearn.epochs": "sanity trains with the miniature's fixed recipe",
        "unlearn.lr": "sanity trains with the miniature's fixed recipe",
        "benchmark": "sanity runs on the built-in miniature benchmark",
        "model": "sanity trains its own models at --scale",
        "train": "sanity trains with the miniature's fixed recipe",
        "unlearn": "sanity " + _NO_UNLEARNING,
        "method": "sanity " + _NO_UNLEARNING,
        "study": _STUDY,
    },
    "run": {
        "benchmark.split": "a study covers study.splits: use --splits",
        "unlearn.method": "a study runs study.methods: use --methods",
    },
    "sweep": {
        "benchmark.split": "a sweep selects on sweep.select_split",
        "unlearn.method": "a sweep runs the methods of its sweep section",
        "study.methods": "a sweep runs the methods of its sweep section",
        "study.splits": "a sweep selects on sweep.select_split and reports on sweep.report_split",
        "study.seeds": "a sweep runs each trial at sweep.seeds",
        "study.method_settings": "a sweep searches them (sweep.space, sweep.methods)",
        "study.attacks": "a sweep selects on forget quality and utility; attack the selected "
        "models with 'forgetbench run' or 'forgetbench attack'",
    },
    "bench": {
        "plugins": "bench " + _NO_UNLEARNING + ", so it reads no method plugin",
        "benchmark.name": "bench times the TOFU-layout path",
        "unlearn.method": "bench " + _NO_UNLEARNING,
        "study.methods": "bench " + _NO_UNLEARNING,
        "study.splits": "bench times one split: use --split (bench eval)",
        "unlearn.epochs": "bench times the miniature's fixed recipe",
        "unlearn.lr": "bench times the miniature's fixed recipe",
        "train": "bench times the miniature's fixed recipe",
        "unlearn": "bench " + _NO_UNLEARNING,
        "method": "bench " + _NO_UNLEARNING,
        "study": _STUDY,
    },
    "attack": {
        "plugins": "attack runs no unlearning, so it reads no method plugin",
        "benchmark.name": "attack runs on TOFU-layout data (the miniature's, or --data)",
        "unlearn.method": "attack runs no unlearning; attack an unlearned model with --model",
        "unlearn": "attack runs no unlearning (attack.* sets the attacks' budget)",
        "method": "attack runs no unlearning",
        "study.methods": "attack runs no unlearning; attack an unlearned model with --model",
        "study.splits": "attack runs on one split: use --split",
        "study": _STUDY,
        "study.attacks": READ,
    },
    "meta-eval": {
        "model": "meta-eval trains its own pools of the built-in miniature's models at --scale",
        "benchmark": "meta-eval runs on the built-in miniature benchmark",
        "benchmark.split": READ,
        "unlearn": "meta-eval unlearns with each method's preset (unlearn.* is for "
        "'forgetbench run')",
        "method": "meta-eval unlearns with each method's preset (method.* is for 'forgetbench "
        "run')",
        "study": "meta-eval's pools are fixed per scale (study.* is for 'forgetbench run')",
        "study.workers": READ,
        "study.methods": READ,
    },
    # `bench study` times `forgetbench run` on the built-in miniature: it reads what run reads.
    "bench study": {
        "model": "bench study times the built-in miniature's study",
        "benchmark": "bench study times the built-in miniature's study",
    },
    # `bench train` times generate, pretrain, finetune and retain90 of the miniature at --scale.
    "bench train": {
        "model": "bench train times the built-in miniature's training",
        "benchmark.path": "bench train times the built-in miniature's training",
        "benchmark.split": "bench train times the full and retain90 stages",
        "eval": "bench train evaluates with its own fixed settings",
    },
    # bench train with --model or model.size: one epoch of the full split, our loop and HF's
    # Trainer on train.*'s recipe (forgetbench.train.throughput).
    "bench throughput": {
        "train": READ,
        "model": READ,
        "seed": READ,
        "benchmark.path": READ,
        "train.epochs": "bench train times one epoch (--steps N: its first N steps)",
        "train.checkpoint_every": "bench train writes no checkpoints",
        "train.lora": "bench train times full-parameter finetuning",
        "train.lora_rank": "bench train times full-parameter finetuning",
        "train.lora_alpha": "bench train times full-parameter finetuning",
        "benchmark.split": "bench train finetunes on the full split",
        "eval": "bench train evaluates nothing",
    },
}
# Read only by the built-in miniature: refused when the model is the user's (--model, --data or
# another benchmark).
UNUSED_WITH_A_MODEL: dict[str, dict[str, str | None]] = {
    "finetune": {"scale": "it sizes the built-in miniature; the model is --model"},
    "bench": {
        "scale": "it sizes the built-in miniature; the model is --model",
        "seed": "bench eval of a given --model trains nothing",
    },
    **{
        command: {
            "scale": "it sizes the built-in miniature; the model is --model",
            # train.* is how a model is finetuned; with --model nothing is finetuned, the given
            # model is the start of unlearning.
            "train": f"{command} starts from the given --model as it is, so nothing is "
            "finetuned (train.* is for 'forgetbench finetune'; unlearning's loop is unlearn.*)",
            "train.max_length": READ,
        }
        for command in ("unlearn", "run")
    },
}
# model.size builds the miniature's model; a given --model has its own shape.
for _command in ("finetune", "unlearn", "run", "sweep", "attack", "bench"):
    UNUSED_WITH_A_MODEL.setdefault(_command, {})["model.size"] = (
        "it shapes only the built-in model; yours is --model"
    )
UNUSED_WITH_A_MODEL["run"]["eval.mia_shadows"] = (
    "shadow models are trained only for the built-in miniature; give yours with "
    "study.mia_shadow_models"
)


def unused_reason(unused: Mapping[str, str | None], key: str) -> str | None:
    """Why `key` is not read, from the longest entry of `unused` that is it or a section of it."""
    matches = [name for name in unused if key == name or key.startswith(name + ".")]
    return unused[max(matches, key=len)] if matches else None


def field_at(key: str) -> FieldInfo:
    model: type[BaseModel] = RunConfig
    *sections, name = key.split(".")
    for section in sections:
        model = model.model_fields[section].annotation  # type: ignore[assignment]
    return model.model_fields[name]


def _is_list(info: FieldInfo) -> bool:
    return typing.get_origin(info.annotation) is list


def _item_type(info: FieldInfo) -> Any:
    """The type of one value: a list's item, or the field's type without `| None`."""
    annotation = info.annotation
    if _is_list(info):
        return typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def _choices(annotation: Any) -> tuple[str, ...]:
    return typing.get_args(annotation) if typing.get_origin(annotation) is Literal else ()


def _is_method_name(annotation: Any) -> bool:
    # On a field pydantic moves the marker into the FieldInfo's metadata; inside a list it stays
    # on the Annotated item type.
    if isinstance(annotation, FieldInfo):
        extras = annotation.metadata
    else:
        extras = getattr(annotation, "__metadata__", ())
    return any(isinstance(extra, RegisteredMethod) for extra in extras)


def comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def flag_type(flag: Flag, command: str) -> Callable[[str], Any]:
    """How argparse turns the flag's text into a typed value: by its own key's field, so run's
    --method is one name, as elsewhere, and becomes a list of one afterwards."""
    info = field_at(flag.key)
    if flag.repeat:
        return str
    if _is_list(info) and flag.none:
        word, choices = flag.none, _choices(_item_type(info))
        offered = f"; {word} = no {flag.dest}" if command in flag.none_in else ""

        def listed(text: str) -> list[str]:
            if text.strip() == word:
                return []
            items = comma_list(text)
            unknown = [item for item in items if choices and item not in choices]
            if unknown:  # said here, where the word that empties the list is known
                raise argparse.ArgumentTypeError(
                    f"{unknown[0]!r} is not one of {', '.join(choices)}{offered}"
                )
            return items

        return listed
    if _is_list(info):
        return comma_list
    item = _item_type(info)
    return item if item in (int, float) else str


def flag_value(flag: Flag, command: str, value: Any) -> Any:
    """The typed value for the key the flag sets in `command`."""
    own_list = _is_list(field_at(flag.key))
    return [value] if _is_list(field_at(flag.key_for(command))) and not own_list else value


def flag_metavar(flag: Flag, command: str) -> str:
    info = field_at(flag.key_for(command))
    item = _item_type(info)
    if _is_method_name(info) or _is_method_name(item):
        one = "METHOD"
    else:
        split = flag.key == "benchmark.split"
        choices = SPLIT_CHOICES.get(command, SPLITS) if split else _choices(item)
        one = "{" + ",".join(choices) + "}" if choices else ""
    if flag.repeat:
        return "FILE_OR_MODULE"
    if _is_list(field_at(flag.key)):
        return f"{one}[,...]" + (f"|{flag.none}" if command in flag.none_in else "")
    return one or flag.dest.upper()


def flag_help(flag: Flag, command: str) -> str:
    key = flag.key_for(command)
    info = field_at(key)
    one_of_a_list = _is_list(info) and not _is_list(field_at(flag.key))
    if command in flag.help:
        given = flag.help[command]
        text = given if isinstance(given, str) else given()
    elif one_of_a_list:
        plural = next(f.name for f in FLAGS if f.key == key)
        text = f"same as {plural} with one name"
    else:
        text = info.description or key
    # Read only by the built-in miniature: refused beside --model, which the help says.
    mini_only = "; not with --model" if key in UNUSED_WITH_A_MODEL.get(command, {}) else ""
    if command in flag.required:
        return text if text.endswith("(required)") else f"{text} (required)"
    if command in flag.defaults and command not in flag.help:
        return f"{text} (default: {flag.defaults[command]}{mini_only})"
    default = info.default
    if command in flag.help or one_of_a_list or default is None or info.default_factory:
        return f"{text} ({mini_only[2:]})" if mini_only else text
    shown = ",".join(default) if isinstance(default, list) else default
    return f"{text} (default: {shown}{mini_only})"


# --- docs/config.md -----------------------------------------------------------------------------

DOCS_COMMAND = "python -m forgetbench.options > docs/config.md"


def config_reference() -> str:
    """docs/config.md: every config key with its type, default and description, from the models
    (tests/test_options.py fails when the file is out of date)."""
    lines = [
        "# Configuration reference",
        "",
        f"Generated from `forgetbench.config` by `{DOCS_COMMAND}`; do not edit by hand.",
        "A run config is YAML with these keys (`forgetbench config --schema` prints its JSON",
        "schema); `KEY=VALUE` on the command line overrides one, and the flags are shorthands.",
        "A method's own options are `method.<option>` (docs/methods.md).",
        "",
        "| key | flag | type | default | description |",
        "|---|---|---|---|---|",
    ]
    flags: dict[str, list[str]] = {}
    for flag in FLAGS:
        flags.setdefault(flag.key, []).append(flag.name)
        for command, key in flag.keys.items():
            flags.setdefault(key, []).append(f"{flag.name} ({command})")
    for key, info in _fields(RunConfig):
        cells = [
            f"`{key}`",
            ", ".join(f"`{f}`" for f in flags.get(key, [])),
            _type_name(info),
            _default(info),
            info.description or "",
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, FieldInfo]]:
    rows = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += _fields(annotation, f"{prefix}{name}.")
        else:
            rows.append((prefix + name, info))
    return rows


def _type_name(info: FieldInfo) -> str:
    def name(annotation: Any) -> str:
        if _is_method_name(annotation):
            return "method name"
        if choices := _choices(annotation):
            return ", ".join(choices[:-1]) + " or " + choices[-1]
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is list:
            item = name(args[0])
            return "list of method names" if item == "method name" else f"list of {item}"
        if origin is dict:
            return "mapping" if args[1] is Any else f"mapping of {name(args[0])} to {name(args[1])}"
        if origin in (typing.Union, types.UnionType):
            return " or ".join("unset" if a is type(None) else name(a) for a in args)
        return getattr(annotation, "__name__", str(annotation))

    bounds = {Ge: (">=", "ge"), Gt: (">", "gt"), Le: ("<=", "le"), Lt: ("<", "lt")}
    ranges = [
        f"{sign} {getattr(m, attr)}"
        for m in info.metadata
        for kind, (sign, attr) in bounds.items()
        if isinstance(m, kind)
    ]
    kind = "method name" if _is_method_name(info) else name(info.annotation)
    return kind + (f", {', '.join(ranges)}" if ranges else "")


def _default(info: FieldInfo) -> str:
    value = info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]
    if value is None:
        return "unset"
    return (
        yaml.safe_dump(value, default_flow_style=True, width=1000)
        .strip()
        .removesuffix("...")
        .strip()
    )


if __name__ == "__main__":
    print(config_reference(), end="")
