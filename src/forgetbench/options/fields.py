"""A config key's field as the options read it: the field at a dotted key, whether it holds a
list, the type of one value, the values it allows, whether it names a registered method."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from forgetbench.config import RunConfig
from forgetbench.config_names import RegisteredMethod


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
