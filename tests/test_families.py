"""What users bring: Hub ids resolved offline from a cache in the hub layout, and tiny checkpoints of each
encoder family through GLUE, SQuAD, ONNX export and torch-free prediction, from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from harness.cli import main
from tests.conftest import REPO, write_tiny_model
from tests.conftest import run_cli as run
from tests.families import FAMILIES, SIZES, write_family_model, write_hub_cache, write_squad_file

QUICK = ["num_epochs=1", "batch_size=8", "precision=fp32", "predict_test=false"]


@pytest.fixture(scope="module")
def family_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return lambda family: write_family_model(family, root / family) if not (root / family).is_dir() \
        else root / family


def glue(model, data, out, *extra, tracking: str | None = None):
    """`harness run glue` on RTE, tracked in a SQLite store in `out` unless `tracking` names another."""
    return ["run", "glue", "--model", model, "--data-dir", data, "--output-dir", out / "run",
            "--tracking-uri", tracking or f"sqlite:///{out / 'mlflow.db'}", "--tasks", "rte", *QUICK, *extra]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_fine_tunes_rte_from_the_cli(family, family_model, session_glue_data, tmp_path, capsys):
    import transformers

    model = family_model(family)
    code, out, err = run(glue(model, session_glue_data, tmp_path), capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["model"]["family"] == family and results["model"]["recipe"] == "electra-small"
    # head=auto: the family's own head (ELECTRA's single dense layer is for ELECTRA discriminators)
    assert results["config"]["head"] == "hf"
    (record,) = results["runs"]
    assert record["resolved_config"]["learning_rate"] == 3e-4  # ELECTRA-Small's row: 32 wide, 2 deep
    encoder = transformers.AutoModel.from_pretrained(model)  # the encoder without a pooler (BERT's is the head's)
    assert results["flops"]["num_params"] == sum(p.numel() for name, p in encoder.named_parameters()
                                                 if not name.startswith("pooler."))
    saved = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "run" / "models" / "rte-seed0")
    before = transformers.AutoModel.from_pretrained(model).state_dict()
    after = saved.base_model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)  # it trained


@pytest.fixture(scope="module")
def roberta_squad(family_model, tmp_path_factory):
    """A RoBERTa (no token types) fine-tuned on a tiny SQuAD v1.1, exported to ONNX with int8."""
    root = tmp_path_factory.mktemp("roberta-squad")
    data = write_squad_file(root / "squad" / "dev-v1.1.json").parent
    args = ["run", "squad", "--model", family_model("roberta"), "--version", "1.1", "--data-dir", data,
            "--output-dir", root / "run", "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}",
            "max_length=64", "doc_stride=16", "max_query_length=16", "precision=fp32", "batch_size=8",
            "num_epochs=2", "holdout_fraction=0.25"]
    assert main([str(a) for a in args]) == 0
    args = ["export", "onnx", "--run", root / "run", "--task", "squad", "--quantize", "int8", "--data-dir",
            data, "--output", root / "bundle", "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}"]
    assert main([str(a) for a in args]) == 0
    return root


@pytest.mark.slow
def test_a_family_without_token_types_runs_squad_and_exports(roberta_squad):
    import onnxruntime

    results = json.loads((roberta_squad / "run" / "results.json").read_text())
    assert results["model"]["family"] == "roberta"
    manifest = json.loads((roberta_squad / "bundle" / "manifest.json").read_text())
    # The answer mask comes from context_mask, never from token types RoBERTa does not have.
    assert manifest["inputs"] == ["input_ids", "attention_mask", "context_mask"]
    session = onnxruntime.InferenceSession(str(roberta_squad / "bundle" / "model.onnx"))
    assert [i.name for i in session.get_inputs()] == manifest["inputs"]
    assert manifest["parity"]["max_abs_diff"] <= 1e-4


@pytest.mark.slow
def test_the_runtime_windows_a_roberta_pair_as_fine_tuning_did(roberta_squad):
    """Four special tokens in a RoBERTa pair (<s> q </s></s> c </s>), not BERT's three: the bundle's windows,
    their steps and their context masks are the fine-tuning features' own, token for token."""
    from transformers import AutoTokenizer

    from harness.deploy.onnx_check import requests_for
    from harness.deploy.onnx_predictor import Predictor, pad_batch
    from harness.deploy.question_answering import Predictor as Answering
    from tasks import squad_data, squad_features
    from tasks.batching import collator
    from tasks.registry import SQUAD_TASKS

    examples, _ = squad_data.load_squad_json(roberta_squad / "squad" / "dev-v1.1.json", "1.1")
    tokenizer = AutoTokenizer.from_pretrained(roberta_squad / "run" / "models" / "squad-seed0")
    features = squad_features.prepare_eval_features(examples, tokenizer, 64, 16, 16)
    predictor = Predictor(roberta_squad / "bundle")
    encoded = predictor.encode(requests_for(SQUAD_TASKS["1.1"], examples))
    assert [e.ids for e in encoded.encodings] == features["input_ids"]
    wanted = collator(tokenizer)([{"input_ids": f["input_ids"], "attention_mask": f["attention_mask"],
                                   "context_mask": f["context_mask"]} for f in features])
    got = pad_batch(encoded.encodings, tokenizer.pad_token_id, ["input_ids", "context_mask"], Answering.columns)
    width = got["context_mask"].shape[1]
    assert (got["context_mask"] == wanted["context_mask"][:, :width].numpy()).all()


