"""What the CPU can tell about the pre-training step's behaviour on a GPU: its forward compiles to one
graph (a graph break would split the CUDA graph and add launches), it does not recompile once warm (a
recompile costs seconds, and past dynamo's limit falls back to eager), and a step that does not log never
makes the host wait for the device (a `.item()`, `float()`, `bool()` or `.cpu()` in the loop)."""

from __future__ import annotations

import collections
import traceback
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

from tests.conftest import REPO
from tests.pretrain_helpers import micro_config, micro_setup

# Tensor methods that copy a value to the host, so the host waits for the device's queue to drain.
HOST_SYNCS = {torch.Tensor.item, torch.Tensor.__bool__, torch.Tensor.__float__, torch.Tensor.__int__,
              torch.Tensor.__index__, torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.numpy,
              torch.Tensor.nonzero, torch.nonzero, torch.masked_select, torch.Tensor.masked_select}


class HostSyncs(TorchFunctionMode):
    """Counts host-syncing tensor calls by who made them: the project's code, or the library it called."""

    def __init__(self):
        super().__init__()
        self.calls: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_SYNCS:
            self.calls[(_owner(), func.__name__)] += 1
        return func(*args, **(kwargs or {}))


def _owner() -> str:
    """Who made the call: "project" for this checkout's code (tests aside), else the library's package."""
    for frame in reversed(traceback.extract_stack()[:-2]):  # innermost first, this module's frames skipped
        path = Path(frame.filename)
        if "site-packages" in path.parts:  # checked first: tox keeps its environments inside the checkout
            if "torch" not in path.parts:
                return path.parts[path.parts.index("site-packages") + 1]
        elif path.is_relative_to(REPO):
            return "project"
    return "torch"


def _batch(step: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, 60, (8, 32), generator=torch.Generator().manual_seed(step))
    mask = torch.ones_like(ids)
    mask[step % 8, 20:] = 0  # a padded example: the attention mask is not all ones
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


