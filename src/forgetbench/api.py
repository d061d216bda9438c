"""The Python API on model objects (docs/python-api.md): `evaluate` scores a model the caller
holds, `unlearn` runs one method on it, `run` runs a study. Each builds the same typed config the
command line builds (so an unknown option or a bad value fails with the same sentence) and calls
the same functions as `forgetbench eval`, `forgetbench unlearn` and `forgetbench run`, so the
numbers are the commands' numbers. A model may be given as its folder too, loaded as the
commands load `--model`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.config import RunConfig, load_config, validate_config
from forgetbench.config_names import retain_split_for
from forgetbench.config_sections import UnlearnConfig
from forgetbench.errors import ConfigError

# The layers below import torch, transformers and the metrics: imported in the functions, so
# `import forgetbench` stays light (the package resolves these names on first use).


@dataclass(frozen=True)
class Evaluation:
    """What `evaluate` measured: `scores` holds the keys `forgetbench eval` writes to its
    summary's "scores" (`forget_quality` with a retain log, `model_utility`, `forget/rougeL`, ...);
    `log` is the TOFU-layout log (None for LUME data); `out` the folder written, if any."""

    scores: dict[str, Any]
    log: Any = None
    out: Path | None = None

    def __getitem__(self, key: str) -> Any:
        return self.scores[key]

    @property
    def forget_quality(self) -> float | None:
        """TOFU's forget quality (a KS-test p-value); None without a retain log."""
        return self.scores.get("forget_quality")

    @property
    def model_utility(self) -> float | None:
        return self.scores.get("model_utility")


@dataclass(frozen=True)
class Unlearned:
    """What `unlearn` returns: the model (the object given, trained in place), the loss of each
    optimizer step (as `forgetbench unlearn` records them), the method as configured and the
    seconds it took."""

    model: Any
    losses: list[float]
    method: Any
    seconds: float


def _name(model: Any) -> str:
    # What the template's `auto` reads (TOFU's checkpoints by name) and what the summary records.
    return str(getattr(model, "name_or_path", "") or "") or "in-memory model"


def _config(
    function: str,
    values: dict[str, tuple[str, Any]],
    options: Mapping[str, Any],
    *,
    plugins: Sequence[str] = (),
) -> RunConfig:
    """The typed config from a function's arguments; an error names the keyword the caller
    typed (`forgetbench.evaluate(mia=...)`) as the command line names its flag."""
    given = dict(values)
    for option, value in options.items():
        key = _unlearn_key(option) if function == "unlearn" else f"eval.{option}"
        given[key] = (option, value)
    if plugins:
        given["plugins"] = ("plugins", list(plugins))
    data: dict[str, Any] = {}
    for key, (_, value) in given.items():
        node = data
        *sections, last = key.split(".")
        for section in sections:
            node = node.setdefault(section, {})
        node[last] = value
    named = {key: f"forgetbench.{function}({option}=...)" for key, (option, _) in given.items()}
    return validate_config(data, source=f"forgetbench.{function}()", given_as=named)


def _unlearn_key(option: str) -> str:
    # A loop setting (lr, epochs, ...) is unlearn.*, the seed is the run's, anything else is an
    # option of the method (method.*), as `forgetbench unlearn --lr 1e-4 method.beta=0.2`.
    if option == "seed":
        return "seed"
    if option in UnlearnConfig.model_fields and option != "method":
        return f"unlearn.{option}"
    return f"method.{option}"


_PATH_TYPES = (str, os.PathLike)


def _given_model(function: str, model: Any, tokenizer: Any) -> tuple[Any, Any, str | None]:
    """(model, tokenizer, folder) from what the caller gave. A model folder (or Hub id) is
    loaded as the commands load `--model` (safetensors, a pad token added, placed on the
    configured device), with its own tokenizer unless one is given; a model object is used as
    it is. Anything else is one sentence naming the argument, not an AttributeError later."""
    call = f"forgetbench.{function}"
    folder = None
    if isinstance(model, _PATH_TYPES):
        from forgetbench.modeling.loading import load_model

        folder = os.fspath(model)
        model, own = load_model(folder)
        tokenizer = own if tokenizer is None else tokenizer
    elif not (callable(model) and hasattr(model, "parameters") and hasattr(model, "training")):
        raise ConfigError(
            f"{call}(model=...) got {_kind(model)}, not a model",
            "pass a Hugging Face causal LM (AutoModelForCausalLM.from_pretrained(FOLDER)) or "
            "the model's folder as a path",
        )
    if tokenizer is None:
        raise ConfigError(
            f"{call}(tokenizer=...) is None, and a model object comes without one",
            "pass the model's tokenizer (AutoTokenizer.from_pretrained(FOLDER)), or the model "
            "as its folder's path, whose tokenizer is loaded with it",
        )
    if not (callable(tokenizer) and hasattr(tokenizer, "pad_token_id")):
        raise ConfigError(
            f"{call}(tokenizer=...) got {_kind(tokenizer)}, not a tokenizer",
            "pass the model's tokenizer (AutoTokenizer.from_pretrained(FOLDER)), or None with "
            "the model's folder",
        )
    return model, tokenizer, folder


