"""Shared fixtures and the data tests make: a tiny random ELECTRA with its own vocabulary, a tiny
glue_data folder, SQuAD files, a pre-training corpus and the micro preset; the CLI invoked in-process.

Test modules import helpers from here or from the helper modules beside it (families.py,
mlflow_store.py, postgres.py, pretrain_helpers.py, search_fakes.py, slurm.py), never from one another
(tests/test_imports.py checks it)."""

from __future__ import annotations

import json
import os
import random
import socket
from pathlib import Path

import pytest

from foundation.models.presets import PRESETS, ModelPreset
from foundation.models.shapes import TransformerShape

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def _threads_per_worker() -> None:
    """Under pytest-xdist, each worker's share of the cores as its thread count (OMP_NUM_THREADS, read by
    torch, MKL and OpenBLAS as they load), unless one was set. Left to themselves, torch's kernels run
    one thread per core in every worker, so `-n 2` on two cores runs four (and more beside the workers'
    child processes): OpenMP threads that spin waiting for a busy core made the tiny-model loss test
    take 22 s under -n 2 (33 s in CI) where one thread a worker takes 4.8 s, and 154 s with two threads
    beside other work (measured 2026-11-27, 2 cores)."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = max(1, cores // int(workers))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import sys

    if "torch" in sys.modules:  # imported before this file (by a plugin): tell it too
        sys.modules["torch"].set_num_threads(threads)


_threads_per_worker()

REPO = Path(__file__).resolve().parents[1]
WORDS = ("the a cat dog sat ran on mat rug is was not happy sad big small red blue it he she they "
         "good bad film movie very quite and but , . ?").split()


def shared_dir() -> Path | None:
    """../shared beside the checkout (or $SHARED_DIR), where the real data lives."""
    candidate = Path(os.environ.get("SHARED_DIR", REPO.parent / "shared"))
    return candidate if (candidate / "data").is_dir() else None


@pytest.fixture(scope="session")
def shared() -> Path:
    path = shared_dir()
    if path is None:
        pytest.skip("real data not found: set SHARED_DIR or place shared/ beside the checkout")
    return path


def run_cli(args, capsys) -> tuple[int, str, str]:
    """`harness ARGS` in this process: its exit code, standard output and standard error."""
    from harness.cli import main

    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def glue_args(model, data, tmp_path, *extra) -> list[str]:
    """`run glue` of `model` on the GLUE folder `data`, writing under tmp_path."""
    return ["run", "glue", "--model", str(model), "--data-dir", str(data), "--output-dir",
            str(tmp_path / "out"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *extra]


def squad_args(model, tmp_path, *extra) -> list[str]:
    """`run squad` of `model`, writing under tmp_path (the data as `extra` says)."""
    return ["run", "squad", "--model", str(model), "--output-dir", str(tmp_path / "out"),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *extra]


# The tiny model has 64 positions: windows of 64 tokens with 16-token questions and overlaps.
SQUAD_SMALL = ["max_length=64", "doc_stride=16", "max_query_length=16", "precision=fp32", "batch_size=8"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_tiny_model(directory: Path, seed: int = 0, positions: int = 64) -> Path:
    """A 2-layer, 32-wide random ElectraForPreTraining with a WordPiece vocab of WORDS."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = transformers.BertTokenizer(vocab=str(vocab), do_lower_case=True)  # v5: `vocab`, not vocab_file
    config = transformers.ElectraConfig(vocab_size=len(tokenizer), embedding_size=16, hidden_size=32,
                                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                        max_position_embeddings=positions)
    transformers.set_seed(seed)
    transformers.ElectraForPreTraining(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def model128(tmp_path_factory) -> Path:
    """The tiny model with 128 positions: room for README's SST-2 sentences (tests/test_text_task.py, test_api.py)."""
    return write_tiny_model(tmp_path_factory.mktemp("m") / "tiny128", positions=128)


def _sentences(n: int, seed: int) -> list[tuple[str, str, int]]:
    """Pairs whose label is learnable from the words: 'happy/good' -> 1 (entailment-ish), else 0."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        positive = i % 2 == 0
        word = rng.choice(["happy", "good"] if positive else ["sad", "bad"])
        subject = rng.choice(["the cat", "a dog", "the film", "he", "she"])
        rows.append((f"{subject} was very {word} .", f"{subject} is {word} .", int(positive)))
    return rows


def write_glue_dir(root: Path, n_train: int = 16, n_dev: int = 8) -> Path:
    """RTE, STS-B and CoLA folders in the classic layout, with their real quirks."""
    nli = ("not_entailment", "entailment")
    for name, splits in {"RTE": ("index\tsentence1\tsentence2\tlabel", lambda i, a, b, y: f"{i}\t{a}\t{b}\t{nli[y]}"),
                         "STS-B": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
                                   "sentence2\tscore", lambda i, a, b, y:
                                   f"{i}\tmain\tx\t2012\t{i:04d}\tnone\tnone\t{a}\t{b}\t{4.5 * y + 0.25:.3f}")}.items():
        header, row = splits
        folder = root / name
        folder.mkdir(parents=True)
        for split, n, seed in (("train", n_train, 1), ("dev", n_dev, 2)):
            lines = [row(i, a, b, y) for i, (a, b, y) in enumerate(_sentences(n, seed))]
            (folder / f"{split}.tsv").write_text("\n".join([header, *lines]) + "\n")
        test_header = "\t".join(header.split("\t")[:-1])
        tests = ["\t".join(row(i, a, b, 0).split("\t")[:-1]) for i, (a, b, _) in enumerate(_sentences(6, 3))]
        (folder / "test.tsv").write_text("\n".join([test_header, *tests]))  # no final newline, as CoLA dev
    cola = root / "CoLA"
    cola.mkdir()
    for split, n, seed in (("train", n_train, 4), ("dev", n_dev, 5)):  # CoLA: no header
        lines = [f"src\t{y}\t\t{a}" for a, _, y in _sentences(n, seed)]
        (cola / f"{split}.tsv").write_text("\n".join(lines))
    (cola / "test.tsv").write_text("index\tsentence\n0\tthe cat sat .\n1\tsat cat the\n")
    return root


@pytest.fixture
def temp_dir_elsewhere(tmp_path, monkeypatch) -> Path:
    """The system temp dir moved to a fresh folder, so that a model in pytest's temp dir (tiny_model) is
    not the one-off that `harness run` leaves out of the leaderboard."""
    import tempfile

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    return elsewhere


@pytest.fixture
def glue_data(tmp_path) -> Path:
    return write_glue_dir(tmp_path / "glue_data")


@pytest.fixture(scope="session")
def session_glue_data(tmp_path_factory) -> Path:
    """One glue_data folder for the session, for tests that only read it."""
    return write_glue_dir(tmp_path_factory.mktemp("session_glue") / "glue_data")


def finetune_glue(tiny_model, glue_data, name, seed=0, **settings):
    """The one loop on GLUE task `name` of glue_data, 32-token inputs: (result, model, built task)."""
    import transformers

    from tasks import batching, glue
    from tasks.config import FinetuneConfig
    from tasks.finetune import LoopIO, finetune
    from tasks.glue_data import load_glue
    from tasks.registry import GLUE_TASKS

    task = GLUE_TASKS[name]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    built = glue.build_task(task, load_glue(task, glue_data), tokenizer, max_length=32)
    settings = {"precision": "fp32", "batch_size": 4, "seed": seed} | settings
    config = FinetuneConfig(**settings).resolved("small", 1)
    transformers.set_seed(seed)
    model = glue.load_model(str(tiny_model), task, attn_implementation="eager")
    result = finetune(model, built, config, batching.collator(tokenizer), LoopIO(progress=False))
    return result, model, built


PLAIN = [w for w in WORDS if w not in ",.?"]


def _paragraph(rng, index, version, num_questions=4):
    # 8 to 14 sentences of 4 words: some contexts need two or three 64-token windows.
    sentences = [" ".join(rng.choice(PLAIN) for _ in range(4)) + " ." for _ in range(rng.randint(8, 14))]
    context = " ".join(sentences)
    qas = []
    for q in range(num_questions):
        qa = {"id": f"p{index}q{q}", "question": " ".join(rng.choice(PLAIN) for _ in range(3)) + " ?"}
        impossible = version == "2.0" and q % 2 == 1
        if impossible:
            qa["answers"] = []
        else:
            sentence = rng.randrange(len(sentences))
            start = sum(len(s) + 1 for s in sentences[:sentence])
            qa["answers"] = [{"text": sentences[sentence][:-2], "answer_start": start}]
        if version == "2.0":
            qa["is_impossible"] = impossible
        qas.append(qa)
    return {"context": context, "qas": qas}


def write_squad(path, version, num_articles=5, seed=0, bad_offset=False):
    """An official-format SQuAD file of `num_articles` articles, two paragraphs of four questions each."""
    rng = random.Random(seed)
    articles = [{"title": f"article {a}", "paragraphs": [_paragraph(rng, 2 * a + p, version)
                                                          for p in range(2)]} for a in range(num_articles)]
    if bad_offset:
        articles[0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 10_000
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": version, "data": articles}))
    return path


# A 2-layer, 32-wide preset that pre-trains in seconds on the CPU; the `micro` fixture registers it.
MICRO = ModelPreset("test-micro", "electra", "small",
                    TransformerShape(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                                     embedding_size=16), pretrain_batch_size=8, pretrain_seq_len=32,
                    pretrain_learning_rate=2e-3, max_position_embeddings=64)
SUBJECTS = ["the cat", "a dog", "my sister", "the old man", "the teacher", "a small bird", "the farmer"]
VERBS = ["sees", "likes", "finds", "carries", "paints", "follows", "feeds"]
OBJECTS = ["the ball", "a red apple", "the green door", "a long letter", "the river", "an empty box"]


def write_corpus(path: Path, documents: int = 40, seed: int = 0) -> Path:
    """Documents of subject-verb-object sentences: a generator can learn their statistics quickly."""
    rng = random.Random(seed)
    with open(path, "w") as handle:
        for _ in range(documents):
            for _ in range(rng.randint(2, 6)):
                handle.write(" ".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
                                      for _ in range(rng.randint(1, 6))) + "\n")
            handle.write("\n")
    return path


@pytest.fixture
def micro(monkeypatch) -> str:
    """The MICRO preset registered for this test; its name."""
    monkeypatch.setitem(PRESETS, MICRO.name, MICRO)
    return MICRO.name


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """One corpus file for the session (read only): the corpus cache is keyed on the files' path and
    mtime, so tests that pre-train on it with micro_config's session-wide cache_dir train its tokenizer
    and tokenise it once, not once a test."""
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


def pytest_collection_modifyitems(config, items):
    """Tests marked `cuda` skip, saying why, where torch sees no CUDA GPU (CI, this project's CPUs)."""
    gpu_tests = [item for item in items if item.get_closest_marker("cuda")]
    if not gpu_tests:
        return
    import torch

    if torch.cuda.is_available():
        return
    reason = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False); "
                                     "on a GPU machine run: python -m pytest -m cuda")
    for item in gpu_tests:
        item.add_marker(reason)


