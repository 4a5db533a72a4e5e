"""Best-epoch selection (`select_epoch=last|best`): best restores the epoch with the highest dev score, so its
metrics, predictions and model are that epoch's; last keeps the last; the choice survives a resume and is
named wherever its scores are shown."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

# Each new set of dev outputs gets the next of these scores: the second epoch is the best, the third
# falls back. The same outputs seen again (the best epoch's model restored) get their own score again.
SCORES = (0.4, 0.9, 0.6)


def _scripted(adapter):
    """The text adapter with a dev score that the test decides per distinct set of outputs."""
    from tasks.text import TextAdapter

    seen: dict[str, float] = {}

    @dataclasses.dataclass
    class Scripted(TextAdapter):
        def score(self, split, outputs):
            key = hashlib.sha256(np.stack(outputs).tobytes()).hexdigest()
            if key not in seen:
                assert len(seen) < len(SCORES), "outputs that no epoch produced"
                seen[key] = SCORES[len(seen)]
            return {"accuracy": seen[key], "score": seen[key]}

    return Scripted(**{field.name: getattr(adapter, field.name) for field in dataclasses.fields(adapter)})


def _run(tiny_model, select_epoch):
    import torch
    import transformers
    from datasets import Dataset

    from tasks import batching, text
    from tasks.config import FinetuneConfig
    from tasks.finetune import LoopIO, finetune
    from tasks.text_task import TextTask

    task = TextTask("mood", ("text",), "label", "classification", ("ok", "alert"), ("accuracy",), "accuracy")
    rows = [{"text_a": f"the cat was very {word} .", "label": int(word == "sad"), "idx": i}
            for i, word in enumerate(["happy", "sad", "good", "bad", "big", "sad"] * 4)]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    splits = {"train": Dataset.from_list(rows), "validation": Dataset.from_list(rows[:8]),
              "test": Dataset.from_list(rows[8:12])}
    built = _scripted(text.build_task(task, splits, tokenizer, 16))
    states, outputs = [], []
    model_holder = {}

    def on_epoch(epoch, row):  # each epoch's weights, as trained
        states.append({k: v.clone() for k, v in model_holder["model"].state_dict().items()})

    transformers.set_seed(0)
    model = model_holder["model"] = text.load_model(str(tiny_model), task)
    config = FinetuneConfig(learning_rate=1e-3, layerwise_lr_decay=1.0, num_epochs=3, batch_size=8,
                            precision="fp32", select_epoch=select_epoch)
    result = finetune(model, built, config, batching.collator(tokenizer, built.pad_to_multiple_of),
                      LoopIO(on_epoch=on_epoch))
    with torch.no_grad():  # the test split as the returned model predicts it now
        encoded = batching.collator(tokenizer, None)(list(built.evals["test"]))
        outputs = list(model.eval()(**encoded).logits.numpy())
    return result, model, states, outputs


def test_best_keeps_the_best_epochs_scores_predictions_and_model(tiny_model):
    import torch

    result, model, states, test_outputs = _run(tiny_model, "best")
    assert [row["validation_score"] for row in result.history] == list(SCORES)  # every epoch still logged
    assert result.chosen_epoch == 2 and result.metrics["validation"]["score"] == 0.9
    for name, tensor in model.state_dict().items():  # the model (what save_models writes) is epoch 2's
        assert torch.equal(tensor, states[1][name]), name
    assert not all(torch.equal(t, states[2][n]) for n, t in model.state_dict().items())
    # test predictions come from the restored model
    np.testing.assert_allclose(np.stack(result.outputs["test"]), np.stack(test_outputs), atol=1e-5)


def test_last_keeps_the_last_epoch(tiny_model):
    import torch

    result, model, states, _ = _run(tiny_model, "last")
    assert result.chosen_epoch is None and result.metrics["validation"]["score"] == 0.6
    assert all(torch.equal(tensor, states[2][name]) for name, tensor in model.state_dict().items())


def test_the_best_epoch_survives_a_saved_state(tmp_path):
    """A stopped seed resumes with its best so far: the holder is one of the state's parts (weights_only)."""
    import torch

    from tasks import finetune_state
    from tasks.best_epoch import BestEpoch

    model = torch.nn.Linear(2, 1)
    best = BestEpoch()
    best.offer(1, {"validation": {"score": 0.7}}, model)
    kept = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    best.offer(2, {"validation": {"score": 0.5}}, model)  # worse: not kept
    state = finetune_state.SeedState(tmp_path / "s.pt", {"select_epoch": "best"})
    state._generator = torch.Generator()
    state.save({"model": model, "best": best}, finetune_state.LoopPoint(epoch=2))
    again = BestEpoch()
    finetune_state.SeedState(tmp_path / "s.pt", {"select_epoch": "best"}).start({"best": again})
    assert (again.epoch, again.score) == (1, 0.7)
    assert again.restore(model, last_epoch=3) and torch.equal(model.weight, kept)


def test_a_task_without_a_dev_score_refuses_best_in_one_line():
    from foundation.infra.errors import UserError
    from tasks.best_epoch import epoch_score

    assert epoch_score({"validation_matched": {"score": 0.5}, "validation_mismatched": {"score": 0.7}}) == 0.6
    with pytest.raises(UserError, match=r"^select_epoch=best chooses the epoch by its dev score, and this task "
                                        r"scores no dev split each epoch; leave select_epoch=last$"):
        epoch_score({})


def test_best_epoch_on_dev_is_named_as_a_departure_and_in_the_run_table():
    from harness.config import as_dict
    from harness.finetuning.table import read_task_table
    from reports import recipe
    from tasks.config import FinetuneConfig

    config = as_dict(FinetuneConfig(select_epoch="best"))
    assert recipe.describe(recipe.departures({"config": config}, "small")) == \
        "select_epoch=best (best epoch on dev)"
    results = {"config": config, "data": {"task": {"headline": "accuracy", "metrics": ["accuracy"]},
                                          "files": {"train": {"sha256": "ab" * 32}}},
               "summary": {}, "runs": [{"task": "mood", "seed": 0, "chosen_epoch": 2},
                                       {"task": "mood", "seed": 1, "chosen_epoch": 3}]}
    assert read_task_table(results).splitlines()[-1] == (
        "scores: best epoch on dev (select_epoch=best, a departure from ELECTRA's last epoch; choosing on dev "
        "inflates dev scores); epochs chosen: mood seed 0: 2, mood seed 1: 3")
    assert recipe.best_epoch_note(results | {"config": as_dict(FinetuneConfig())}) is None