@pytest.mark.slow
def test_the_step_compiles_to_one_graph_and_never_recompiles_once_warm(micro, monkeypatch):
    """The forward (and so the backward) in one graph, ELECTRA's Adam's update in another: fullgraph=True
    raises at the first graph break; error_on_recompile at the first recompilation, while the learning
    rate, the batch's contents and its padding change from step to step. Graph breaks and recompilations
    are dynamo's, so the backend is eager (AOTAutograd's tracing added ~9 s and checks nothing here)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from pretrain.train import train_step

    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **how: compile_(fn, fullgraph=True, backend="eager"))
    setup = micro_setup(compile_optimizer=True)
    model = torch.compile(setup.model)
    torch._dynamo.reset()
    counters.clear()
    train_step(setup, model, _batch(0))  # compiles
    with torch._dynamo.config.patch(error_on_recompile=True):
        for step in range(1, 4):
            for group in setup.optimizer.param_groups:
                group["lr"] = 1e-3 / step
            loss, _, _ = train_step(setup, model, _batch(step))
    assert setup.optimizer.compiled and counters["stats"]["unique_graphs"] == 2
    assert torch.isfinite(loss)


@pytest.mark.slow
def test_a_step_that_does_not_log_makes_no_host_sync(tmp_path, micro, corpus):
    """Runs of 3 and 6 steps that log only at their end differ by 3 non-logging steps: the syncs they
    add are none in the project's loop, objectives or optimiser. The libraries' own (transformers' SDPA
    mask check, `padding_mask.all()`, once per encoder, which a compiled step, the default on a GPU,
    traces away) are theirs to change between versions and are not held here."""
    from pretrain.train import pretrain

    counts = {}
    for steps in (3, 6):
        with HostSyncs() as syncs:
            pretrain(micro_config(tmp_path, corpus, f"run{steps}", max_steps=steps, log_every_steps=1000))
        counts[steps] = syncs.calls
    added = counts[6] - counts[3]
    assert not {call: n for call, n in added.items() if call[0] == "project"}, added
    assert counts[3][("project", "__float__")] > 0  # the counter sees the project's own syncs (logging)


def test_batches_prepared_ahead_are_the_streams_batches_and_resume_alike():
    """Prefetching builds the next batch on a thread during the step; what it hands out and the state a
    checkpoint saves are the plain stream's, so a run resumed from any step goes on identically."""
    import datasets

    from pretrain.data import BatchStream, Prefetching

    examples = datasets.Dataset.from_dict({"input_ids": [[2, *range(5, 5 + n), 3] for n in range(1, 12)],
                                           "segment_b_start": [1 + n // 2 for n in range(1, 12)]})

    def stream():
        return BatchStream(examples, 4, seed=3, pad_id=0, width=16)

    plain, ahead = stream(), Prefetching(stream())
    for _ in range(7):  # past an epoch's end (11 examples, batches of 4)
        (expected, tokens), (got, got_tokens) = plain.next_batch(), ahead.next_batch()
        assert got_tokens == tokens and all(torch.equal(got[k], expected[k]) for k in expected)
        assert ahead.state_dict() == plain.state_dict()
    resumed = Prefetching(stream())
    resumed.load_state_dict(ahead.state_dict())
    for _ in range(3):
        (expected, _), (got, _) = plain.next_batch(), resumed.next_batch()
        assert torch.equal(got["input_ids"], expected["input_ids"])


@pytest.mark.slow
def test_probes_run_at_most_every_percent_of_the_budget(tmp_path, micro, corpus, monkeypatch):
    """Logged every step: every step's metrics reach on_log, the probes' only every PROBE_SPACING of the
    budget and at the last. The spacing made 4% here, so that 50 steps (not 200 at the real 1%) show it:
    every second or third step (2 steps, a third where float rounding leaves it just short)."""
    from pretrain import probe
    from pretrain.probe import POSITION_COSINE, UNIGRAM_AUC
    from pretrain.train import pretrain

    monkeypatch.setattr(probe, "PROBE_SPACING", 0.04)
    logged: list[tuple[int, dict]] = []
    config = micro_config(tmp_path, corpus, max_steps=50, log_every_steps=1)
    pretrain(config, on_log=lambda step, metrics: logged.append((step, dict(metrics))))
    assert [step for step, _ in logged] == list(range(1, 51))
    probed = [step for step, metrics in logged if UNIGRAM_AUC in metrics and POSITION_COSINE in metrics]
    assert 17 <= len(probed) <= 26 and probed[0] == 1 and probed[-1] == 50
    assert all(b - a in (2, 3) for a, b in zip(probed[:-1], probed[1:-1], strict=False))
    assert probed[-1] - probed[-2] <= 3


@pytest.mark.slow
def test_a_run_resumed_with_its_update_compiled_goes_on_as_the_eager_run(tmp_path, micro, corpus, monkeypatch):
    """`compile_optimizer` is a runtime setting a resume may turn on: a run checkpointed eagerly at step 2
    and resumed to step 4 with ELECTRA's Adam's update compiled (aot_eager: dynamo's graph, run op by op)
    ends with the eager resume's weights and moments, to the bit, and in one graph of the update."""
    import shutil

    import torch._dynamo
    from torch._dynamo.utils import counters

    from pretrain.train import pretrain
    from tests.pretrain_helpers import final_weights

    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **how: compile_(fn, fullgraph=True, backend="eager"))
    pretrain(micro_config(tmp_path, corpus, "eager", max_steps=2))
    shutil.copytree(tmp_path / "eager", tmp_path / "compiled")
    pretrain(micro_config(tmp_path, corpus, "eager", max_steps=4))
    torch._dynamo.reset()
    counters.clear()
    meta = pretrain(micro_config(tmp_path, corpus, "compiled", max_steps=4, compile_optimizer=True))
    assert meta["config"]["compile_optimizer"] is True and counters["stats"]["unique_graphs"] == 1
    eager, compiled = final_weights(tmp_path / "eager"), final_weights(tmp_path / "compiled")
    assert eager.keys() == compiled.keys()
    for name, value in eager.items():
        assert torch.equal(compiled[name], value), name


def test_compiling_the_update_of_torchs_adamw_is_refused_in_one_line(micro):
    """torch's fused AdamW is one kernel already: the setting would do nothing, so it is refused, not ignored."""
    from pretrain.config import PretrainConfig, resolve

    with pytest.raises(ValueError, match="compile_optimizer compiles ELECTRA's Adam; optimizer=adamw is torch's "
                                         "fused AdamW, one kernel already: drop compile_optimizer or use "
                                         "optimizer=electra"):
        resolve(PretrainConfig(preset=micro, optimizer="adamw", compile_optimizer=True))
