"""What a config gives a study to run on: the user's model and data (--model, --data, or
`model.name`, `benchmark.path` in a config file or KEY=VALUE), or, when it names neither, the
built-in miniature's. The config alone carries them; every command and study function asks here.
Torch-free, so the command line can refuse what the miniature does not read before any import."""

from __future__ import annotations

from forgetbench.config import RunConfig
from forgetbench.config_names import DOCUMENT_BENCHMARKS
from forgetbench.config_sections import ModelConfig


def given_model(config: RunConfig) -> str | None:
    """The user's model (a Hugging Face id or a folder), or None for the built-in miniature's."""
    name = config.model.name
    return None if name == ModelConfig.model_fields["name"].default else name


def given_data(config: RunConfig) -> str | None:
    """The user's data (a TOFU-layout folder, a file or a Hugging Face dataset id), or None."""
    return config.benchmark.path


def recorded_benchmark(config: RunConfig) -> str:
    """The benchmark a study or an evaluation ran, as results.json and summary.json record it:
    the named one, where the default name (mini, the built-in miniature) with the user's data
    means a TOFU-layout folder (tofu), which may carry the miniature's formats and LUME beside
    it: the data is not the built-in miniature's."""
    name = config.benchmark.name
    return "tofu" if name == "mini" and given_data(config) is not None else name


def is_miniature(config: RunConfig) -> bool:
    """The study runs on the built-in miniature: its benchmark, data and models."""
    return (
        config.benchmark.name == "mini"
        and given_data(config) is None
        and given_model(config) is None
    )


def trains_given_model(config: RunConfig) -> bool:
    """`bench train` measures throughput (forgetbench's loop against HF's Trainer) on a model the
    user names: `--model`, or a built-in shape other than the scale's own (`model.size`)."""
    return given_model(config) is not None or config.model.size != "auto"


def builtin_models(config: RunConfig) -> bool:
    """The study trains the built-in tiny models (so `--scale` and the miniature's `train.*` apply):
    the miniature's study, or a document benchmark's (MUSE, WMDP) on any data without --model."""
    if config.benchmark.name in DOCUMENT_BENCHMARKS:
        return given_model(config) is None
    return is_miniature(config)
