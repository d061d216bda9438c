"""Benchmark sources -> typed records (see forgetbench.records): the loaders of TOFU (`tofu`),
LUME (`lume`), MUSE (`muse`), WMDP (`wmdp`) and RWKU (`rwku`; `rwku_corpus`: which targets a
run forgets and their forget corpus as training records), with what MUSE's and WMDP's share
(`released`: a released layout's files and the survey that names every missing one) and the
documents cut into token chunks as their training code cuts them (`chunks`); per-question
evaluation logs in the TOFU layout (`logs`, `log_layout`), and open-unlearning's evaluation files
read as ours (`open_unlearning` for TOFU, `open_unlearning_evals` for MUSE and WMDP)."""
