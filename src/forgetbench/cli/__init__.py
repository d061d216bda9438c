"""The `forgetbench` command, one module per command group: `main` (the error boundary), `parser`
(every command and its own options), `flags` (the options several commands share: the flags
generated from the typed config, --debug, --strict), `parsing` (how a command line is read:
one-sentence errors, lazy help, a flag given once, overrides anywhere), `config` (command line
-> typed config, and the refusals that need no work), `usage` (what every command module shares:
the usage error, the progress switch), then `train` (finetune, unlearn), `evaluate` (eval,
sanity), `study` (run, attack, sweep, meta-eval, report), `bench`, `data`, `cache` and `compare`.
A command parses, makes the config, calls one function of the study layer and prints its result."""

from forgetbench.cli.config import resolve_config
from forgetbench.cli.main import as_error, main
from forgetbench.cli.parser import build_parser
from forgetbench.cli.parsing import parse_args

__all__ = ["as_error", "build_parser", "main", "parse_args", "resolve_config"]
