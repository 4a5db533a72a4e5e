"""ELECTRA's SQuAD head (finetune/qa/qa_tasks.py, `get_prediction_module`) on a transformers QA model.

- Answer mask: start and end logits get -1000 wherever ELECTRA's `answer_mask` is 0 (input_mask x
  segment_ids, plus [CLS]: the context, its closing [SEP] and [CLS] stay), in training and prediction.
- Answerability classifier (`answerable_classifier`, on by default for v1.1 and v2.0 alike): [CLS]'s
  hidden state with the hidden states averaged under the softmax of the masked start logits, through a
  512-unit GELU layer, to one logit; sigmoid cross-entropy at weight 0.5 against the example's
  is_impossible (0 for every v1.1 window). The lowest null logit over a question's windows is its null odds.
- Joint prediction (`joint_prediction`): the end head sees the start token's hidden state beside each
  token's, through a 512-unit GELU layer. Training conditions on the gold start; prediction keeps a beam
  of BEAM_SIZE starts by log-probability and, for each, the BEAM_SIZE best ends.
The span loss is the mean of the start and end cross-entropies over the masked logits, as there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForQuestionAnswering
from transformers.utils import ModelOutput

HEAD_FILE = "answerability_head.safetensors"
JOINT_FILE = "joint_end_head.safetensors"
HIDDEN_UNITS = 512  # ELECTRA's width for both heads, whatever the model's
LOSS_WEIGHT = 0.5  # ELECTRA's answerable_weight
BEAM_SIZE = 20  # ELECTRA's beam_size for joint prediction
MASK_PENALTY = 1000.0  # ELECTRA's: logits += 1000 * (answer_mask - 1)
# Beams are taken over the tokens plus BEAM_SIZE slots scored this low, so a window shorter than the beam
# still gives BEAM_SIZE candidates (ELECTRA pads every window to 512); prediction drops them as past the end.
BEAM_PAD = -10000.0


@dataclass
class SquadOutput(ModelOutput):
    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None  # batch, length; masked
    end_logits: torch.Tensor | None = None  # batch, length; masked; None in joint prediction
    null_logits: torch.Tensor | None = None  # batch; higher means "no answer"
    start_top_log_probs: torch.Tensor | None = None  # batch, beam (joint prediction only)
    start_top_index: torch.Tensor | None = None  # batch, beam
    end_top_log_probs: torch.Tensor | None = None  # batch, beam, beam
    end_top_index: torch.Tensor | None = None  # batch, beam, beam


def answer_penalty(attention_mask: torch.Tensor, context_mask: torch.Tensor) -> torch.Tensor:
    """0 where an answer may point (the context and its [SEP], and [CLS]), -1000 elsewhere; float32.

    context_mask: `squad_spans.context_mask` per window, BERT's token_type_ids for BERT-style tokenizers.
    """
    answer_mask = (attention_mask * context_mask).float()
    is_cls = (torch.arange(answer_mask.shape[1], device=answer_mask.device) == 0).float()
    return MASK_PENALTY * (torch.maximum(answer_mask, is_cls) - 1)


def _mlp(inputs: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(inputs, HIDDEN_UNITS), torch.nn.GELU(),
                               torch.nn.Linear(HIDDEN_UNITS, 1))


class JointEnd(torch.nn.Module):
    """ELECTRA's end head for joint prediction: dense(512, GELU) on [start's state; token's state], then
    dense(1). The first layer is kept as its start and token halves (the same function): the start half
    runs once per start, the token half once per token, never a batch x beam x length x 2h concatenation."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.start = torch.nn.Linear(hidden_size, HIDDEN_UNITS)
        self.token = torch.nn.Linear(hidden_size, HIDDEN_UNITS, bias=False)
        self.activation = torch.nn.GELU()
        self.out = torch.nn.Linear(HIDDEN_UNITS, 1)

    def forward(self, hidden: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """End logits (batch, starts, length) for each start's state in starts (batch, starts, hidden)."""
        token_part, start_part = self.token(hidden), self.start(starts)
        # One start at a time: batch x length x 512 at once, not batch x beam x length x 512.
        return torch.stack([self.out(self.activation(token_part + start_part[:, k, None])).squeeze(-1)
                            for k in range(starts.shape[1])], 1).float()


class SquadModel(torch.nn.Module):
    """The wrapped HF span model plus ELECTRA's answerability classifier and joint end head, each optional;
    saves as the HF checkpoint with each head's weights in its own file beside it."""

    def __init__(self, qa: transformers.PreTrainedModel, answerability: bool = True, joint: bool = True):
        super().__init__()
        self.qa = qa
        self.config = qa.config  # the optimiser reads num_hidden_layers from here
        hidden_size = qa.config.hidden_size
        self.answerability = _mlp(2 * hidden_size) if answerability else None
        # With joint prediction the HF head's end column is unused: ends come from this head.
        self.joint_end = JointEnd(hidden_size) if joint else None

    def forward(self, input_ids, attention_mask, context_mask=None, token_type_ids=None, start_positions=None,
                end_positions=None, is_impossible=None) -> SquadOutput:
        if context_mask is None:
            raise ValueError("the answer mask needs context_mask (1 on the context and its closing tokens)")
        # token_type_ids only where the tokenizer makes them (BERT, ELECTRA); RoBERTa, DistilBERT have none
        types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        output = self.qa(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                         **types)
        hidden = output.hidden_states[-1]  # batch, length, hidden
        penalty = answer_penalty(attention_mask, context_mask)
        # Under autocast the logits may be bf16: mask and take softmaxes in fp32.
        start_logits = output.start_logits.float() + penalty
        result = {"start_logits": start_logits}  # a ModelOutput keeps only the fields set when it is built
        training = start_positions is not None
        if self.joint_end is None:
            result["end_logits"] = output.end_logits.float() + penalty
        elif training:
            gold_start = hidden[torch.arange(hidden.shape[0], device=hidden.device), start_positions]
            result["end_logits"] = self.joint_end(hidden, gold_start[:, None])[:, 0] + penalty
        else:
            result |= self._beams(start_logits, hidden, penalty)
        if self.answerability is not None:
            start_weights = start_logits.softmax(dim=-1).to(hidden.dtype)
            start_feature = torch.einsum("bl,blh->bh", start_weights, hidden)
            features = torch.cat([hidden[:, 0], start_feature], dim=-1)
            result["null_logits"] = self.answerability(features).squeeze(-1)
        if training:
            result["loss"] = self._loss(result, start_positions, end_positions, is_impossible)
        return SquadOutput(**result)

    def _loss(self, result: dict, start_positions, end_positions, is_impossible) -> torch.Tensor:
        cross_entropy = torch.nn.functional.cross_entropy
        losses = (cross_entropy(result["start_logits"], start_positions, reduction="none")
                  + cross_entropy(result["end_logits"], end_positions, reduction="none")) / 2
        if self.answerability is not None:
            if is_impossible is None:
                raise ValueError("training the answerability classifier needs is_impossible per window")
            losses = losses + LOSS_WEIGHT * torch.nn.functional.binary_cross_entropy_with_logits(
                result["null_logits"].float(), is_impossible.float(), reduction="none")
        return losses.mean()

    def _beams(self, start_logits: torch.Tensor, hidden: torch.Tensor, penalty: torch.Tensor) -> dict:
        """The beam of starts and, per start, of ends, with their log-probabilities (ELECTRA's top_k)."""
        log_probs = start_logits.log_softmax(dim=-1)
        pad = torch.full_like(log_probs[:, :1], BEAM_PAD).expand(-1, BEAM_SIZE)
        start_top_log_probs, start_top_index = torch.cat([log_probs, pad], 1).topk(BEAM_SIZE)
        padded = torch.cat([hidden, torch.zeros_like(hidden[:, :1]).expand(-1, BEAM_SIZE, -1)], 1)
        index = start_top_index[..., None].expand(-1, -1, hidden.shape[-1])
        starts = padded.gather(1, index)  # batch, beam, hidden
        ends = (self.joint_end(hidden, starts) + penalty[:, None]).log_softmax(dim=-1)  # batch, beam, length
        pad = torch.full_like(ends[..., :1], BEAM_PAD).expand(-1, -1, BEAM_SIZE)
        end_top_log_probs, end_top_index = torch.cat([ends, pad], -1).topk(BEAM_SIZE)
        return {"start_top_log_probs": start_top_log_probs, "start_top_index": start_top_index,
                "end_top_log_probs": end_top_log_probs, "end_top_index": end_top_index}

    def save_pretrained(self, directory: str | Path) -> None:
        """The HF checkpoint, plus each head's weights in HEAD_FILE and JOINT_FILE."""
        self.qa.save_pretrained(directory)
        for head, name in ((self.answerability, HEAD_FILE), (self.joint_end, JOINT_FILE)):
            if head is not None:
                save_file(head.state_dict(), str(Path(directory) / name))

    @classmethod
    def from_pretrained(cls, directory: str | Path, answerability: bool | None = None,
                        joint: bool | None = None, **kwargs) -> SquadModel:
        """A saved one (None: a head where its file is) or a discriminator with fresh heads."""
        directory = Path(directory)
        found = {name: (directory / name).is_file() for name in (HEAD_FILE, JOINT_FILE)}
        model = cls(AutoModelForQuestionAnswering.from_pretrained(directory, **kwargs),
                    answerability=found[HEAD_FILE] if answerability is None else answerability,
                    joint=found[JOINT_FILE] if joint is None else joint)
        for head, name in ((model.answerability, HEAD_FILE), (model.joint_end, JOINT_FILE)):
            if head is not None and found[name]:
                head.load_state_dict(load_file(str(directory / name)))
        return model
