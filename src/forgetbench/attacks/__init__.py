"""Robustness attacks on an unlearned model: does the forgotten knowledge come back?

Each attack is measured on the B half of the forget set (`halves`), so no attack trains on or is
shown the answers it is scored on: relearning finetunes on the A half (the study layer's
`study/relearn.py`), quantisation rounds the weights (`quantize`), in-context probes put A-half
facts before each B question (`incontext`, `study/attack_data.py`). `recovery` turns
before/after numbers into "knowledge recovered" against the finetuned model. `study/attack.py`
runs them on a study's models."""
