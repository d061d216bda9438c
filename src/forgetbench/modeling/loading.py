"""Loading and saving a user's model: any Hugging Face causal LM by id or folder (safetensors
only; `trust_remote_code` only when asked), refused with one sentence before any work when its
folder cannot work; saved so that a half-written folder never exists under its final name."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import transformers
from huggingface_hub import constants as hf_constants
from transformers import (
    CONFIG_MAPPING,
    AutoModelForCausalLM,
    AutoTokenizer,
)

from forgetbench.device import DTYPES, place_model, precision
from forgetbench.errors import ForgetbenchError, ModelError
from forgetbench.io import read_json
from forgetbench.modeling.builtin import PAD
from forgetbench.modeling.lora import is_lora, merged_state_dict

# Files a saved tokenizer leaves in its folder (any one is enough for AutoTokenizer).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
)
_LOAD_HINT = (
    "check the id or path (weights must be safetensors; HF_HUB_OFFLINE=1 forbids downloads)"
)


def check_model_source(name_or_path: str | Path, *, trust_remote_code: bool = False) -> None:
    """Refuse, before anything is loaded or trained, a model folder that cannot work: no folder,
    no config.json (or one that is not JSON), code it needs but may not run, an architecture
    transformers does not know, no tokenizer, truncated or corrupt safetensors. Cheap: reads
    config.json and each weights file's header, never the weights. A Hub id is left to
    transformers (its files are checked there)."""
    source = str(name_or_path)
    folder = Path(source).expanduser()
    if not folder.exists():
        if source.startswith(("/", ".", "~")) or source.count("/") > 1:
            raise ModelError(
                f"model folder '{source}' does not exist", "check the path passed as --model"
            )
        return  # a Hugging Face id
    if not (folder / "config.json").is_file():
        raise ModelError(
            f"'{source}' is not a saved model (no config.json)", "pass a save_pretrained folder"
        )
    config = read_json(folder / "config.json", what="model config")
    if not isinstance(config, dict):
        raise ModelError(f"{folder / 'config.json'} is not a JSON object", "re-save the model")
    auto_map = config.get("auto_map")
    if auto_map and not trust_remote_code:
        classes = ", ".join(
            sorted(map(str, auto_map.values() if isinstance(auto_map, dict) else []))
        )
        raise ModelError(
            f"model '{source}' needs its own Python code to load (config.json auto_map: "
            f"{classes or auto_map})",
            "pass model.trust_remote_code=true if you trust that code",
        )
    model_type = config.get("model_type")
    if isinstance(model_type, str) and not auto_map and model_type not in CONFIG_MAPPING:
        raise ModelError(
            f"model '{source}' has model_type '{model_type}', which transformers "
            f"{transformers.__version__} does not know",
            "upgrade transformers, or use a model of a known architecture",
        )
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelError(
            f"model folder '{source}' has no tokenizer (none of {', '.join(TOKENIZER_FILES)})",
            "save the tokenizer beside the model (tokenizer.save_pretrained(folder)), "
            "e.g. copied from the model it was trained from",
        )
    weights = sorted(folder.glob("*.safetensors"))
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = read_json(index, what="safetensors index").get("weight_map", {})
        for shard in sorted(set(weight_map.values()) if isinstance(weight_map, dict) else []):
            if not (folder / str(shard)).is_file():
                raise ModelError(
                    f"model '{source}': weights file {shard} named in {index.name} is missing",
                    "re-download or re-save the model",
                )
    for path in weights:
        _check_safetensors(source, path)


def _check_safetensors(source: str, path: Path) -> None:
    """A safetensors file is an 8-byte header length, a JSON header, then the tensors; the
    header's largest end offset must be exactly where the file ends."""
    size = path.stat().st_size
    hint = "an interrupted download or save? re-download or re-save the model"
    with path.open("rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 0 or n > size - 8:
            raise ModelError(
                f"model '{source}': {path.name} is not a safetensors file or is truncated "
                f"({size} bytes)",
                hint,
            )
        try:
            header = json.loads(f.read(n))
            end = max(
                (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"),
                default=0,
            )
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            raise ModelError(f"model '{source}': {path.name} has a corrupt header", hint) from None
    if 8 + n + end != size:
        raise ModelError(
            f"model '{source}': {path.name} is truncated or corrupt "
            f"({size} bytes, its header describes {8 + n + end})",
            hint,
        )


def _load_failure(source: str, exc: Exception, part: str) -> ModelError:
    """One line for a transformers / huggingface_hub / tokenizers / safetensors failure."""
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    if "custom code" in first or "trust_remote_code" in first:
        return ModelError(
            f"model '{source}' needs its own Python code to load",
            "pass model.trust_remote_code=true if you trust that code",
        )
    if not Path(source).exists():
        if hf_constants.HF_HUB_OFFLINE:
            return ModelError(
                f"cannot load model '{source}': it is not a local folder, and not in the "
                "Hugging Face cache (HF_HUB_OFFLINE=1 forbids downloading it)",
                "pass a saved model folder, or download it first (unset HF_HUB_OFFLINE)",
            )
        return ModelError(
            f"cannot load model '{source}': {first}",
            "check the Hugging Face id (a private or gated model needs 'hf auth login')",
        )
    return ModelError(f"cannot load the {part} of model '{source}': {first}", _LOAD_HINT)


def load_tokenizer(name_or_path: str | Path, *, trust_remote_code: bool = False):
    """The tokenizer of a model by Hugging Face id or folder, after `check_model_source` (so a
    command that reads the tokenizer first also refuses broken weights before any work)."""
    source = str(name_or_path)
    check_model_source(source, trust_remote_code=trust_remote_code)
    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (ForgetbenchError, MemoryError):
        raise
    except Exception as exc:  # transformers, tokenizers and the Hub raise many kinds
        raise _load_failure(source, exc, "tokenizer") from None


def load_model(
    name_or_path: str | Path,
    *,
    dtype: str | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
):  # -> (PreTrainedModel, PreTrainedTokenizerBase)
    """Any causal LM by Hugging Face id or local folder; weights only from safetensors, placed on
    `device` (default: the configured `model.device`). Every way a user's model can fail to load
    is a ModelError naming it."""
    source = str(name_or_path)
    tokenizer = load_tokenizer(source, trust_remote_code=trust_remote_code)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source,
            dtype=DTYPES[dtype or precision().dtype],
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
        )
    except (ForgetbenchError, MemoryError):
        raise
    except Exception as exc:
        raise _load_failure(source, exc, "weights") from None
    if tokenizer.pad_token_id is None:
        # Decoder-only checkpoints often ship without a pad token; add a real one rather than
        # aliasing EOS, whose positions must stay visible to the loss and to stopping.
        tokenizer.add_special_tokens({"pad_token": PAD})
        model.resize_token_embeddings(len(tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return place_model(model, device), tokenizer


def save_model(model: object, tokenizer: object, path: str | Path) -> Path:
    """save_pretrained (safetensors) into a temp folder, then rename: a half-written model
    folder never exists under its final name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        if is_lora(model):  # a snapshot mid-run: the merged weights, as every evaluator loads
            base = model.get_base_model()  # type: ignore[attr-defined]
            base.save_pretrained(tmp, state_dict=merged_state_dict(model), safe_serialization=True)
        else:
            model.save_pretrained(tmp, safe_serialization=True)  # type: ignore[attr-defined]
        tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