@pytest.mark.slow
def test_torch_free_predict_answers_from_a_roberta_bundle(roberta_squad):
    context = "the cat sat on the mat . a dog ran on the rug ."
    request = json.dumps({"question": "where did the cat sit ?", "context": context})
    done = subprocess.run([sys.executable, "-m", "harness.cli", "predict", "--bundle",
                           str(roberta_squad / "bundle"), "--input", "-"], input=request + "\n",
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    # a span of whole words of the context, where it says it is: an empty answer is "in" any context
    assert found["answer"] and found["answer"] == context[found["start"]:found["end"]]
    assert f" {found['answer']} " in f" {context} "


def test_layer_decay_finds_each_familys_layers_from_its_modules():
    import transformers

    from tasks.optim import parameter_groups

    configs = [transformers.DistilBertConfig(vocab_size=20, dim=8, n_layers=3, n_heads=2, hidden_dim=16),
               transformers.ModernBertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=3,
                                             num_attention_heads=2, intermediate_size=16, pad_token_id=0,
                                             bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)]
    for config in configs:
        model = transformers.AutoModelForSequenceClassification.from_config(config)
        groups = parameter_groups(model, learning_rate=1.0, decay=0.5, weight_decay=0.0)
        lr_of = {id(p): group["lr"] for group in groups for p in group["params"]}
        layers = model.base_model.transformer.layer if config.model_type == "distilbert" \
            else model.base_model.layers
        # head at depth L + 2 = 5: layer i (depth i + 1) trains at 0.5^(4 - i), embeddings at 0.5^5
        for i, layer in enumerate(layers):
            assert {lr_of[id(p)] for p in layer.parameters()} == {0.5 ** (4 - i)}
        embeddings = model.base_model.embeddings
        assert {lr_of[id(p)] for p in embeddings.parameters()} == {0.5 ** 5}
        assert {lr_of[id(p)] for p in model.classifier.parameters()} == {1.0}


def test_a_model_without_a_layer_list_is_refused_decay_in_one_line():
    import transformers

    from foundation.infra.errors import UserError
    from tasks.optim import parameter_groups

    model = transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=20, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16))
    model.config.num_hidden_layers = 3  # its module list holds 2: nothing says which modules are layers
    with pytest.raises(UserError, match="pass layerwise_lr_decay=1.0") as raised:
        parameter_groups(model, 1.0, 0.8, 0.0)
    assert "\n" not in str(raised.value)
    assert len(parameter_groups(model, 1.0, 1.0, 0.0)) == 2  # no decay: one rate, decay or not


@pytest.mark.parametrize("hidden, layers, row", [
    (128, 4, "small"), (256, 12, "small"), (384, 12, "base"), (768, 6, "base"), (768, 12, "base"),
    (768, 24, "large"), (1024, 24, "large"), (1024, 12, "large")])
def test_recipe_row_by_width_and_depth(hidden, layers, row):
    from foundation.models.presets import size_of

    assert size_of(hidden, layers) == row


def _offline(cache, *args, module: str | None = "harness.cli"):
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *(("-m", module) if module else ()), *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


# `harness ARGS` for each JSON list of arguments in argv[1], one after another in one process; the exit
# status of the first that fails, else 0
EACH = ("import json, sys\nfrom harness.cli import main\n"
        "sys.exit(next((code for code in map(main, json.loads(sys.argv[1])) if code), 0))")


