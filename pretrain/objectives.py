"""The pre-training objectives as pure tensor functions: masking, sampling, corruption, losses.

Paper conventions (Clark et al. 2020; google-research/electra `pretrain_helpers.py`): each example
has N = `max_predictions_per_seq` prediction slots, round(15%) of its real tokens of them used,
filled with non-special positions; of those 85% show [MASK] and 15% keep their token (BERT's 10%
random tokens are an option, off by default as in the paper's code). Samples of the generator's
softmax (the distribution the official Gumbel-max draws from) replace every masked position, and a
position counts as "replaced" only where the sample differs from the original token. Every
tensor's shape depends only on the batch's shape, so a step has no data-dependent shapes and never
waits for the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class MaskingSettings:
    """Token ids and rates the masking needs."""

    mask_id: int
    special_ids: tuple[int, ...]  # never masked: [CLS], [SEP], [PAD], [MASK]
    vocab_size: int
    # the rates come from PretrainConfig (and the preset), their one home; no defaults of their own here
    mask_prob: float
    mask_token_fraction: float
    random_token_fraction: float


def max_predictions(mask_prob: float, seq_len: int) -> int:
    """The official `max_predictions_per_seq`: int((mask_prob + 0.005) · seq_len), 19 at length 128."""
    return max(1, int((mask_prob + 0.005) * seq_len))


def real_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                settings: MaskingSettings) -> torch.Tensor:
    """Boolean [B, L]: the positions that may be masked (attended to, not a special token)."""
    real = attention_mask.bool()
    for special in settings.special_ids:
        real &= input_ids != special
    return real


def choose_masked(input_ids: torch.Tensor, attention_mask: torch.Tensor, settings: MaskingSettings,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, N] positions, [B, N] float weights) with N = max_predictions(mask_prob, L), as the official code.

    Each example uses its first round(mask_prob · real tokens) slots (at least 1, at most N; real tokens
    count [CLS] and [SEP]); the rest hold position 0 with weight 0. Positions are drawn uniformly
    from the candidates *with replacement*, as `tf.random.categorical` does in `pretrain_helpers.mask`,
    so a position can fill two slots (about 7% of draws at length 128). Every shape is fixed by
    (B, L): no host sync, and one compiled graph serves every step.
    """
    batch, width = input_ids.shape
    slots = max_predictions(settings.mask_prob, width)
    candidates = real_tokens(input_ids, attention_mask, settings)
    has_candidates = candidates.any(dim=1, keepdim=True)
    count = torch.round(attention_mask.sum(dim=1, keepdim=True) * settings.mask_prob).clamp(min=1, max=slots)
    count = count * has_candidates  # an example without maskable tokens predicts nothing
    weights = (torch.arange(slots, device=input_ids.device) < count).float()
    # A row without candidates draws from every position (multinomial needs mass); its weights are 0.
    mass = (candidates | ~has_candidates).float()
    positions = torch.multinomial(mass, slots, replacement=True, generator=generator)
    return positions * weights.long(), weights


def scatter_any(flags: torch.Tensor, positions: torch.Tensor, width: int) -> torch.Tensor:
    """Boolean [B, width]: True where any slot with its flag set points (slots are [B, N])."""
    marks = torch.zeros((flags.shape[0], width), dtype=torch.int32, device=flags.device)
    return marks.scatter_reduce(1, positions, flags.int(), "amax").bool()


