"""Every damaged input is one line (issue 37): a table of real command lines over damaged files.

Each case damages a copy of a good input the way a user's goes wrong (a download cut short, a file
edited by hand, a tokenizer from another model, a column renamed, a typo in a URL, a nonsense
number) and runs the real command: exit 2, one line on stderr naming the bad value, and nothing
written where the run would write.
"""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from tests.conftest import WORDS, write_glue_dir, write_squad, write_tiny_model


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("good")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) + "\n")
    import transformers

    tiny = write_tiny_model(root / "tiny")
    transformers.ElectraForSequenceClassification.from_pretrained(tiny, num_labels=2).save_pretrained(root / "clf")
    return {"model": tiny, "glue": write_glue_dir(root / "glue"), "corpus": corpus, "clf": root / "clf"}


def cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def bigger_vocab(model: Path) -> None:
    """The tokenizer of another model: 40 more tokens than the embedding has rows."""
    vocab = model / "vocab.txt"
    vocab.write_text(vocab.read_text() + "".join(f"extra{i}\n" for i in range(40)))
    (model / "tokenizer.json").unlink(missing_ok=True)


def no_tokenizer(model: Path) -> None:
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (model / name).unlink(missing_ok=True)


def rename_column(glue: Path) -> None:
    train = glue / "RTE" / "train.tsv"
    train.write_text(train.read_text().replace("sentence2", "hypothesis", 1))


def squad_without_questions(path: Path) -> None:
    context = "the cat sat on the mat ."
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": "q1", "query": "where ?", "answers": [{"text": "on the mat", "answer_start": 12}]}]}]}]}))


def corrupt_gzip(path: Path) -> None:
    path.write_bytes(gzip.compress(b"the cat sat on the mat .\n" * 50)[:40])


GLUE_RUN = ["run", "glue", "--model", "{model}", "--tasks", "rte", "--data-dir", "{glue}", "--output-dir", "{out}",
            "num_epochs=1", "batch_size=8", "precision=fp32"]
GLUE = [*GLUE_RUN, "--tracking-uri", "sqlite:///{out}/mlflow.db"]
PRETRAIN = ["pretrain", "--preset", "electra-tiny", "--corpus", "{corpus}", "--output", "{out}",
            "--tracking-uri", "sqlite:///{tmp}/mlflow.db", "max_steps=1"]