@pytest.mark.slow
def test_a_hub_id_and_revision_resolve_from_the_hub_cache_offline(session_glue_data, tmp_path):
    cache = tmp_path / "hub"
    main_snapshot = write_hub_cache(cache, "someone/tiny-electra", write_tiny_model(tmp_path / "a"))
    tagged = write_hub_cache(cache, "someone/tiny-electra", write_tiny_model(tmp_path / "b", seed=1),
                             commit="1" * 40, ref="v1")
    models = (("someone/tiny-electra", main_snapshot), ("someone/tiny-electra@v1", tagged))
    # no MLflow store: what is checked is the model's resolution, and results.json records it. Both runs in
    # one process (its HF_HUB_CACHE is read as huggingface_hub is imported): one start, ~10 s, not two
    runs = [[str(a) for a in glue(model, session_glue_data, tmp_path / model.replace("/", "_"), tracking="none")]
            for model, _ in models]
    done = _offline(cache, "-c", EACH, json.dumps(runs), module=None)
    assert done.returncode == 0, done.stderr
    for model, snapshot in models:
        results = json.loads((tmp_path / model.replace("/", "_") / "run" / "results.json").read_text())
        assert results["model"] == {"name": model, "path": str(snapshot), "family": "electra",
                                    "recipe": "electra-small", "source": f"Hub cache ({model})",
                                    "license": None}
        assert results["config"]["head"] == "electra"  # head=auto on an ELECTRA discriminator
        assert results["flops"]["model_id"] == model  # the leaderboard's key: the id, not this cache's path


@pytest.mark.slow
def test_an_id_in_neither_place_is_one_line_naming_it_and_the_cache(session_glue_data, tmp_path):
    cache = tmp_path / "empty-hub"
    done = _offline(cache, *glue("someone/not-here", session_glue_data, tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("harness: error: 'someone/not-here' is not a local directory and could not "
                                  f"be had from the Hugging Face Hub or its cache {str(cache)!r} (offline")
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_that_needs_hub_code_is_refused_naming_the_setting(session_glue_data, tmp_path, capsys):
    model = write_tiny_model(tmp_path / "custom")
    config = json.loads((model / "config.json").read_text())
    config |= {"model_type": "my-encoder", "auto_map": {"AutoModel": "modeling_my.MyModel"}}
    (model / "config.json").write_text(json.dumps(config))
    (model / "modeling_my.py").write_text("raise SystemExit('code from the repository ran')\n")
    capsys.readouterr()
    code, _, err = run(glue(model, session_glue_data, tmp_path), capsys)
    assert code == 2 and err == (f"harness: error: {str(model)!r} is a 'my-encoder' model that transformers "
                                 "can only load by running code from its repository; pass "
                                 "trust_remote_code=true if you trust that code\n")
    assert not (tmp_path / "run").exists()


def test_head_electra_on_another_family_is_one_line(family_model, session_glue_data, tmp_path, capsys):
    model = family_model("bert")
    capsys.readouterr()
    code, _, err = run(glue(model, session_glue_data, tmp_path, "head=electra"), capsys)
    assert code == 2 and err == ("harness: error: head=electra needs an ELECTRA discriminator, not a bert "
                                 "model; pass head=hf (or leave head=auto) to keep the model's own "
                                 "classification head\n")
    assert not (tmp_path / "run").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_family_without_a_span_head_is_refused_before_anything_runs(tmp_path, capsys):
    import transformers

    model = tmp_path / "esm"  # ESM (a protein encoder): sequence classification, no question answering
    model.mkdir()
    (model / "vocab.txt").write_text("\n".join(["<cls>", "<pad>", "<eos>", "<unk>", "A", "C", "G", "T", "<mask>"]))
    tokenizer = transformers.EsmTokenizer(vocab_file=str(model / "vocab.txt"))
    transformers.EsmForMaskedLM(transformers.EsmConfig(
        vocab_size=len(tokenizer), pad_token_id=1, mask_token_id=8, **SIZES)).save_pretrained(model)
    tokenizer.save_pretrained(model)
    data = write_squad_file(tmp_path / "squad" / "dev-v1.1.json").parent
    capsys.readouterr()
    code, _, err = run(["run", "squad", "--model", model, "--version", "1.1", "--data-dir", data,
                        "--output-dir", tmp_path / "run", "--tracking-uri", f"sqlite:///{tmp_path / 'ml.db'}"],
                       capsys)
    assert code == 2 and err == ("harness: error: SQuAD needs a QuestionAnswering head, and transformers has "
                                 f"none for 'esm' models ({model}); choose an encoder family that has one\n")
    assert not (tmp_path / "run").exists() and not (tmp_path / "ml.db").exists()


def test_flops_reads_a_hub_ids_config_from_the_cache(tmp_path, capsys, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    write_hub_cache(cache, "someone/tiny-electra", write_tiny_model(tmp_path / "a"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))  # what snapshot_download reads per call
    capsys.readouterr()
    code, out, err = run(["flops", "--model", "someone/tiny-electra", "--no-measure"], capsys)
    assert code == 0, err
    assert "checkpoint config" in out and "hidden 32, 2 layers, 2 heads" in out