def _check_paths(function: str, **paths: Any) -> None:
    """Arguments that name a file or folder: a str or a path (None where optional)."""
    for name, value in paths.items():
        if value is not None and not isinstance(value, _PATH_TYPES):
            raise ConfigError(
                f"forgetbench.{function}({name}=...) got {_kind(value)}, not a path",
                f"pass {name} as a str or pathlib.Path",
            )


def _kind(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _pad_id(tokenizer: Any) -> None:
    if getattr(tokenizer, "pad_token_id", None) is None:
        raise ConfigError(
            "the tokenizer has no pad token, which batching needs",
            "add one before calling: tokenizer.add_special_tokens({'pad_token': '<pad>'}) and "
            "model.resize_token_embeddings(len(tokenizer)), as 'forgetbench eval' does",
        )


def evaluate(
    model: Any,
    tokenizer: Any = None,
    *,
    data: str | Path,
    split: str = "forget10",
    retain_log: str | Path | None = None,
    benchmark: str | None = None,
    template: str = "auto",
    out: str | Path | None = None,
    **eval_options: Any,
) -> Evaluation:
    """Every metric of `model` (a Hugging Face causal LM on any device and dtype, or its folder,
    loaded with its own tokenizer when `tokenizer` is None) on `data`'s
    `split`: the numbers `forgetbench eval --model FOLDER --data DATA --split SPLIT` gives for
    the same weights. `retain_log`: a retain model's eval log, for forget quality.
    `eval_options`: any `eval.*` key (docs/config.md), e.g. `max_questions=50, mia=False`.
    Nothing is written unless `out` names a folder (then the same files as the command)."""
    from forgetbench.eval.runner import SUMMARY_NAME, evaluate_model, write_evaluation
    from forgetbench.metrics import METRICS
    from forgetbench.modeling.templates import resolve_template
    from forgetbench.study.evaluate import eval_extension, read_reference, require_eval_files

    _check_paths("evaluate", data=data, retain_log=retain_log, out=out)
    model, tokenizer, folder_given = _given_model("evaluate", model, tokenizer)
    name = folder_given or _name(model)
    values = {
        "model.name": ("model", name), "benchmark.path": ("data", str(data)),
        "benchmark.split": ("split", split), "model.template": ("template", template),
    }  # fmt: skip
    if benchmark is not None:
        values["benchmark.name"] = ("benchmark", benchmark)
    config = _config("evaluate", values, eval_options)
    folder = Path(out) if out is not None else None
    if folder is not None and (folder / SUMMARY_NAME).exists():
        raise ConfigError(
            f"{folder / SUMMARY_NAME} already exists",
            "pass another out=; finished evaluations are never overwritten",
        )
    _pad_id(tokenizer)
    extend = eval_extension(config, folder_given, read_reference(retain_log))
    if config.benchmark.name != "lume":
        require_eval_files(config, Path(data), quiet=False)
    # As `forgetbench eval`: given data under the default benchmark name is TOFU-layout files.
    benchmark_name = "tofu" if config.benchmark.name == "mini" else config.benchmark.name
    was_training = model.training
    try:
        log, scores, extra = evaluate_model(
            model, tokenizer, resolve_template(config.model.template, tokenizer, name),
            data=Path(data), split=split, benchmark=benchmark_name,
            eval_config=config.eval, max_length=config.train.max_length,
        )  # fmt: skip
    finally:
        model.train(was_training)  # the backend puts it in eval mode; a Trainer's goes back
    scores.update(extend(log, scores))
    if folder is not None:
        info = {
            "model": name,
            "data": str(data),
            "benchmark": benchmark_name,
            "split": split,
            "retain_log": str(retain_log) if retain_log else None,
            "forgetbench": __version__,
            "metric_versions": {n: m.version for n, m in METRICS.items()},
            "config": config.model_dump(),
        }
        # No cache key: an object's weights are not a folder the cache could name.
        write_evaluation(folder, "python-api", log, scores, extra, info)
    return Evaluation(scores, log, folder)


def unlearn(
    model: Any,
    tokenizer: Any = None,
    *,
    data: str | Path,
    method: str,
    split: str = "forget10",
    template: str = "auto",
    max_length: int = 512,
    progress: bool = False,
    plugins: Sequence[str] = (),
    **options: Any,
) -> Unlearned:
    """Run `method` on `model` (trained in place, on its own device; given as a folder, it is
    loaded as the command loads it, and `.model` of the result is the trained copy) to forget
    `data`'s `split`,
    as `forgetbench unlearn --model FOLDER --data DATA --method METHOD` does from a folder: TOFU's
    recipe (unlearn.preset to change it), the same items, the same losses. `options`: loop
    settings (`lr`, `epochs`, `batch_size`, `per_device_batch_size`, `loss_reduction`, `preset`,
    `lora`, ... as unlearn.*), `seed`, and the method's own options (`beta=0.2`)."""
    from forgetbench.data.tofu import load_tofu
    from forgetbench.eval.runner import tofu_root
    from forgetbench.methods.refusals import load_refusals
    from forgetbench.modeling.templates import resolve_template
    from forgetbench.study.inputs import external_unlearn_defaults
    from forgetbench.study.unlearn import forget_records, resolve_method, unlearn_lora
    from forgetbench.train.unlearn import unlearn_model

    _check_paths("unlearn", data=data)
    if isinstance(plugins, _PATH_TYPES) or not all(isinstance(p, _PATH_TYPES) for p in plugins):
        raise ConfigError(
            f"forgetbench.unlearn(plugins=...) got {_kind(plugins)}, not a list of plugins",
            'pass a list of files or module names, e.g. plugins=["my_method.py"]',
        )
    model, tokenizer, folder_given = _given_model("unlearn", model, tokenizer)
    name = folder_given or _name(model)
    values = {
        "model.name": ("model", name), "benchmark.path": ("data", str(data)),
        "benchmark.split": ("split", split), "model.template": ("template", template),
        "unlearn.method": ("method", method), "train.max_length": ("max_length", max_length),
    }  # fmt: skip
    config = _config("unlearn", values, options, plugins=plugins)
    retain_split = retain_split_for(split)
    _pad_id(tokenizer)
    tofu = tofu_root(data)
    loop, defaults = external_unlearn_defaults()
    loop, configured = resolve_method(config, method, loop, defaults)
    forget = forget_records(tofu, split, configured)
    with tempfile.TemporaryDirectory(prefix="forgetbench-unlearn-") as work:
        model, losses, seconds = unlearn_model(
            model, tokenizer, forget=forget, retain=load_tofu(tofu, retain_split),
            method=configured, config=loop,
            template=resolve_template(config.model.template, tokenizer, name),
            refusals=load_refusals(config.unlearn.refusals_file), split=split,
            work_dir=Path(work), max_length=config.train.max_length, progress=progress,
            lora=unlearn_lora(config), layers=config.unlearn.layers,
        )  # fmt: skip
    return Unlearned(model, losses, configured, seconds)


def run(config: RunConfig | Mapping[str, Any] | str | Path, *, progress: bool = False) -> Any:
    """Run a study as `forgetbench run --config FILE` does: `config` is a YAML file, a mapping
    of the same keys, or a `RunConfig`. Writes results.json and the report to the config's
    `out` and returns the results (`forgetbench.results.Results`: `.rows`, one per method,
    split and trajectory step)."""
    from forgetbench.device import configure_model
    from forgetbench.report.html import build_report
    from forgetbench.results import load_results
    from forgetbench.study.run import run_study
    from forgetbench.train.sharding import check_sharding

    if isinstance(config, RunConfig):
        typed = config
    elif isinstance(config, Mapping):
        typed = validate_config(
            dict(config), source="the mapping given to forgetbench.run", study=True
        )
    elif isinstance(config, _PATH_TYPES):
        typed = load_config(config, study=True)
    else:
        raise ConfigError(
            f"forgetbench.run(config=...) got {_kind(config)}, not a config",
            "pass a YAML file's path, a mapping of its keys ({'scale': 'tiny', ...}) or a "
            "RunConfig",
        )
    configure_model(typed.model)
    # As `forgetbench run` refuses it: a sharding that cannot run says so before any work.
    check_sharding(typed, "run")
    out = Path(typed.out)
    run_study(typed, out=out, progress=progress)
    build_report(out)
    return load_results(out)


__all__ = ["Evaluation", "Unlearned", "evaluate", "run", "unlearn"]
