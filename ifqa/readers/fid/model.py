"""The Fusion-in-Decoder model (Izacard & Grave, 2021) on current transformers.

FiD encodes each (question, passage) pair on its own and lets the decoder attend over all of them:
``FiDT5`` folds ``(batch, passages, length)`` into ``(batch * passages, length)`` for the encoder
and unfolds the states into ``(batch, passages * length)`` for the decoder. The folding happens in
``forward``/``generate`` rather than in a wrapper module, so parameter names stay those of T5: a
checkpoint is a plain T5 checkpoint, and the original facebookresearch/FiD checkpoints (whose
wrapper put ``encoder.encoder.block.N.module.`` in the names) load after renaming their keys.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput

from ifqa.errors import IfqaError
from ifqa.models import check_model_location, loading, model_type

log = logging.getLogger(__name__)


class FiDT5(T5ForConditionalGeneration):
    """T5 whose encoder reads each passage separately and whose decoder reads them all."""

    def encode_passages(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> BaseModelOutput:
        batch, passages, length = input_ids.shape
        states = self.encoder(
            input_ids=input_ids.reshape(batch * passages, length),
            attention_mask=attention_mask.reshape(batch * passages, length),
        ).last_hidden_state
        return BaseModelOutput(last_hidden_state=states.reshape(batch, passages * length, -1))

    def forward(self, input_ids=None, attention_mask=None, encoder_outputs=None, **kwargs):
        if input_ids is not None and input_ids.dim() == 3:
            encoder_outputs = self.encode_passages(input_ids, attention_mask)
            attention_mask = attention_mask.reshape(input_ids.shape[0], -1)
            input_ids = None
        return super().forward(
            input_ids=input_ids, attention_mask=attention_mask, encoder_outputs=encoder_outputs, **kwargs
        )

    @torch.no_grad()
    def generate(self, input_ids=None, attention_mask=None, **kwargs):
        if input_ids is not None and input_ids.dim() == 3:
            kwargs["encoder_outputs"] = self.encode_passages(input_ids, attention_mask)
            attention_mask = attention_mask.reshape(input_ids.shape[0], -1)
            input_ids = None
        return super().generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


def enable_checkpointing(model: T5ForConditionalGeneration) -> None:
    """Recompute each T5 block's activations in the backward pass (``--gradient-checkpointing``) in a
    form ``torch.compile`` traces as one graph. Transformers' own switch breaks the graph four times
    (T5Attention marks ``position_bias.requires_grad`` inside the checkpoint; a ``warning_once`` about
    the decoder's cache) and recompiles; here each block's forward runs under non-reentrant
    ``torch.utils.checkpoint`` while that switch stays off. The cache is turned off in the encoder's
    and decoder's own copies of the config: one updated inside a checkpoint would be updated again on
    recomputation."""
    import types

    from transformers.models.t5.modeling_t5 import T5Block

    for config in (model.config, model.encoder.config, model.decoder.config):
        config.use_cache = False
    for module in model.modules():
        if isinstance(module, T5Block):
            module.forward = types.MethodType(_checkpointed_forward, module)


def _checkpointed_forward(block, *args, **kwargs):
    from torch.utils.checkpoint import checkpoint

    forward = type(block).forward.__get__(block)
    if block.training and torch.is_grad_enabled():
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    return forward(*args, **kwargs)


def rename_original_fid_keys(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """facebookresearch/FiD state dict -> T5 names (``encoder.encoder.`` and ``.module.`` removed)."""
    renamed = {}
    for name, tensor in state_dict.items():
        if name.startswith("encoder.encoder."):
            name = "encoder." + name[len("encoder.encoder.") :]
        name = name.replace(".module.", ".") if name.startswith("encoder.block.") else name
        renamed[name] = tensor
    return renamed


def load_model(path: str | Path, device: str | None = None) -> FiDT5:
    """A FiD model from our checkpoint, a T5 hub id or folder, or an original FiD checkpoint."""
    check_model_location(path)
    kind = model_type(path)
    if kind not in (None, "t5"):
        raise IfqaError(
            f"not a T5 model (its config.json says model_type {kind!r}); FiD reads with T5 "
            "(t5-base, google/flan-t5-large, a folder from `ifqa train fid`)",
            path,
        )
    with loading(path, "T5 model"):
        model = FiDT5.from_pretrained(str(path))
    original = Path(path) / "pytorch_model.bin"
    if original.exists():
        with loading(original, "FiD checkpoint"):
            state = torch.load(original, map_location="cpu", weights_only=True)
        if any(key.startswith("encoder.encoder.") for key in state):
            missing, unexpected = model.load_state_dict(rename_original_fid_keys(state), strict=False)
            tied = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")
            missing = [m for m in missing if m not in tied]
            if missing or unexpected:
                raise IfqaError(f"not a FiD checkpoint: missing {missing[:3]}, unexpected {unexpected[:3]}", original)
            model.tie_weights()
            log.info("loaded an original facebookresearch/FiD checkpoint from %s", path)
    return model if device is None else model.to(device)  # from_pretrained loads on the CPU
