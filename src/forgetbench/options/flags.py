"""The flags, each a shorthand for one config key, declared once in `FLAGS` with what differs
by command: the key it sets, its default, its help, whether it is required. With them the
commands that read a run config (`COMMANDS`) and the splits each accepts for --split
(`SPLIT_CHOICES`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from forgetbench.config import read_preset
from forgetbench.config_names import ATTACKS, FORGET_SPLITS, RETAIN_SPLITS, SCALES, SPLITS
from forgetbench.options.fields import field_at

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


def _loop_flag(what: str) -> Flag:
    """A setting of the training loop (epochs, lr): `forgetbench finetune`'s train.*, the
    unlearning commands' unlearn.*, each with the default it has there."""
    return Flag(
        f"--{what}",
        f"unlearn.{what}",
        keys={"finetune": f"train.{what}"},
        help={
            "finetune": lambda: _mini_finetune(what),
            **dict.fromkeys(_LOOP, lambda: _unlearn_loop(what)),
        },
    )


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
    _loop_flag("epochs"),
    _loop_flag("lr"),
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
