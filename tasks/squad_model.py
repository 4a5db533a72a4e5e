"""ELECTRA's SQuAD 2.0 answerability classifier, as a small module on top of a transformers QA model.

ELECTRA's `answerable_classifier` (finetune/qa/qa_tasks.py, on by default there): a logit from [CLS]'s
hidden state concatenated with the hidden states averaged under the start distribution, through a
512-unit GELU layer, trained with sigmoid cross-entropy at weight 0.5 beside the span loss. At
prediction time the lowest null logit over an example's windows is its null odds.

One deliberate difference: the target is per window (no answer inside this window), not ELECTRA's
per example. A window that misses the answer is trained to point its span at [CLS], and with the
minimum over windows an example is called unanswerable only when every window says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForQuestionAnswering
from transformers.utils import ModelOutput

HEAD_FILE = "answerability_head.safetensors"
HIDDEN_UNITS = 512  # ELECTRA's width, whatever the model's
LOSS_WEIGHT = 0.5  # ELECTRA's answerable_weight


@dataclass
class AnswerabilityOutput(ModelOutput):
    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    null_logits: torch.Tensor | None = None  # batch; higher means "no answer in this window"


class QuestionAnsweringWithAnswerability(torch.nn.Module):
    """A span head (the wrapped HF model) plus the null-logit classifier; saves beside the HF files."""

    def __init__(self, qa: transformers.PreTrainedModel):
        super().__init__()
        self.qa = qa
        self.config = qa.config  # the optimiser reads num_hidden_layers from here
        hidden_size = qa.config.hidden_size
        self.answerability = torch.nn.Sequential(
            torch.nn.Linear(2 * hidden_size, HIDDEN_UNITS), torch.nn.GELU(), torch.nn.Linear(HIDDEN_UNITS, 1))

    def forward(self, input_ids, attention_mask, token_type_ids=None, start_positions=None,
                end_positions=None) -> AnswerabilityOutput:
        output = self.qa(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                         start_positions=start_positions, end_positions=end_positions,
                         output_hidden_states=True)
        hidden = output.hidden_states[-1]  # batch, length, hidden
        # Under autocast the logits and hidden states may differ in dtype: weigh in fp32, then cast.
        start_logits = output.start_logits.float().masked_fill(attention_mask == 0, -math.inf)
        start_weights = start_logits.softmax(dim=-1).to(hidden.dtype)
        start_feature = torch.einsum("bl,blh->bh", start_weights, hidden)
        null_logits = self.answerability(torch.cat([hidden[:, 0], start_feature], dim=-1)).squeeze(-1)
        loss = output.loss
        if start_positions is not None:
            no_answer = (start_positions == 0).float()
            null_loss = torch.nn.functional.binary_cross_entropy_with_logits(null_logits.float(), no_answer)
            loss = loss + LOSS_WEIGHT * null_loss
        return AnswerabilityOutput(loss=loss, start_logits=output.start_logits, end_logits=output.end_logits,
                                   null_logits=null_logits)

    def save_pretrained(self, directory: str | Path) -> None:
        """The HF checkpoint, plus the classifier's weights in HEAD_FILE."""
        self.qa.save_pretrained(directory)
        save_file(self.answerability.state_dict(), str(Path(directory) / HEAD_FILE))

    @classmethod
    def from_pretrained(cls, directory: str | Path, **kwargs) -> QuestionAnsweringWithAnswerability:
        """Load a saved one; from a checkpoint without HEAD_FILE the classifier starts fresh."""
        model = cls(AutoModelForQuestionAnswering.from_pretrained(directory, **kwargs))
        head = Path(directory) / HEAD_FILE
        if head.is_file():
            model.answerability.load_state_dict(load_file(str(head)))
        return model
