"""Fine-tuned discriminators to ONNX for the torch-free runtime: inspect, load, export, quantise, compare.

The legacy TorchScript exporter (dynamo=False, opset 17, dynamic batch and sequence axes): it
exported in 1.5 s with parity < 1e-7, against 10 s for the dynamo exporter
(reports/results/library-choices.md). int8 is onnxruntime's dynamic quantisation (weights int8 ahead of
time, activations quantised per call).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import torch
import transformers

from foundation.infra.errors import UserError
from foundation.models.checkpoint_check import weight_shapes
from harness.deploy.bundle import PER_TOKEN_OUTPUTS, TOKEN_INPUTS

OPSET = 17
PARITY_TOLERANCE = 1e-4  # max |logit difference| between PyTorch and onnxruntime fp32
# Graph output names that differ from the model output they carry: a tagger's per-token `logits` get their
# own name, so that bundle readers tell them from a classifier's one row by name (PER_TOKEN_OUTPUTS).
MODEL_OUTPUTS = {"tag_logits": "logits"}


@dataclass(frozen=True)
class Checkpoint:
    """What a fine-tuned checkpoint directory holds, read from its config.json without loading it, and what
    its kind's exporter (harness/deploy/exporting.py) makes of it."""

    path: Path
    pipeline: str  # the Pipeline its head's bundles run (harness/deploy/pipeline.py)
    architecture: str
    num_labels: int
    max_position_embeddings: int
    output_names: tuple[str, ...]
    model_class: Any  # what it loads with (from_pretrained)
    extra_inputs: tuple[str, ...] = ()  # graph inputs beyond the tokenizer's
    token_types: bool = True  # whether the model reads token_type_ids (DeBERTa-v3: type_vocab_size 0)


def inspect_checkpoint(path: Path) -> Checkpoint:
    """The checkpoint's head, from config.json's architectures; UserError for anything not fine-tuned."""
    from harness.deploy.exporting import exporters

    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"cannot read {str(config_path)!r} ({type(error).__name__}); pass the directory "
                        "save_pretrained() wrote") from error
    architecture = (config.get("architectures") or ["unknown"])[0]
    exporter = next((e for e in exporters() if architecture.endswith(e.architecture)), None)
    if exporter is None:
        raise UserError(f"{str(path)!r} holds a {architecture}, not a fine-tuned classifier, span model or "
                        "tagger; fine-tune it with `harness run glue`, `run squad` or `run tagging` and "
                        "export that run")
    weight_shapes(path)  # a cut or corrupt weights file: one line, before anything is exported
    num_labels = len(config.get("id2label") or {}) or 2  # 2: transformers' default when unset
    return Checkpoint(path, exporter.pipeline, architecture, num_labels,
                      int(config.get("max_position_embeddings", 512)), exporter.output_names(path),
                      exporter.model_class(), exporter.extra_inputs, config.get("type_vocab_size") != 0)


def input_names(checkpoint: Checkpoint, tokenizer: transformers.PreTrainedTokenizerBase) -> tuple[str, ...]:
    """The graph's inputs: the tokenizer's (RoBERTa's and DistilBERT's have no token_type_ids) that the model
    reads (DeBERTa-v3's tokenizer makes token types its model ignores), and the head's own (a span model's
    context_mask, which its answer mask reads)."""
    names = tuple(name for name in TOKEN_INPUTS if name in tokenizer.model_input_names
                  and (name != "token_type_ids" or checkpoint.token_types))
    return names + checkpoint.extra_inputs


class _Outputs(torch.nn.Module):
    """Positional inputs in, a tuple of the named output tensors out: what the exporter traces."""

    def __init__(self, model: torch.nn.Module, input_names: Sequence[str], output_names: Sequence[str]):
        super().__init__()
        self.model, self.input_names, self.output_names = model, tuple(input_names), tuple(output_names)

    def forward(self, *inputs):
        output = self.model(**dict(zip(self.input_names, inputs, strict=True)))
        return tuple(output[MODEL_OUTPUTS.get(name, name)] for name in self.output_names)