def pytest_configure(config):
    """Tests marked `release` (calibration simulations, Inductor against eager, long DDP runs: what only
    a release needs, `tox -e release`) are deselected unless the -m expression names them."""
    expression = config.option.markexpr
    if "release" not in expression:
        config.option.markexpr = f"({expression}) and not release" if expression else "not release"


# --- A migrated MLflow store copied, not migrated, per test ---------------------------------------
# Creating a SQLite MLflow store runs MLflow's ~70 Alembic migrations: seconds per store on this
# machine, and about 60 fast tests each open a fresh one. In this process (not in subprocesses, so
# tests that launch `harness` still migrate for real) MLflow's table set-up copies one store that the
# real set-up migrated once per session, with SQLite's backup API: the same schema, Alembic version
# and rows, so MLflow's own schema check after it still applies.
def _copy_migrated_store(real_initialize, template: Path):
    import sqlite3

    def initialize(engine):
        if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
            return real_initialize(engine)
        if not template.exists():  # migrated for real, once, by MLflow's own function
            import sqlalchemy

            template_engine = sqlalchemy.create_engine(f"sqlite:///{template}")
            real_initialize(template_engine)
            template_engine.dispose()
        source, target = sqlite3.connect(template), engine.raw_connection()
        try:
            source.backup(target.driver_connection)
        finally:
            source.close()
            target.close()
    return initialize


