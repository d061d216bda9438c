"""Typed run configuration: YAML holds data only, `a.b=c` overrides, unknown keys are errors.

Every option lives once in the config's sections (config_sections.py: one model's run;
config_study.py: the study's), with its default, its valid range and its description, and
`RunConfig` holds them all; the CLI (forgetbench.options), `forgetbench config --schema` and
docs/config.md are generated from these models, and the CLI and the Python API both go through
`load_config`, so a typo or an out-of-range value fails the same way everywhere. The names a
config accepts are config_names.py's; the shipped presets are read here.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from forgetbench.config_names import SCALES
from forgetbench.config_sections import (
    BenchmarkConfig,
    EvalConfig,
    ModelConfig,
    RWKUConfig,
    TrainConfig,
    UnlearnConfig,
    _Section,
)
from forgetbench.config_study import AttackConfig, StudyConfig
from forgetbench.device_names import DEVICE_SPEC, DEVICE_WORDS
from forgetbench.errors import ConfigError, UnknownNameError, did_you_mean
from forgetbench.io import MAX_DEPTH, check_depth, read_text

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
        description="options of the chosen method (method.beta=0.05; a study's reach each of "
        "study.methods that has the option); see docs/methods.md",
    )
    eval: EvalConfig = Field(default_factory=EvalConfig)
    rwku: RWKUConfig = Field(default_factory=RWKUConfig)
    study: StudyConfig = Field(default_factory=StudyConfig)
    attack: AttackConfig = Field(default_factory=AttackConfig)


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    values: Mapping[str, tuple[str, Any]] | None = None,
    *,
    ignore: tuple[str, ...] = (),
    study: bool = False,
) -> RunConfig:
    """Defaults, then the YAML file, then `a.b=c` overrides (values parsed as YAML scalars), then
    `values`: typed values by config key, each with the option that gave it (`{"unlearn.lr":
    ("--lr", 1e-4)}`), so an error names what the user typed. `ignore`: top-level sections of the
    file read by someone else (a sweep file's `sweep`). `study`: see `validate_config`."""
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
    source = " + ".join(sources) or "defaults"
    return validate_config(data, source=source, given_as=given_as, study=study)


def validate_config(
    data: dict[str, Any],
    *,
    source: str = "config",
    given_as: Mapping[str, str] | None = None,
    study: bool = False,
) -> RunConfig:
    """The typed config, or a one-sentence error. `study`: the config is a study's (`forgetbench
    run`), whose `method.*` options are for `study.methods`, not `unlearn.method`."""
    _load_plugins(data, source, given_as or {})
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise _one_line(exc, source, given_as or {}) from None
    from forgetbench.methods.base import build_method  # lazy: torch, as method_names above

    if study:
        _check_study_options(config)
    else:  # unknown or out-of-range options fail here
        build_method(config.unlearn.method, config.method)
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


def _check_study_options(config: RunConfig) -> None:
    """A study's `method.X` reaches each of its methods that has the option X (several share
    one, e.g. retain_weight), so it is refused only when none of them has it; a method without
    it runs as it would without the option (study/unlearn.py's `method_config`)."""
    from forgetbench.methods.base import build_method, method_names, method_options

    methods = config.study.methods
    known = {name: method_options(name) for name in methods}
    for key in config.method:
        if not any(key in options for options in known.values()):
            listed = ", ".join(methods)
            # Another method's option is no typo: what it lacks is a method that reads it.
            if any(key in method_options(name) for name in method_names()):
                what = f"method.{key} is an option of none of the study's methods ({listed})"
            else:
                every = sorted({option for options in known.values() for option in options})
                what = (
                    f"unknown option 'method.{key}'{did_you_mean(key, every)}: none of the "
                    f"study's methods ({listed}) has it"
                )
            raise ConfigError(
                what,
                "; ".join(f"options of {n}: {', '.join(o) or '(none)'}" for n, o in known.items())
                if len(methods) <= 3
                else "'forgetbench run --help' lists the methods, docs/methods.md their options",
            )
    for name, options in known.items():  # out-of-range values fail here
        build_method(name, {k: v for k, v in config.method.items() if k in options})


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
