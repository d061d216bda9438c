"""The command line as a view of the typed config (forgetbench.config).

A flag is a shorthand for one config key, declared once (`flags`: `FLAGS`); its type,
description and default are the config field's (`fields`: a key's field as the options read it).
Which command reads which key, and why the others do not, is `unused`. From these come each
command's argparse arguments and its `--help`, only what it reads (`arguments`), the refusal of
what it does not read ("forgetbench eval does not use --epochs: eval trains nothing",
cli/config.py), and docs/config.md (`reference`, which `python -m forgetbench.options` prints).
"""
