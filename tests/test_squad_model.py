"""ELECTRA's SQuAD head (tasks/squad_model.py) on a stub encoder whose logits and hidden states are set by
hand, so every loss, null logit and beam below is worked from qa_tasks.py's formulas."""

import math
from types import SimpleNamespace

import pytest
import torch

from tasks.squad_model import SquadModel, answer_penalty

# One window of 4 tokens: [CLS] question-token context-token [SEP]; segment ids 0 0 1 1, so ELECTRA's
# answer_mask (input_mask x segment_ids, plus [CLS]) is 1 0 1 1.
ATTENTION = torch.tensor([[1, 1, 1, 1]])
TYPES = torch.tensor([[0, 0, 1, 1]])
# Masked, the start logits leave e^0 + e^ln2 + e^ln3 = 6 over [CLS], the context token and [SEP]; the
# question token's 5 would dominate an unmasked softmax.
START = [0.0, 5.0, math.log(2), math.log(3)]
END = [0.0, 5.0, math.log(4), 0.0]  # masked: 1 + 4 + 1 = 6
HIDDEN = [0.0, 100.0, 1.0, 2.0]  # hidden size 1; the question token's 100 would swamp any average


class StubEncoder(torch.nn.Module):
    """Stands in for a transformers QA model: fixed start/end logits and last hidden states."""

    config = SimpleNamespace(hidden_size=1)

    def forward(self, input_ids, attention_mask, output_hidden_states, token_type_ids=None):
        return SimpleNamespace(start_logits=torch.tensor([START]), end_logits=torch.tensor([END]),
                               hidden_states=(torch.tensor([HIDDEN])[..., None],))


def gelu(x):
    return x * 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _model(answerability=False, joint=False) -> SquadModel:
    model = SquadModel(StubEncoder(), answerability=answerability, joint=joint)
    with torch.no_grad():  # one unit through GELU to the logit; the rest of the 512 zero
        for parameter in model.parameters():
            parameter.zero_()
        if answerability:
            model.answerability[0].weight[0] = torch.tensor([0.0, 1.0])  # reads the start-weighted state
            model.answerability[2].weight[0, 0] = 1.0
        if joint:  # start's state + the token's
            model.joint_end.start.weight[0, 0] = model.joint_end.token.weight[0, 0] = 1.0
            model.joint_end.out.weight[0, 0] = 1.0
    return model


def _run(model, **targets):
    return model(input_ids=torch.zeros(1, 4, dtype=torch.long), attention_mask=ATTENTION,
                 context_mask=TYPES, **{name: torch.tensor([value]) for name, value in targets.items()})


def test_answer_penalty_keeps_context_final_sep_and_cls():
    attention = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0]])  # [CLS] q [SEP] c c [SEP] pad pad
    context = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])  # squad_spans.context_mask: to the window's end
    assert answer_penalty(attention, context).tolist() == [[0, -1000, -1000, 0, 0, 0, -1000, -1000]]


def test_span_loss_runs_over_the_masked_logits():
    output = _run(_model(), start_positions=2, end_positions=2)
    # start: -log(2/6); end: -log(4/6); the span loss is their mean.
    assert output.loss.item() == pytest.approx((math.log(3) + math.log(1.5)) / 2, abs=1e-6)
    assert output.start_logits[0].tolist() == pytest.approx([0.0, -995.0, math.log(2), math.log(3)])


def test_answerability_reads_the_masked_start_softmax_and_the_examples_target():
    # Start weights 1/6, 0, 2/6, 3/6 over hidden 0, 100, 1, 2: a feature of 2/6 + 6/6 = 4/3; null logit
    # GELU(4/3). The window's answer is not inside it (start 0), yet the example is answerable: target 0.
    model = _model(answerability=True)
    output = _run(model, start_positions=0, end_positions=0, is_impossible=0)
    null = gelu(4 / 3)
    assert output.null_logits.item() == pytest.approx(null, abs=1e-6)
    span = (math.log(6) + math.log(6)) / 2  # [CLS]: -log(1/6) for start and for end
    assert output.loss.item() == pytest.approx(span + 0.5 * math.log1p(math.exp(null)), abs=1e-6)
    impossible = _run(model, start_positions=0, end_positions=0, is_impossible=1)
    assert impossible.loss.item() == pytest.approx(span + 0.5 * math.log1p(math.exp(-null)), abs=1e-6)


def test_joint_end_head_trains_on_the_gold_start():
    # End logit of token t: GELU(h_start + h_t), masked. Gold start 2 (h = 1): GELU(1), GELU(101) - 1000,
    # GELU(2), GELU(3); the end loss at token 3 is logsumexp(GELU(1), GELU(2), GELU(3)) - GELU(3).
    output = _run(_model(joint=True), start_positions=2, end_positions=3)
    ends = [gelu(1.0), gelu(2.0), gelu(3.0)]
    end_loss = math.log(sum(math.exp(e) for e in ends)) - ends[2]
    assert output.loss.item() == pytest.approx((math.log(3) + end_loss) / 2, abs=1e-5)


def test_joint_prediction_beams_starts_then_ends_by_log_probability():
    output = _run(_model(joint=True))
    assert output.end_logits is None
    # Start log-probs: [CLS] log 1/6, context log 2/6, [SEP] log 3/6, the question token about -1000:
    # the beam's order is 3, 2, 0, 1, then the padding slots past the window.
    assert output.start_top_index[0, :4].tolist() == [3, 2, 0, 1]
    assert output.start_top_log_probs[0, :3].tolist() == pytest.approx([math.log(.5), math.log(2 / 6),
                                                                        math.log(1 / 6)], abs=1e-6)
    assert output.start_top_index.shape == output.start_top_log_probs.shape == (1, 20)
    # Ends after start 3 (h = 2): GELU(2), GELU(102) - 1000, GELU(3), GELU(4) -> order 3, 2, 0.
    ends = [gelu(2.0), gelu(3.0), gelu(4.0)]
    log_total = math.log(sum(math.exp(e) for e in ends))
    assert output.end_top_index[0, 0, :3].tolist() == [3, 2, 0]
    assert output.end_top_log_probs[0, 0, :3].tolist() == pytest.approx(
        [ends[2] - log_total, ends[1] - log_total, ends[0] - log_total], abs=1e-5)
    assert output.end_top_index.shape == (1, 20, 20)


def test_training_without_the_target_is_refused():
    with pytest.raises(ValueError, match="needs is_impossible"):
        _run(_model(answerability=True), start_positions=2, end_positions=2)