def load_model(checkpoint: Checkpoint, input_names: Sequence[str]) -> torch.nn.Module:
    """The fine-tuned model in eval mode, eager attention (a plain graph onnxruntime can fuse)."""
    from tasks.loading import from_pretrained_quietly

    try:
        model = from_pretrained_quietly(checkpoint.model_class, checkpoint.path, attn_implementation="eager")
    except (OSError, ValueError) as error:
        reason = str(error).splitlines()[0][:200] if str(error) else ""
        raise UserError(f"cannot load the model in {str(checkpoint.path)!r} ({type(error).__name__}: "
                        f"{reason}); pass a directory save_pretrained() wrote") from error
    return _Outputs(model, input_names, checkpoint.output_names).eval()


def export_onnx(model: torch.nn.Module, path: Path) -> None:
    """Trace `load_model`'s module to ONNX with dynamic batch and sequence axes."""
    # A padded pair batch, so the traced graph sees masking and both token types.
    input_ids = torch.tensor([[2, 5, 6, 7, 3, 8, 9, 3], [2, 5, 6, 3, 7, 3, 0, 0]])
    examples = {"input_ids": input_ids, "attention_mask": (input_ids != 0).long(),
                "token_type_ids": torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 0, 0]]),
                "context_mask": torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1]])}
    axes = {name: {0: "batch", 1: "sequence"} for name in model.input_names}
    axes |= {name: {0: "batch", 1: "sequence"} if name in PER_TOKEN_OUTPUTS else {0: "batch"}
             for name in model.output_names}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings about Python-side shape checks in transformers
        # The exporter restores the module's training flag afterwards, so it must be eval() already.
        torch.onnx.export(model.eval(), tuple(examples[name] for name in model.input_names), str(path),
                          dynamo=False, opset_version=OPSET, input_names=list(model.input_names),
                          output_names=list(model.output_names), dynamic_axes=axes)


def quantize_int8(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation of an fp32 ONNX model (MatMul weights int8, activations per call).

    Per-channel weight scales: on ELECTRA-Small they cut the int8 logit error about 3x against one
    scale per tensor (max |Δ| 0.0006 vs 0.0017) at the same speed.
    """
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(source))
    # Stale shape annotations make quantize_dynamic fail on dynamo exports
    # (reports/results/library-choices.md); the quantiser re-infers what it needs, so dropping them is
    # safe for either exporter.
    del model.graph.value_info[:]
    logging.disable(logging.WARNING)  # its root-logger advice to pre-process, printed on every call
    try:
        quantize_dynamic(model, str(target), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        logging.disable(logging.NOTSET)


def parity(model: torch.nn.Module, onnx_path: Path, feeds: Sequence[dict[str, np.ndarray]]) -> float:
    """Max |Δ| over all outputs between PyTorch and onnxruntime on the same padded batches."""
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for feed in feeds:
        with torch.inference_mode():
            expected = model(*(torch.from_numpy(feed[name]) for name in model.input_names))
        actual = session.run(list(model.output_names), {name: feed[name] for name in model.input_names})
        real = feed["attention_mask"].astype(bool)
        for name, want, got in zip(model.output_names, expected, actual, strict=True):
            if not want.is_floating_point():  # beam indices: their log-probabilities, compared, tell
                continue
            difference = np.abs(want.float().numpy() - got)
            worst = max(worst, float((difference[real] if name in PER_TOKEN_OUTPUTS else difference).max()))
    return worst


def save_tokenizer(tokenizer: transformers.PreTrainedTokenizerBase, path: Path) -> None:
    """The fast tokenizer's tokenizer.json, without the padding or truncation state of its last use."""
    from tokenizers import Tokenizer

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise UserError(f"{type(tokenizer).__name__} has no tokenizer.json form (not a fast tokenizer); "
                        "save the checkpoint with a fast tokenizer")
    clean = Tokenizer.from_str(backend.to_str())
    clean.no_padding()
    clean.no_truncation()
    clean.save(str(path))
