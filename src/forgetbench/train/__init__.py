"""Training: one explicit loop (`loop`, Accelerate) that drives finetuning and every unlearning
method, and what it runs on. `loop_config` is what a loop is told (and the part a cached stage is
named by), `contracts` what a run plugs into it (a loss, a step hook, a stateful loss), `batches`
how an epoch is cut into batches, `schedule` the optimizer and its learning-rate schedule,
`train_log` the per-step log and progress bar, `kernels` the faster kernels a GPU run may
train with (liger-kernel, torch.compile). `stages` caches each stage (pretrain -> finetune ->
retain) by its inputs, `checkpoint` and `integrity` save, resume and check what a stage leaves on
disk, `order` says which examples an epoch visits in which order, `step_numbers` keeps a step's
logged numbers on the device until one read at its end, `sharding` is FSDP2 for
`model.sharding=fsdp`. The unlearning engine: `unlearn` (the cached stage), `items` (what a step
sees), `method_loss` (a method's forward passes and loss), `two_task` (the two-gradient
step) and `layers` (partial-layer unlearning); `generated_corpus` is RWKU's forget corpus written
by the model being unlearnt (a cached stage). `presets` turns a named preset into a loop, `mini` trains the built-in miniature's
models (`corpus_stages`: the document benchmarks' stages over its base), `throughput` times
the loop against Hugging Face's `Trainer`."""