@pytest.fixture(scope="session", autouse=True)
def _migrated_mlflow_stores(tmp_path_factory):
    """_copy_migrated_store in place from the moment MLflow's store utilities are imported (a finder
    on sys.meta_path wraps their loading), so that no test pays for importing MLflow's modules unless
    it uses them; the registry store imports the function by name after that, so it gets the copy too."""
    import importlib.abc
    import importlib.util
    import sys

    name, template = "mlflow.store.db.utils", tmp_path_factory.mktemp("mlflow_template") / "mlflow.db"

    def install(utils):
        # an MLflow without this private function gets no copy: its tests run, each migrating its own store
        if hasattr(utils, "_initialize_tables"):
            utils._initialize_tables = _copy_migrated_store(utils._initialize_tables, template)

    class PatchOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)  # once; and so that find_spec below finds the real module
            spec = importlib.util.find_spec(fullname)
            real_exec = spec.loader.exec_module

            def exec_module(module):
                real_exec(module)
                install(module)
            spec.loader.exec_module = exec_module
            return spec

    finder = PatchOnImport()
    if name in sys.modules:
        install(sys.modules[name])
    else:
        sys.meta_path.insert(0, finder)
    yield
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)


# --- One Slurm cluster per session (per xdist worker), tests/slurm.py ------------------------------
@pytest.fixture(scope="session")
def slurm_cluster():
    """A one-node Slurm cluster started for the session; skips, saying why, where one cannot start."""
    from tests import slurm

    reason = slurm.why_unavailable()
    if reason:
        pytest.skip(reason)
    with slurm.cluster() as running:
        yield running


@pytest.fixture
def on_slurm(slurm_cluster, monkeypatch):
    """The session's cluster, with SLURM_CONF set in this process (sbatch, squeue and the jobs read it)."""
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    return slurm_cluster
