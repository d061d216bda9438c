"""--help tells the truth: each command offers the splits it runs on and no other, the defaults
that apply on each path, required options as required, the methods with what they do, and the
commands in the order people use them."""

from __future__ import annotations

import argparse
import re

import pytest

from forgetbench.cli import build_parser, main, parse_args, resolve_config
from forgetbench.config_names import ATTACKS, SPLITS
from forgetbench.errors import ForgetbenchError
from forgetbench.methods.base import method_names, method_summary
from forgetbench.train.mini import mini_recipe


@pytest.fixture(autouse=True)
def _wide_help(monkeypatch):
    # argparse wraps at the terminal's width, and breaks "built-in" at its hyphen.
    monkeypatch.setenv("COLUMNS", "2000")


def _subparser(command: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = build_parser()
    for word in command.split():
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[word]
    return parser


def _help(command: str) -> str:
    return " ".join(_subparser(command).format_help().split())


# What each command needs besides --split to get past its checks; bench's split is bench eval's.
NEEDS = {
    "finetune": ["--out", "o"],
    "unlearn": ["--out", "o"],
    "eval": ["--model", "m", "--data", "d", "--out", "o"],
    "attack": ["--out", "o"],
    "meta-eval": ["--out", "o"],
    "bench": ["eval", "--out", "o"],
    "run": [],
}


def _offered(command: str) -> set[str]:
    """The split choices the command's --help shows (run's on --splits, its --split an alias)."""
    name = "--splits" if command == "run" else "--split"
    action = next(a for a in _subparser(command)._actions if name in a.option_strings)
    assert action.help is not argparse.SUPPRESS, f"{command} hides {name}"
    return set(re.fullmatch(r"\{(.*)\}(\[,\.\.\.\])?", action.metavar).group(1).split(","))


def _accepts(command: str, split: str) -> bool:
    name = "--splits" if command == "run" else "--split"
    argv = [command, *NEEDS[command], name, split]
    try:
        resolve_config(parse_args(build_parser(), argv))
    except ForgetbenchError:
        return False
    return True


@pytest.mark.parametrize("command", sorted(NEEDS))
def test_each_command_offers_exactly_the_splits_it_accepts(command):
    accepted = {split for split in SPLITS if _accepts(command, split)}
    assert accepted, command
    assert _offered(command) == accepted


def test_the_split_choices_differ_by_what_the_command_does():
    assert _offered("finetune") == {"full", "retain90", "retain95", "retain99"}
    assert _offered("unlearn") == _offered("eval") == {"forget01", "forget05", "forget10"}


def test_a_refused_split_says_what_the_command_trains_on(capsys, tmp_path):
    code = main(["finetune", "--split", "forget10", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: forgetbench finetune --split forget10: finetune")
    assert "use --split full, retain90, retain95 or retain99" in err
    # The user's own model too, not only the miniature: a forget split is never finetuned on.
    code = main(["finetune", "--model", "m", "--data", "d", "--split", "forget05", "--out", "o"])
    assert code == 2 and "--split forget05" in capsys.readouterr().err


def test_finetune_help_gives_the_defaults_of_both_paths():
    text = _help("finetune")
    recipes = [mini_recipe(scale).finetune for scale in ("tiny", "small", "full")]
    epochs = "/".join(str(r.epochs) for r in recipes)
    assert f"finetuning epochs (default: 5 for --model; the built-in miniature's own recipe " \
        f"otherwise: {epochs} at tiny/small/full)" in text  # fmt: skip
    assert "(default: 1e-05 for --model; the built-in miniature's own recipe otherwise: " \
        f"{recipes[0].lr:g})" in text  # fmt: skip
    # and the miniature really trains with it when neither flag is given
    assert epochs == "25/8/7"


@pytest.mark.parametrize(
    ("command", "required"),
    [
        ("finetune", ["--out OUT"]),
        ("unlearn", ["--out OUT"]),
        ("eval", ["--model MODEL", "--data DATA", "--out OUT"]),
        ("attack", ["--out OUT"]),
        ("meta-eval", ["--out OUT"]),
        ("sweep", ["--config CONFIG", "--out OUT"]),
        ("data generate", ["--out OUT"]),
    ],
)
def test_required_options_are_required_in_the_usage_line(command, required):
    usage = " ".join(_subparser(command).format_usage().split())
    for option in required:
        assert f" {option}" in usage and f"[{option}]" not in usage, (command, option)


def test_optional_options_are_not_claimed_required():
    text = _help("run")
    assert "(required)" not in text and "[--out OUT]" in text
    assert "[--model MODEL]" in _help("finetune") and "tiny-llama" not in _help("eval")


def test_a_missing_required_option_is_one_line(capsys):
    assert main(["eval", "--model", "m", "--data", "d"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: forgetbench eval: the following arguments are required: --out — see "
        "'forgetbench eval --help'"
    )


def test_run_names_each_concept_once_and_documents_the_aliases(capsys, tmp_path):
    text = _help("run")
    assert "--methods METHOD[,...]" in text and "--method NAME is the same with one" in text
    assert "--split NAME is the same with one" in text
    assert "--method METHOD" not in text and "--split {" not in text
    # the aliases still work, as documented
    assert main(["config", "--method", "npo", "--json"]) == 0
    capsys.readouterr()


def test_attacks_none_turns_the_attacks_off(capsys):
    assert main(["config", "--attacks", "none", "--json"]) == 0
    assert '"attacks": []' in capsys.readouterr().out
    assert "none = no attacks" in _help("run")
    assert main(["config", "--attacks", ",".join(ATTACKS), "--json"]) == 0
    capsys.readouterr()
    # attack itself needs at least one
    assert main(["attack", "--attacks", "none", "--out", "o"]) == 2
    assert "empty --attacks" in capsys.readouterr().err
    # run's usage and its refusal of an unknown attack name the word too; attack's do not
    assert "--attacks {relearn,relearn_full,quantize,incontext}[,...]|none" in _help("run")
    assert "[,...]|none" not in _help("attack")
    assert main(["run", "--attacks", "relearn,foo", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert (
        "'foo' is not one of relearn, relearn_full, quantize, incontext; none = no attacks" in err
    )
    assert main(["attack", "--attacks", "foo", "--out", "o"]) == 2
    assert "none" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["finetune", "unlearn", "run", "bench"])
def test_scale_says_it_is_refused_with_a_model(command):
    text = " ".join(_help(command).split())
    assert "--scale {tiny,small,full} size of the built-in miniature" in text
    assert "(default: small; not with --model)" in text
    assert "--scale" not in _help("eval")


def test_the_top_level_help_says_data_writes_the_miniature(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "data write the built-in miniature benchmark, or inspect data" in text


@pytest.mark.parametrize("command", ["unlearn", "run"])
def test_the_method_list_has_every_method_with_its_line(command):
    text = _help(command)
    for name in method_names():
        summary = method_summary(name)
        assert len(summary) > 20 and summary.endswith(".")
        assert f"{name} {summary}" in text


def test_commands_are_listed_in_the_order_of_use():
    text = build_parser().format_help()
    listed = re.findall(r"^    (\S+)", text.split("COMMAND\n", 1)[1], flags=re.MULTILINE)
    assert listed[:4] == ["run", "finetune", "unlearn", "eval"]
    assert listed[-1] == "bench" and len(listed) == len(set(listed)) == 14


def test_data_generate_scale_has_the_choices_run_has():
    generate = _help("data generate")
    assert "--scale {tiny,small,full}" in generate and "(default: tiny)" in generate
    assert "--scale {tiny,small,full}" in _help("run")


def test_unlearn_with_a_model_refuses_train_options_truthfully(capsys):
    code = main(["unlearn", "--model", "m", "--data", "d", "--out", "o", "train.lora=true"])
    err = capsys.readouterr().err
    assert code == 2 and "does not use train.lora" in err
    assert "not finetuned" not in err and "train.* is for 'forgetbench finetune'" in err


@pytest.mark.parametrize("command", [c for c in NEEDS if c != "run"] + ["run", "config"])
def test_the_override_example_in_help_is_accepted(command):
    example = re.search(r"e\.g\. (\S+)", _help(command).split("KEY=VALUE config overrides")[1])
    argv = [command, *NEEDS.get(command, []), example.group(1)]
    resolve_config(parse_args(build_parser(), argv))


# Each answers with help or one sentence; none may import the model code to do so.
QUICK_ANSWERS = [
    ["run", "--scale", "hugee"],
    ["run", "--help"],
    ["sanity", "eval.batch_size=x"],
    ["eval", "--model", "m", "--data", "d", "eval.batch_size=x"],
]


def test_help_and_a_bad_option_answer_before_the_model_code_loads():
    # A fresh interpreter: what each command imported before it answered. transformers and the
    # study layer take seconds to import; a typo's one sentence must not wait for them. One
    # interpreter runs the four in turn, checking after each (a new one costs seconds of CPU):
    # a command that imported the model code is named, whichever ran before it.
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\nfrom forgetbench.cli import main\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "    loaded = [m for m in ('transformers', 'forgetbench.modeling', 'forgetbench.study.run')"
        " if m in sys.modules]\n"
        "    print(json.dumps([argv, loaded]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(QUICK_ANSWERS)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[[")]
    assert answers == [[argv, []] for argv in QUICK_ANSWERS], done.stderr
