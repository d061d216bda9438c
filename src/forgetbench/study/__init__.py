"""The top of forgetbench: what a command runs on and how its pieces are put together.

`resolve` (resolved.py) is the only place that builds or loads a study's data and models (the
miniature's, trained and cached by `Miniature` in miniature.py, or a given Hugging Face model)
into a `Study` (inputs.py); `evaluate_cached` (evaluate.py) is the only cached evaluation. The
commands (`run`, `unlearn`, `sanity`, `bench`, `attack`, `sweep`, `meta-eval`) are built from the
two; `run_study` (run.py) picks the study a benchmark runs: a document benchmark's (corpus.py)
or the TOFU-shaped one (tofu.py). `train/` and `eval/` below never import from here;
docs/development.md names every module."""
