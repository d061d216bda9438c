"""The command line is generated from the typed config: every flag sets a config field, each
command's --help shows what it reads, the rest is refused with its reason, and docs/config.md is
the models' own table."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from typing import ClassVar

import pytest

import forgetbench.cli
from forgetbench.cli import build_parser, main
from forgetbench.config import RunConfig
from forgetbench.methods import METHODS, method_names
from forgetbench.options.fields import field_at
from forgetbench.options.flags import COMMANDS, FLAGS
from forgetbench.options.reference import DOCS_COMMAND, config_reference
from forgetbench.options.unused import UNUSED, unused_reason

DOCS = Path(__file__).parents[1] / "docs" / "config.md"
# Options of a command that are not config keys: output, debugging, the config file itself.
NOT_CONFIG = {"-h", "--help", "--json", "--debug", "--config", "--no-progress", "--retain-log"}
# sweep's executor options: where trials run, not what they compute.
NOT_CONFIG |= {"--executor", "--address", "--cpus-per-trial", "--gpus-per-trial"}
# attack's reference models, given as folders.
NOT_CONFIG |= {"--finetuned", "--retain"}
# run's and sweep's verdict on a failed validity gate: the exit code, not what they compute.
NOT_CONFIG |= {"--strict"}
# bench train's measured length: how many optimizer steps to time, not what they compute.
NOT_CONFIG |= {"--steps"}
# bench's profile: what the report also records, not what is computed.
NOT_CONFIG |= {"--profile"}


def _subparser(command: str) -> argparse.ArgumentParser:
    subparsers = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    return subparsers.choices[command]


def _help(command: str) -> str:
    return _subparser(command).format_help()


def test_eval_help_lists_what_eval_reads_and_nothing_else():
    text = _help("eval")
    for shown in ("--model", "--data", "--split", "--benchmark", "--out", "--retain-log"):
        assert shown in text
    for hidden in ("--epochs", "--lr", "--scale", "--seed", "--method", "--methods", "--splits"):
        assert hidden not in text
    # The field's description and its default, or that the command needs it.
    assert "(default: forget10)" in text and "(required)" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_each_flag_is_in_help_exactly_when_the_command_reads_its_key(command):
    text = _help(command)
    for flag in FLAGS:
        read = unused_reason(UNUSED[command], flag.key_for(command)) is None
        assert (f"{flag.name} " in text) == read, (command, flag.name)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_in_the_parser_sets_a_config_field(command):
    by_name = {flag.name: flag for flag in FLAGS}
    for action in _subparser(command)._actions:
        for option in action.option_strings:
            if option in NOT_CONFIG or (command, option) == ("config", "--schema"):
                continue
            assert option in by_name, f"{command} {option} is not a config flag"
            field_at(by_name[option].key_for(command))  # raises KeyError if there is none


def test_an_unused_flag_is_refused_with_its_reason(capsys):
    code = main(["eval", "--model", "m", "--data", "d", "--out", "o", "--epochs", "3"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == (
        "error: forgetbench eval does not use --epochs: eval trains nothing — drop --epochs"
    )


def test_flags_reach_the_config_as_typed_values(monkeypatch):
    seen = {}

    def load_config(path, overrides, values, **_):
        seen.update(path=path, overrides=overrides, values=values)
        return RunConfig()

    monkeypatch.setattr(forgetbench.cli.config, "load_config", load_config)
    argv = ["config", "--lr", "0.5", "--epochs", "3", "--methods", "npo, rmu", "eval.mia=false"]
    assert main([*argv, "--json"]) == 0
    assert seen["overrides"] == ["eval.mia=false"]  # only what the user wrote as KEY=VALUE
    assert seen["values"] == {
        "unlearn.lr": ("--lr", 0.5),
        "unlearn.epochs": ("--epochs", 3),
        "study.methods": ("--methods", ["npo", "rmu"]),
    }


def test_a_flag_sets_another_key_where_the_command_says_so(capsys, monkeypatch, tmp_path):
    """finetune's --lr is train.lr; run's --method is a study of one method."""
    seen = {}

    def run_study(config, **kwargs):
        seen["config"] = config
        return {"rows": []}

    monkeypatch.setattr("forgetbench.study.run.run_study", run_study)
    monkeypatch.setattr("forgetbench.report.html.build_report", lambda out: out / "report.html")
    out = str(tmp_path / "run")
    argv = ["run", "--method", "npo", "--split", "forget05", "--lr", "0.5", "--out", out]
    assert main([*argv, "--json"]) == 0
    config = seen["config"]
    assert config.study.methods == ["npo"] and config.study.splits == ["forget05"]
    assert config.unlearn.lr == 0.5


def test_finetune_defaults_to_the_full_split_under_the_command_line(monkeypatch, tmp_path):
    from forgetbench.train.stages import StageResult

    splits = []

    def model(self, split, *, seed=None):
        splits.append(split)
        return StageResult("finetune", self.out / "model", True, [1.0], 0.0)

    monkeypatch.setattr("forgetbench.study.miniature.Miniature.model", model)
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("benchmark:\n  split: forget10\n")  # e.g. for 'unlearn'
    out = ["--out", str(tmp_path / "run"), "--json"]
    assert main(["finetune", "--config", str(yaml_file), *out]) == 0
    assert main(["finetune", "benchmark.split=retain90", *out]) == 0
    assert main(["finetune", "--split", "retain95", *out]) == 0
    assert splits == ["full", "retain90", "retain95"]


def test_a_newly_registered_method_is_accepted_without_touching_the_config(monkeypatch, capsys):
    monkeypatch.setattr(METHODS, "_entries", dict(METHODS._entries))

    @METHODS.register("toy_forget")
    @dataclasses.dataclass(frozen=True)
    class ToyForget:
        name: ClassVar[str] = "toy_forget"
        needs: ClassVar[frozenset[str]] = frozenset()

    assert main(["config", "--methods", "npo,toy_forget", "--method", "toy_forget", "--json"]) == 0
    config = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert config["study"]["methods"] == ["npo", "toy_forget"]
    assert config["unlearn"]["method"] == "toy_forget"
    assert main(["config", "--json"]) == 0  # and a study covers it by default
    assert json.loads(capsys.readouterr().out)["study"]["methods"][-1] == "toy_forget"


def test_an_unknown_method_is_named_by_the_option_that_gave_it(capsys):
    assert main(["unlearn", "--method", "nop", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --method: unknown method 'nop'; did you mean 'npo'?")
    assert main(["config", "unlearn.method=nop"]) == 2
    err = capsys.readouterr().err
    assert "invalid value unlearn.method='nop' in command line (did you mean 'npo'?)" in err


def test_config_schema_is_the_yaml_configs(capsys):
    assert main(["config", "--schema", "--json"]) == 0
    schema = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    unlearn = schema["$defs"]["UnlearnConfig"]
    assert unlearn["additionalProperties"] is False
    assert unlearn["properties"]["method"]["enum"] == list(method_names())
    assert schema["properties"]["scale"]["enum"] == ["tiny", "small", "full"]
    assert main(["config", "--schema", "--lr", "0.1"]) == 2
    assert "--schema describes every config" in capsys.readouterr().err


def test_docs_config_md_is_generated_from_the_models():
    text = config_reference()
    assert "| `unlearn.epochs` | `--epochs` | int or unset, >= 1, <= 10000 | unset |" in text
    assert "`--epochs (finetune)`" in text
    assert DOCS.read_text() == text, f"docs/config.md is out of date: run `{DOCS_COMMAND}`"


def test_the_table_of_flags_in_the_docs_is_the_generated_one():
    commands = (DOCS.parent / "commands.md").read_text()
    table = commands[commands.index("| flag | key | read by |") :].split("\n\n")[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    # "finetune (full, retain90/95/99), bench eval" reads as the commands finetune and bench.
    readers = [re.sub(r"\s*\([^)]*\)", "", commands.strip(" |")) for _, _, commands in rows]
    documented = {
        flag.strip("`| "): {c.split()[0] for c in commands.split(", ")}
        for (flags, _, _), commands in zip(rows, readers, strict=True)
        for flag in flags.split(", ")
    }
    assert set(documented) == {flag.name for flag in FLAGS}
    for flag in FLAGS:
        shown = {c for c in COMMANDS if c != "config" and f"{flag.name} " in _help(c)}
        assert documented[flag.name] == shown, flag.name