def gather_positions(sequence: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """[B, N, ...] rows of a [B, L, ...] tensor at [B, N] positions."""
    if sequence.dim() == 2:
        return sequence.gather(1, positions)
    return sequence.gather(1, positions[..., None].expand(-1, -1, sequence.shape[-1]))


def apply_mask(input_ids: torch.Tensor, positions: torch.Tensor, weights: torch.Tensor,
               settings: MaskingSettings, generator: torch.Generator | None = None) -> torch.Tensor:
    """Used slots show [MASK], a random token, or keep their token, in the configured proportions.

    The draw is per slot, as in the official code; a position drawn twice shows [MASK] if either
    slot says so (the official scatter does the same).
    """
    draw = torch.rand(weights.shape, generator=generator, device=input_ids.device)
    used = weights > 0
    to_mask = used & (draw < settings.mask_token_fraction)
    to_random = used & ~to_mask & (draw < settings.mask_token_fraction + settings.random_token_fraction)
    width = input_ids.shape[1]
    mask_at = scatter_any(to_mask, positions, width)
    random_at = scatter_any(to_random, positions, width) & ~mask_at
    random_ids = torch.randint(0, settings.vocab_size, input_ids.shape, generator=generator,
                               device=input_ids.device)
    masked = torch.where(mask_at, settings.mask_id, input_ids)
    return torch.where(random_at, random_ids, masked)


def softmax_sample(logits: torch.Tensor, temperature: float = 1.0,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """One sample per row of softmax(logits / temperature), by inverting each row's cumulative sum.

    The official code draws by the Gumbel-max trick, argmax(logits - log(-log U)) with a uniform U
    per logit: the same distribution, but a uniform and two logarithms per vocabulary entry, most
    of the ELECTRA step's extra cost on a CPU at [masked positions, 30,522]
    (reports/results/performance.md, "Where a step goes"). Here one uniform per row picks the first
    entry whose cumulative probability exceeds it: a softmax and a cumulative sum, in place. An
    entry of probability 0 (logit -inf) is never chosen; fp32's sums decide entries below ~1e-7 of a
    row's mass as its rounding does (Gumbel-max in fp32 has its own such floor).
    """
    scaled = logits.float() if temperature == 1.0 else logits.float() / temperature
    cumulative = torch.softmax(scaled, dim=-1).cumsum_(dim=-1)
    total = cumulative[..., -1:].contiguous()  # the row's own sum, which rounding keeps near 1, not at it
    drawn = torch.rand(total.shape, generator=generator, device=logits.device).mul_(total)
    chosen = torch.searchsorted(cumulative, drawn, right=True)
    # a draw that rounds up to the total takes the last entry with mass, not one past the row
    return torch.minimum(chosen, torch.searchsorted(cumulative, total)).squeeze(-1)


def corrupt(input_ids: torch.Tensor, positions: torch.Tensor, weights: torch.Tensor,
            samples: torch.Tensor):
    """Put the [B, N] `samples` in at the used slots' positions; labels 1 where a token changed.

    Where two slots drew one position the larger sampled id wins: deterministic, unlike a plain
    scatter (the official code averages the two ids, which yields an unrelated token).
    """
    sampled = torch.full_like(input_ids, -1).scatter_reduce(
        1, positions, torch.where(weights > 0, samples.to(input_ids.dtype), -1), "amax")
    corrupted = torch.where(sampled >= 0, sampled, input_ids)
    return corrupted, corrupted != input_ids


def mlm_loss(logits: torch.Tensor, targets: torch.Tensor,
             weights: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy of [..., V] logits at the predicted positions (fp32), weighted mean over slots."""
    losses = F.cross_entropy(logits.float().flatten(0, -2), targets.flatten(), reduction="none")
    if weights is None:
        return losses.mean()
    weights = weights.flatten().float()
    return (losses * weights).sum() / weights.sum().clamp(min=1.0)


def discriminator_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean sigmoid cross-entropy over the positions where `weights` is set."""
    losses = F.binary_cross_entropy_with_logits(logits.float(), labels.float(), reduction="none")
    weights = weights.float()
    return (losses * weights).sum() / weights.sum().clamp(min=1.0)


def copy_mlm_loss(vocab_logits: torch.Tensor, replaced_logits: torch.Tensor, inputs: torch.Tensor,
                  targets: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """All-tokens MLM with the paper's copy mechanism, (weighted) mean over the given positions.

    p(target) = D · [target == input] + (1 - D) · softmax(vocab_logits)[target], where the copy
    probability D = sigmoid(-replaced_logits) is the discriminator head's "original" probability.
    """
    log_q = F.log_softmax(vocab_logits.float(), dim=-1).gather(-1, targets[:, None]).squeeze(-1)
    log_copy = F.logsigmoid(-replaced_logits.float())
    log_generate = F.logsigmoid(replaced_logits.float()) + log_q
    same = inputs == targets
    log_p = torch.where(same, torch.logaddexp(log_copy, log_generate), log_generate)
    if weights is None:
        return -log_p.mean()
    weights = weights.float()
    return -(log_p * weights).sum() / weights.sum().clamp(min=1.0)


def detection_counts(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> dict:
    """Correct and total counts of replaced and original tokens among the weighted positions."""
    predicted = logits > 0
    weights = weights.bool()
    replaced, original = labels & weights, ~labels & weights
    return {"replaced_correct": (predicted & replaced).sum(), "replaced_total": replaced.sum(),
            "original_correct": (~predicted & original).sum(), "original_total": original.sum()}


def detection_auc(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """ROC AUC of the replaced-token scores among weighted positions (0.5 = no better than chance).

    Threshold-free, so it shows a discriminator learning while its 0.5-threshold accuracy on the
    rare replaced class is still zero; ELECTRA logs it too. Fixed shapes and no host sync: unweighted
    positions sort below every weighted one and their ranks are subtracted.
    """
    used, positive = weights.bool().flatten(), labels.bool().flatten()
    scores = torch.where(used, logits.float().flatten(), float("-inf"))
    ranks = torch.empty_like(scores, dtype=torch.float64).scatter_(
        0, scores.argsort(), torch.arange(1, scores.numel() + 1, dtype=torch.float64, device=scores.device))
    ranks = ranks - (~used).sum()  # ties are rare for float logits
    positive = positive & used
    num_pos, num_neg = positive.sum().double(), (used & ~positive).sum().double()
    auc = ((ranks * positive).sum() - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg).clamp(min=1)
    # undefined without both classes; chance keeps window means finite
    return torch.where((num_pos > 0) & (num_neg > 0), auc, torch.full_like(auc, 0.5))
