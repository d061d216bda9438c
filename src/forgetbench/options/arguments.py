"""A flag as one command's argparse argument: how its text becomes a typed value (`flag_type`,
`flag_value`), its metavar, and its line of --help, which says the default that applies in that
command."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from forgetbench.config_names import SPLITS
from forgetbench.options.fields import _choices, _is_list, _is_method_name, _item_type, field_at
from forgetbench.options.flags import FLAGS, SPLIT_CHOICES, Flag
from forgetbench.options.unused import UNUSED_WITH_A_MODEL


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
