"""Presenting results, from results.json (and meta_eval.json, sweep.json) alone; every number
arrives computed (`forgetbench.rows`, `criteria`, `validity`). The terminal's tables
(`console`, `tables`), the self-contained HTML report (`html` and its `templates/`; its
membership-inference tables `mia_tables`, example generations `examples` and meta-evaluation
section `meta_section`) with its figures as inline SVG (`plots`, `meta_plot`, `generalisation`,
`robustness`, `transfer`, `muse_wmdp` with MUSE's and WMDP's `corpus_plots`, `rwku` (RWKU's per-target tables); `figure` draws
them alike, in one style and one colour per method), the validity gates said first
(`validity`), the seed papers' findings decided from the rows (`findings`, from
`findings_common`, `findings_tofu` and `findings_later`) and the sweep's own page (`sweep`)."""
