"""The README and the docs name only commands and options the CLI has: every `forgetbench ...`
in a code block or an inline code span is checked against the parser cli/parser.py builds."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from forgetbench.cli import build_parser

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# `forgetbench` as a command word: not `python -m forgetbench.cli`, `src/forgetbench/`, `forgetbench[ray]`.
_COMMAND = re.compile(r"(?<![\w/.\[-])forgetbench[ \t]+(.*)")
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_SPAN = re.compile(r"`([^`\n]+)`")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def command_lines(text: str) -> list[str]:
    """Every command line that runs forgetbench: in fenced blocks (continuations joined) and in
    inline code spans."""
    found = []
    for language, block in _FENCE.findall(text):
        if language.strip() in ("python", "toml"):  # `from forgetbench import ...` is no command
            continue
        # a shell comment is prose: `make demo  # installs forgetbench (CPU torch)`
        found += [
            re.split(r"(?:^|\s)#", line)[0] for line in block.replace("\\\n", " ").splitlines()
        ]
    prose = _FENCE.sub("", text)
    found += _SPAN.findall(prose)
    return [line for line in found if _COMMAND.search(line)]


def problems(line: str, parser: argparse.ArgumentParser) -> list[str]:
    """What in `line` the CLI does not have: an unknown command, action or option."""
    wrong = []
    for match in _COMMAND.finditer(line):
        rest = re.split(r"\s(?:&&|\|\|?|;)\s|\s#", match.group(1))[0]
        try:
            words = shlex.split(rest)
        except ValueError:  # an unbalanced quote in prose: take the words as they are
            words = rest.split()
        words = [w.rstrip(",.;:)") for w in words]
        if not words or words[0].startswith("-"):
            options, sub, where = words, parser, "forgetbench"
        else:
            name, *options = words
            if name.isupper():  # a placeholder: `forgetbench COMMAND --help`
                continue
            commands = _subcommands(parser)
            if name not in commands:
                wrong.append(f"command 'forgetbench {name}'")
                continue
            sub, where = commands[name], f"forgetbench {name}"
            actions = _subcommands(sub)
            if actions and options and not options[0].startswith("-") and "=" not in options[0]:
                if options[0] not in actions:
                    wrong.append(f"command '{where} {options[0]}'")
                    continue
                sub, where = actions[options[0]], f"{where} {options[0]}"
                options = options[1:]
        known = _options(sub) | _options(parser)
        for word in options:
            option = word.split("=", 1)[0]
            if re.fullmatch(r"--[a-z][a-z-]*", option) and option not in known:
                wrong.append(f"option '{option}' of '{where}'")
    return wrong


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_option_named_exists(page, parser):
    lines = command_lines(page.read_text(encoding="utf-8"))
    wrong = [
        f"{problem} in: {line.strip()}" for line in lines for problem in problems(line, parser)
    ]
    assert not wrong, f"{page.name} names what the CLI does not have:\n" + "\n".join(wrong)


def test_the_readme_shows_the_main_commands(parser):
    lines = command_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    named = {_COMMAND.search(line).group(1).split()[0] for line in lines}
    assert {"run", "compare", "finetune", "unlearn", "eval", "report"} <= named


def test_the_check_catches_what_is_wrong(parser):
    text = (
        "```bash\nforgetbench runn --scale tiny  # forgetbench (a comment)\n"
        "forgetbench run --scale tiny \\\n"
        "    --nope 1 --out x\nforgetbench data generat --out d\n```\n"
        "Then `forgetbench eval --retain-log L --model m` and `forgetbench eval --retian-log L`.\n"
        "`python -m forgetbench.cli` and `src/forgetbench/cli.py` are not commands.\n"
    )
    found = [p for line in command_lines(text) for p in problems(line, parser)]
    assert found == [
        "command 'forgetbench runn'",
        "option '--nope' of 'forgetbench run'",
        "command 'forgetbench data generat'",
        "option '--retian-log' of 'forgetbench eval'",
    ]


def test_the_demo_study_in_the_makefile_is_a_valid_command():
    # `make demo` runs minutes of work: its options must not be refused at the end of the install.
    from forgetbench.cli import build_parser, resolve_config

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    (study,) = re.findall(r"^DEMO_STUDY := (.+)$", makefile, flags=re.M)
    args = build_parser().parse_args(study.split())
    config = resolve_config(args)
    assert args.command == "run" and config.scale == "tiny"
    assert config.study.splits == ["forget10"] and config.eval.mia_shadows == 2


def test_the_readme_says_to_activate_the_environment_make_install_creates():
    # Every bare `forgetbench` and `python` in the README and docs/ is the installed one only in
    # the activated environment that `make install` creates in .venv.
    text = (ROOT / "README.md").read_text()
    assert ". .venv/bin/activate" in text
    assert "VENV ?= .venv" in (ROOT / "Makefile").read_text()
