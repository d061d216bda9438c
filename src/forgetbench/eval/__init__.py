"""Evaluation of one model: from model outputs (or imported logs) to per-question logs and
summaries. The tasks (`tasks/`: TOFU, probes, MIA, formats, LUME, MUSE, WMDP) build requests
(`requests`) that a backend answers (`backend`, from `outputs/`); `runner` runs every task on one
model and caches its logs and summary, `summary` turns a TOFU-layout log into TOFU's numbers,
`distributed` shards the questions over processes, `lmeval` adds lm-evaluation-harness's
utility (`rwku_utility`: RWKU's utility through it). Beside them: `sanity` (TOFU's sanity checks of forget quality), `bench` (`forgetbench
bench eval`: fast against naive) and `compare_released` (MUSE or WMDP results side by side)."""
