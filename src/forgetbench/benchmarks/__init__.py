"""Benchmarks that forgetbench builds or describes itself: the offline miniature benchmark
(`mini/`: a seeded generator of a TOFU-shaped world, with MUSE-, WMDP- and RWKU-shaped
miniatures) and the document benchmarks' descriptions (`corpus.py`: MUSE, WMDP and RWKU, registered by name in
`CORPUS_BENCHMARKS`, which the study reads to build, unlearn and score one without naming it)."""
