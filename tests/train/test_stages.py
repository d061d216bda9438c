import json

from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.stages import STAGE_FILE, run_stage
from toy import toy_examples, toy_tokenizer


def test_stages_cache_by_inputs_and_chain(tmp_path):
    tokenizer = toy_tokenizer()
    config = LoopConfig(lr=3e-3, epochs=2, batch_size=8, per_device_batch_size=8, weight_decay=0.0)
    examples = toy_examples()
    first = run_stage(
        tmp_path,
        name="finetune",
        parent="tiny",
        parent_model=(build_tiny_model(tokenizer), tokenizer),
        examples=examples,
        config=config,
        progress=False,
    )
    assert not first.cached and len(first.losses) == 4
    assert (first.model_dir / "model.safetensors").is_file()
    assert not (first.model_dir.parent / "work" / "checkpoint").exists()
    again = run_stage(
        tmp_path,
        name="finetune",
        parent="tiny",
        parent_model=(build_tiny_model(tokenizer), tokenizer),
        examples=examples,
        config=config,
        progress=False,
    )
    assert again.cached and again.model_dir == first.model_dir and again.losses == first.losses
    # a child stage loads its parent from disk and hashes the parent's key
    child = run_stage(
        tmp_path,
        name="retain",
        parent=first.model_dir,
        examples=examples[:8],
        config=config,
        progress=False,
    )
    info = json.loads((child.model_dir.parent / STAGE_FILE).read_text())
    assert (
        info["parent_fingerprint"]
        == json.loads((first.model_dir.parent / STAGE_FILE).read_text())["key"]
    )
    # the child starts where the parent ended: its first loss is far below a fresh model's
    assert child.losses[0] < first.losses[0]
    changed = run_stage(
        tmp_path,
        name="retain",
        parent=first.model_dir,
        examples=examples[:8],
        config=LoopConfig(lr=1e-3, epochs=2, batch_size=8, per_device_batch_size=8),
        progress=False,
    )
    assert not changed.cached and changed.model_dir != child.model_dir
