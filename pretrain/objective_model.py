"""`PretrainingModel`: the networks of a run and one forward pass per objective -> loss and counts.

electra         generator MLM on the masked input; its samples corrupt the input; the
                discriminator labels every token; loss = L_MLM + disc_weight · L_Disc.
electra-15      the same, but the discriminator loss only covers the masked positions.
replace-mlm     masked positions get generator samples instead of [MASK]; the main model
                predicts the originals there (MLM loss); plus the generator's MLM loss.
all-tokens-mlm  as replace-mlm, but the main model predicts every token, with the paper's copy
                mechanism (the discriminator head gives the copy probability).
mlm             BERT: the main model predicts masked tokens (dynamic masking, no NSP).
two-stage       stage 1: generator MLM only; stage 2 (the trainer copies the generator into the
                discriminator first): generator frozen, discriminator loss only.
Samples are drawn without gradient, so the discriminator loss never reaches the generator except
through deliberately shared weights.
"""

from __future__ import annotations

import torch
from torch import nn

from pretrain import objectives as obj

MAIN_MLM = ("mlm", "replace-mlm", "all-tokens-mlm")


class PretrainingModel(nn.Module):
    def __init__(self, discriminator, generator, main_head, objective: str, masking: obj.MaskingSettings,
                 disc_weight: float = 50.0, temperature: float = 1.0):
        super().__init__()
        self.discriminator, self.generator, self.main_head = discriminator, generator, main_head
        self.objective, self.masking = objective, masking
        self.disc_weight, self.temperature = disc_weight, temperature

    def forward(self, input_ids, attention_mask, token_type_ids, stage: int = 1):
        """(loss, stats): stats are detached on-device sums and counts for logging."""
        positions, weights = obj.choose_masked(input_ids, attention_mask, self.masking)
        masked_ids = obj.apply_mask(input_ids, positions, weights, self.masking)
        targets = input_ids.gather(1, positions)
        stats: dict[str, torch.Tensor] = {"masked_total": weights.sum()}
        if self.objective == "mlm":
            hidden = self.encode(self.discriminator, masked_ids, attention_mask, token_type_ids)
            logits = self.main_head(obj.gather_positions(hidden, positions))
            return self._mlm(logits, targets, weights, stats, "mlm"), stats

        frozen_generator = self.objective == "two-stage" and stage == 2
        with torch.set_grad_enabled(torch.is_grad_enabled() and not frozen_generator):
            gen_hidden = self.encode(self.generator, masked_ids, attention_mask, token_type_ids)
            gen_logits = self.generator.generator_lm_head(self.generator.generator_predictions(
                obj.gather_positions(gen_hidden, positions))).float()  # loss and sampling
            gen_loss = self._mlm(gen_logits, targets, weights, stats, "generator")
        if self.objective == "two-stage" and stage == 1:
            return gen_loss, stats
        with torch.no_grad():
            samples = obj.softmax_sample(gen_logits.detach(), self.temperature)
        corrupted, replaced = obj.corrupt(input_ids, positions, weights, samples)
        stats["replaced_total_all"] = replaced.sum()
        stats["tokens_total"] = attention_mask.sum()

        hidden = self.encode(self.discriminator, corrupted, attention_mask, token_type_ids)
        if self.objective in ("electra", "electra-15", "two-stage"):
            scored = obj.scatter_any(weights > 0, positions, input_ids.shape[1]) \
                if self.objective == "electra-15" else attention_mask
            logits = self.discriminator.discriminator_predictions(hidden)
            disc_loss = obj.discriminator_loss(logits, replaced, scored)
            stats.update({"discriminator_loss": disc_loss.detach(),
                          "disc_auc": obj.detection_auc(logits.detach(), replaced, attention_mask)},
                         **obj.detection_counts(logits.detach(), replaced, attention_mask.bool()))
            main_loss = self.disc_weight * disc_loss
        elif self.objective == "replace-mlm":
            logits = self.main_head(obj.gather_positions(hidden, positions))
            main_loss = self._mlm(logits, targets, weights, stats, "mlm")
        else:  # all-tokens-mlm: every real token, padding weighted out
            copy_logits = self.discriminator.discriminator_predictions(hidden)
            main_loss = obj.copy_mlm_loss(self.main_head(hidden), copy_logits, corrupted, input_ids,
                                          attention_mask)
            stats["mlm_loss"] = main_loss.detach()
        return (main_loss if frozen_generator else gen_loss + main_loss), stats

    @staticmethod
    def encode(network, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        return network.electra(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state

    @staticmethod
    def _mlm(logits, targets, weights, stats, name) -> torch.Tensor:
        logits = logits.float()  # once: argmax over a bf16 [N, vocabulary] tensor is slow on CPUs
        loss = obj.mlm_loss(logits, targets, weights)
        stats[f"{name}_loss"] = loss.detach()
        stats[f"{name}_correct"] = ((logits.detach().argmax(-1) == targets) & (weights > 0)).sum()
        return loss

    def start_second_stage(self) -> None:
        """Two-stage: initialise the discriminator's transformer from the (same-size) generator."""
        with torch.no_grad():
            self.discriminator.electra.load_state_dict(self.generator.electra.state_dict())

    def idle_parameters(self, stage: int) -> list[nn.Parameter]:
        """Weights a two-stage step must leave untouched: the discriminator, then the generator."""
        if self.objective != "two-stage":
            return []
        return list((self.discriminator if stage == 1 else self.generator).parameters())
