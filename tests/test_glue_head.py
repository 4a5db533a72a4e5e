"""ELECTRA's GLUE head: [CLS] -> dropout -> dense, STS-B targets scaled, saved as a plain transformers head."""

import pytest
import torch
import transformers

from foundation.infra.errors import UserError
from foundation.models.identity import ModelIdentity
from tasks import glue, glue_head
from tasks.config import FinetuneConfig
from tasks.glue_data import load_glue
from tasks.registry import GLUE_TASKS


def _batch(tokenizer):
    encoded = tokenizer(["the cat was very happy .", "a dog is sad ."], ["she is good .", "he was bad ."],
                        padding=True, return_tensors="pt")
    return dict(encoded)


@pytest.mark.parametrize("name", ["rte", "stsb"])
def test_electra_head_is_one_dense_layer_on_cls(tiny_model, name):
    # the default on an ELECTRA discriminator, as the official code
    assert FinetuneConfig().resolved("small", 3, family_head="electra").head == "electra"
    task = GLUE_TASKS[name]
    torch.manual_seed(0)
    model = glue.load_model(str(tiny_model), task, head="electra", attn_implementation="eager").eval()
    assert {n for n, _ in model.named_parameters() if n.startswith("classifier")} == {
        "classifier.out_proj.weight", "classifier.out_proj.bias"}
    assert model.classifier.dropout.p == 0.1  # keep_prob 0.9
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    batch = _batch(tokenizer)
    with torch.no_grad():
        cls = model.electra(**batch).last_hidden_state[:, 0]
        logits = model(**batch).logits
        head = model.classifier.out_proj
        torch.testing.assert_close(logits, cls @ head.weight.T + head.bias)


@pytest.mark.parametrize("name, scale", [("rte", 1.0), ("stsb", 5.0)])
def test_saved_head_is_transformers_own_and_predicts_the_same(tiny_model, tmp_path, name, scale):
    task = GLUE_TASKS[name]
    torch.manual_seed(0)
    model = glue.load_model(str(tiny_model), task, head="electra", attn_implementation="eager").eval()
    with torch.no_grad():  # a trained-looking head, not the zero-bias initial one
        model.classifier.out_proj.bias.normal_()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    batch = _batch(tokenizer)
    with torch.no_grad():
        trained = model(**batch).logits * scale  # what GlueAdapter.predictions reports
    glue_head.to_standard_head(model, scale).save_pretrained(tmp_path / "saved")
    # plain transformers, no code of ours: GELU(z) - GELU(-z) = z makes its deeper head exact
    loaded = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "saved").eval()
    assert type(loaded.classifier).__name__ == "ElectraClassificationHead"
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, trained, atol=1e-5, rtol=1e-5)


def test_stsb_learns_scores_over_five_and_reports_them_back(tiny_model, glue_data):
    task = GLUE_TASKS["stsb"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    splits = load_glue(task, glue_data)
    built = glue.build_task(task, splits, tokenizer, max_length=32, head="electra")
    assert built.train["labels"] == pytest.approx([y / 5 for y in splits["train"]["label"]])
    assert built.predictions([torch.tensor([0.5]).numpy()]).tolist() == [2.5]
    plain = glue.build_task(task, splits, tokenizer, max_length=32, head="hf")
    assert plain.train["labels"] == pytest.approx(splits["train"]["label"])


def test_hf_head_is_kept_as_an_option_and_other_models_need_it(tiny_model):
    model = glue.load_model(str(tiny_model), GLUE_TASKS["rte"], head="hf", attn_implementation="eager")
    assert type(model.classifier).__name__ == "ElectraClassificationHead"
    assert glue_head.to_standard_head(model) is model
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32)
    with pytest.raises(UserError, match="head=electra needs an ELECTRA discriminator.*pass head=hf"):
        glue_head.use_electra_head(transformers.BertForSequenceClassification(config))


def test_head_auto_is_decided_in_one_place(monkeypatch):
    # model_setup asks tasks/config.py's head_for, which results.json's resume rule and the recipe use too
    from harness.finetuning import model_setup
    from tasks import config

    def setup(family):
        return model_setup.ModelSetup(ModelIdentity("/m", "/m", "/m", {}), None, None, "small", torch.device("cpu"), "eager", "fp32", family)

    assert [setup(family).head for family in ("electra", "bert")] == ["electra", "hf"]
    assert [config.head_for("auto", family) for family in ("electra", "bert", None)] == ["electra", "hf", "electra"]
    monkeypatch.setattr(config, "ELECTRA_HEAD_FAMILIES", ("electra", "bert"))
    assert setup("bert").head == config.head_for("auto", "bert") == "electra"
