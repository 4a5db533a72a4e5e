"""FLOPs of a named model in each counting convention: the paper's (foundation/models/flops.py), 6·N·tokens,
and a measured count, torch's FlopCounterMode on a real forward pass, which counts matmuls and
attention only (no embedding lookups, no element-wise ops, no head on a bare encoder).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from foundation.infra.errors import UserError
from foundation.models.hub import hub_checkpoint, parse_hub_id
from foundation.models.layout import DISCRIMINATOR_DIR, GENERATOR_DIR, config_dir
from foundation.models.packaged import is_package_source
from foundation.models.presets import PRESETS, discriminator_config
from foundation.models.resolve import published_checkpoint, resolve_model
from foundation.models.shapes import TransformerShape, generator_shape, shape_of


@dataclass(frozen=True)
class ModelShapes:
    """What `--model` named: shapes to count and the config a measured model is built from."""

    label: str
    discriminator: TransformerShape
    generator: TransformerShape | None  # None: BERT's MLM objective
    generator_source: str
    config: dict


def model_shapes(name_or_dir: str, generator_fraction: float | None) -> ModelShapes:
    """Shapes for a registry name (no download) or a checkpoint directory's config.json files."""
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        return _from_directory(path, generator_fraction)
    if name_or_dir in PRESETS:
        preset = PRESETS[name_or_dir]
        shape = shape_of(preset)
        fraction = preset.generator_fraction if generator_fraction is None else generator_fraction
        generator, source = _generator_from_fraction(shape, fraction)
        # An ElectraModel is BERT plus an optional embedding projection, so it measures both families.
        return ModelShapes(f"{preset.name} (registry shape)", shape, generator, source,
                      discriminator_config(preset).to_dict())
    if published_checkpoint(name_or_dir) is not None or is_package_source(name_or_dir):
        return _from_directory(Path(resolve_model(name_or_dir)), generator_fraction)  # its package too
    found = parse_hub_id(name_or_dir) if "/" in name_or_dir else None
    if found is not None:  # a Hub id: its snapshot's config.json (offline, from the Hub cache)
        return _from_directory(hub_checkpoint(*found), generator_fraction)
    raise UserError(f"unknown model {name_or_dir!r}; choose one of {', '.join(PRESETS)} "
                    "or pass a checkpoint directory containing config.json or a Hub id (org/name)")


def _from_directory(path: Path, generator_fraction: float | None) -> ModelShapes:
    root = config_dir(path)
    if root is None:
        raise UserError(f"{str(path)!r} has no config.json (nor {DISCRIMINATOR_DIR}/config.json); pass a "
                        f"checkpoint directory or one of {', '.join(PRESETS)}")
    config = _read_config(root / "config.json")
    shape = shape_of(config)
    generator_config = path / GENERATOR_DIR / "config.json"
    if generator_fraction is not None:
        generator, source = _generator_from_fraction(shape, generator_fraction)
    elif generator_config.is_file():
        generator, source = shape_of(_read_config(generator_config)), f"from {generator_config}"
    elif config.get("model_type") == "electra":
        # A bare released discriminator: assume the paper's generator for its size.
        same_shape = [p for p in PRESETS.values() if p.family == "electra" and shape_of(p) == shape]
        generator, source = _generator_from_fraction(
            shape, same_shape[0].generator_fraction if same_shape else 0.25)
    else:
        generator, source = None, ""
    return ModelShapes(f"{root} (checkpoint config)", shape, generator, source, config)


def _read_config(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"cannot read {str(path)!r} ({error}); pass a directory save_pretrained() wrote"
                        ) from error


def _generator_from_fraction(shape: TransformerShape, fraction: float):
    if fraction == 0:
        return None, ""
    return generator_shape(shape, fraction), f"fraction {fraction:.3g} of the discriminator"


def measure(config: dict, seq_len: int) -> float:
    """FlopCounterMode's forward FLOPs per example for a model built from `config` on meta tensors."""
    import torch
    from transformers import AutoConfig, AutoModel

    if seq_len > config.get("max_position_embeddings", seq_len):
        raise UserError(f"--seq-len {seq_len} exceeds the model's max_position_embeddings "
                        f"{config['max_position_embeddings']}; lower it or pass --no-measure")
    settings = {key: value for key, value in config.items() if key != "model_type"}
    model_config = AutoConfig.for_model(config.get("model_type", "electra"), **settings)
    # Meta tensors carry shapes but no storage: the same ops are dispatched and counted, without
    # allocating or initialising the weights (BERT-Large would take GBs and tens of seconds).
    with torch.device("meta"):
        model = AutoModel.from_config(model_config)
    return measured_forward_flops(model, seq_len=seq_len)


def _cpu_attention_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    # Scores (q·k) and weighted values: two batched matmuls over (batch, heads, query, key).
    batch, heads, query_len, head_size = query_shape
    key_len, value_size = key_shape[-2], value_shape[-1]
    return 2 * batch * heads * query_len * key_len * (head_size + value_size)


def measured_forward_flops(model, seq_len: int = 128, batch_size: int = 1) -> float:
    """FLOPs torch's FlopCounterMode counts in one forward pass on random ids, per example."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    # torch counts the GPU attention kernels but not the CPU one, which would drop the q·k and
    # probability·value matmuls from CPU measurements; count it with torch's own sdpa formula.
    cpu_attention = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention_flops}
    device = next(model.parameters()).device
    input_ids = torch.randint(0, model.config.vocab_size, (batch_size, seq_len), device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=cpu_attention) as counter:
            model(input_ids=input_ids)
    finally:
        model.train(was_training)
    return counter.get_total_flops() / batch_size
