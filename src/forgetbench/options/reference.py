"""docs/config.md: every config key with its flags, type, default and description, generated
from the typed config (tests/test_options.py fails when the file is out of date)."""

from __future__ import annotations

import types
import typing
from typing import Any

import yaml
from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from forgetbench.config import RunConfig
from forgetbench.options.fields import _choices, _is_method_name
from forgetbench.options.flags import FLAGS

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