# id: (what to damage, how, the command, what the one line must name)
CASES = {
    "safetensors cut in half": ("model", lambda m: cut_in_half(m / "model.safetensors"), GLUE,
                                "model.safetensors' is damaged"),
    "export of a cut checkpoint": ("clf", lambda m: cut_in_half(m / "model.safetensors"),
                                   ["export", "onnx", "--model", "{clf}", "--task", "rte", "--data-dir", "{glue}",
                                    "--output", "{out}", "--tracking-uri", "sqlite:///{tmp}/mlflow.db"],
                                   "model.safetensors' is damaged"),
    "search from a cut checkpoint": ("model", lambda m: cut_in_half(m / "model.safetensors"),
                                     ["search", "glue", "--task", "rte", "--data-dir", "{glue}", "--model", "{model}",
                                      "--trials", "1", "--storage", "sqlite:///{tmp}/optuna.db", "--output-dir",
                                      "{out}", "--tracking-uri", "sqlite:///{out}/mlflow.db"],
                                     "model.safetensors' is damaged"),
    "safetensors header garbage": ("model", lambda m: (m / "model.safetensors").write_bytes(b"\xff" * 64), GLUE,
                                   "model.safetensors' is damaged"),
    "config.json not JSON": ("model", lambda m: (m / "config.json").write_text('{"model_type": "electra",'), GLUE,
                             "config.json' is not valid JSON"),
    "unknown model_type": ("model", lambda m: edit_json(m / "config.json", model_type="electrum"), GLUE,
                           "electrum"),
    "no tokenizer": ("model", no_tokenizer, GLUE, "has no vocabulary"),
    "tokenizer of another model": ("model", bigger_vocab, GLUE, "has 78 tokens but the model's vocab_size is 38"),
    "weights of another shape": ("model", lambda m: edit_json(m / "config.json", hidden_size=48), GLUE,
                                 "do not fit its config.json"),
    "GLUE file with a wrong column": ("glue", rename_column, GLUE, "sentence2"),
    "SQuAD file without questions": ("squad", squad_without_questions,
                                     ["run", "squad", "--model", "{model}", "--dev-file", "{squad}", "--output-dir",
                                      "{out}", "--tracking-uri", "sqlite:///{out}/mlflow.db", "max_length=64"],
                                     "question"),
    "a damaged pre-training record": ("model", lambda m: (m / "pretrain_meta.json").write_text('{"steps": 3'),
                                      GLUE, "cannot read the pre-training record"),
    "GLUE max_length beyond the positions": (None, None, [*GLUE, "max_length=128"],
                                             "max_length 128 exceeds the model's 64 positions; pass max_length=64"),
    "SQuAD max_length beyond the positions": ("squad", lambda p: write_squad(p, "1.1"),
                                              ["run", "squad", "--model", "{model}", "--dev-file", "{squad}",
                                               "--output-dir", "{out}", "--tracking-uri", "sqlite:///{out}/mlflow.db",
                                               "max_length=128"],
                                              "max_length 128 exceeds the model's 64 positions; pass max_length=64"),
    "--seeds 0": (None, None, [*GLUE, "--seeds", "0"], "--seeds must be at least 1 (got 0)"),
    "negative epochs": (None, None, [*GLUE, "num_epochs=-1"], "num_epochs"),
    "malformed tracking URL": (None, None, [*GLUE_RUN, "--tracking-uri", "sqlite:/x.db"], "sqlite:/x.db"),
    "malformed storage URL": (None, None, ["search", "glue", "--task", "rte", "--data-dir", "{glue}", "--model",
                                           "{model}", "--trials", "1", "--storage", "sqlite//optuna.db",
                                           "--output-dir", "{out}", "--tracking-uri", "sqlite:///{tmp}/mlflow.db"],
                              "sqlite//optuna.db"),
    "empty corpus": ("corpus", lambda c: c.write_text("\n\n"), PRETRAIN, "holds no text"),
    "corrupt gzip corpus": ("corpus", lambda c: (corrupt_gzip(c.with_suffix(".txt.gz")), c.unlink()),
                            [a.replace("{corpus}", "{corpus}.gz") for a in PRETRAIN], "corpus.txt.gz"),
    "negative budget": (None, None, [*PRETRAIN, "max_time_s=-5"], "max_time_s"),
    "negative step budget": (None, None, [*PRETRAIN[:-1], "max_steps=-1"], "max_steps"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_damaged_input_is_one_line_naming_it(case, good, tmp_path, capsys):
    what, damage, argv, named = CASES[case]
    paths = {"model": tmp_path / "model", "glue": tmp_path / "glue", "corpus": tmp_path / "corpus" / "corpus.txt",
             "squad": tmp_path / "squad" / "dev-v1.1.json", "out": tmp_path / "out", "tmp": tmp_path,
             "clf": tmp_path / "clf"}
    shutil.copytree(good["model"], paths["model"])
    shutil.copytree(good["clf"], paths["clf"])
    shutil.copytree(good["glue"], paths["glue"])
    paths["corpus"].parent.mkdir()
    shutil.copy(good["corpus"], paths["corpus"])
    paths["squad"].parent.mkdir()
    if what == "squad":
        damage(paths["squad"])
    elif damage is not None:
        damage(paths[what])
    before = sorted(p for p in tmp_path.rglob("*"))
    code = main([arg.format(**{k: str(v) for k, v in paths.items()}) for arg in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("harness: error: ") and err.count("\n") == 1, err
    assert named in err, err
    # Nothing written. `harness search` opens its Optuna storage before it loads the model, so that a
    # bad URL fails at once: that store may exist, valid and empty (it holds no study yet).
    after = sorted(p for p in tmp_path.rglob("*") if p != tmp_path / "optuna.db")
    assert not paths["out"].exists() and after == before


def bin_checkpoint(source: Path, directory: Path) -> None:
    """`source` with its weights as pytorch_model.bin (torch.save's zip), as older Hub checkpoints hold them."""
    import torch
    from safetensors.torch import load_file

    shutil.copytree(source, directory)
    torch.save(load_file(directory / "model.safetensors"), directory / "pytorch_model.bin")
    (directory / "model.safetensors").unlink()


def test_whole_checkpoints_pass_in_every_weights_layout(good, tmp_path):
    """One file, shards with an index, and a torch.save .bin: read and shape-checked, nothing refused."""
    import transformers

    from foundation.models.checkpoint_check import check_checkpoint, weight_shapes

    model = transformers.ElectraForPreTraining.from_pretrained(good["model"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(good["model"])
    model.save_pretrained(tmp_path / "shards", max_shard_size="20KB")
    bin_checkpoint(good["model"], tmp_path / "bin")
    assert len(list((tmp_path / "shards").glob("model-*.safetensors"))) > 1
    one, shards = weight_shapes(good["model"]), weight_shapes(tmp_path / "shards")
    assert one == shards and one["electra.embeddings.word_embeddings.weight"] == (38, 16)
    for directory in (good["model"], tmp_path / "shards", tmp_path / "bin"):
        check_checkpoint(str(directory), model.config, tokenizer)


def test_a_cut_bin_file_or_a_missing_shard_is_named(good, tmp_path):
    import transformers

    from foundation.infra.errors import UserError
    from foundation.models.checkpoint_check import check_checkpoint

    model = transformers.ElectraForPreTraining.from_pretrained(good["model"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(good["model"])
    bin_checkpoint(good["model"], tmp_path / "bin")
    cut_in_half(tmp_path / "bin" / "pytorch_model.bin")
    with pytest.raises(UserError, match=r"pytorch_model.bin' is damaged \(File is not a zip file"):
        check_checkpoint(str(tmp_path / "bin"), model.config, tokenizer)
    model.save_pretrained(tmp_path / "shards", max_shard_size="20KB")
    shard = sorted((tmp_path / "shards").glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(UserError, match=f"{shard.name}', named in the safetensors index, is missing"):
        check_checkpoint(str(tmp_path / "shards"), model.config, tokenizer)
