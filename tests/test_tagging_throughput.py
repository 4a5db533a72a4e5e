"""The tagging benchmark times whole megabatches of the length-grouped sampler: its count must be the
sampler's own."""

import pytest
import torch
from transformers.trainer_pt_utils import get_length_grouped_indices

from benchmarks.tagging_throughput import check_steps, megabatch_steps


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


@pytest.mark.parametrize("steps", [0, -50, 40, 75])
def test_steps_that_are_not_whole_megabatches_are_refused_in_one_line(steps):
    with pytest.raises(SystemExit) as refused:
        check_steps(steps, 8_936)  # CoNLL-2000's training sentences: megabatches of 50
    message = str(refused.value)
    assert f"--steps {steps}" in message and "multiple of 50" in message and "\n" not in message


def test_whole_megabatches_are_taken():
    check_steps(50, 8_936)
    check_steps(100, 8_936)
    check_steps(4, 300)  # 300 examples: megabatches of 300 // 128 = 2 batches
    with pytest.raises(SystemExit, match="multiple of 2 here"):
        check_steps(3, 300)
