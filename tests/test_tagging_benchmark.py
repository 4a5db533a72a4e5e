"""The tagging benchmark times whole megabatches of the length-grouped sampler: its count must be the
sampler's own."""

import pytest
import torch
from transformers.trainer_pt_utils import get_length_grouped_indices

from benchmarks.tagging_throughput import megabatch_steps


@pytest.mark.parametrize("rows", [50, 127, 128, 700, 6_399, 6_400, 8_936, 20_000])
def test_megabatch_steps_is_the_samplers_own(rows):
    lengths = torch.randint(3, 120, (rows,), generator=torch.Generator().manual_seed(rows)).tolist()

    def order(mult):
        return get_length_grouped_indices(lengths, 32, mega_batch_mult=mult,
                                          generator=torch.Generator().manual_seed(0))

    assert order(megabatch_steps(rows)) == order(None)
    # and a neighbouring count would not be: the formula is checked, not the generator
    if megabatch_steps(rows) > 1:
        assert order(megabatch_steps(rows) - 1) != order(None)
