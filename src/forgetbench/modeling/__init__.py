"""Models, tokenizers and prompt templates. With `eval/outputs/`, the only code that calls a model.

`templates` lays out a question and its answer as one text, `encoding` turns them into token ids
and padded batches, `builtin` is the offline default (a small Llama-architecture model with a BPE
tokenizer trained on the miniature corpus, saved with `save_pretrained` so plain `transformers`
loads it), `loading` loads and saves any Hugging Face causal LM (safetensors only;
`trust_remote_code` only when asked), `limits` says how long a sequence a model takes, `forward`
runs it in training code (`packing`: a batch's sequences in one padding-free row, when training
asks for it), and `lora` wraps it with PEFT adapters.
"""
