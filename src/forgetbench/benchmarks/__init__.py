"""Benchmarks that forgetbench builds or describes itself.

`mini/`: the offline miniature benchmark, one seeded generator (`generate_mini`) whose folder
holds a miniature of each benchmark a study runs: TOFU's (fictitious authors in TOFU's layout,
with its instance-level splits, the generalisation probes, Real Authors and World Facts, and the
five data-transformation formats), LUME's (stories and PII biographies), MUSE's (`muse/news/`, in
MUSE's released layout), WMDP's (`wmdp/`: its question files and corpora) and RWKU's (`rwku/`:
per-target folders in RWKU's released layout), beside the pretraining corpus its base model
learns the language from. `corpus.py`: the document benchmarks' descriptions (MUSE and WMDP;
RWKU's in `rwku.py`), registered by name in `CORPUS_BENCHMARKS`, which the study reads to build,
unlearn and score one without naming it; `description.py`: what a description says
(`CorpusBenchmark`)."""
