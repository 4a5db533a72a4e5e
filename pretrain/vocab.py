"""The WordPiece tokenizer of a run: the BERT uncased vocabulary by default, a given one, or one
trained on the corpus with `tokenizers` (cached, so every process and resumption gets the same)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from foundation.infra.atomic import atomic_dir
from foundation.infra.errors import UserError
from pretrain.corpus import files_signature, iter_paragraphs

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
DEFAULT_TOKENIZER = "models/electra-small-discriminator"  # under the shared dir: BERT uncased vocab


def shared_dir() -> Path:
    """The shared data folder: $SHARED_DIR, else ../shared beside the repository.

    The repository is this file's own checkout when it runs from one (an editable install); an installed
    copy (site-packages, e.g. `.tox/demo/bin/harness`) has none beside it, so the first `shared/` with a
    `data/` folder in the working directory or above it, else ../shared beside the working directory.
    """
    if os.environ.get("SHARED_DIR"):
        return Path(os.environ["SHARED_DIR"]).expanduser()
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file():
        return checkout.parent / "shared"
    here = Path.cwd()
    found = [folder / "shared" for folder in (here, *here.parents) if (folder / "shared" / "data").is_dir()]
    return found[0] if found else here.parent / "shared"


def load_tokenizer(spec: str | None, corpus_files: list[Path], cache_dir: Path, vocab_size: int):
    """A `transformers` WordPiece tokenizer for `spec` (None, a dir, a vocab.txt, or "train")."""
    from transformers import AutoTokenizer, BertTokenizer

    if spec == "train":
        return AutoTokenizer.from_pretrained(trained_tokenizer_dir(corpus_files, cache_dir, vocab_size))
    path = Path(spec).expanduser() if spec else shared_dir() / DEFAULT_TOKENIZER
    if path.is_file():
        tokenizer = BertTokenizer(vocab=str(path), do_lower_case=True)
    elif path.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(path)
    elif spec:
        raise UserError(f"tokenizer {spec!r} does not exist; pass a tokenizer directory, a vocab.txt, "
                        "or tokenizer=train to train one on the corpus")
    else:
        raise UserError(f"default BERT vocabulary not found at {str(path)!r}; set SHARED_DIR to the shared "
                        "folder, pass tokenizer=DIR, or tokenizer=train")
    missing = [t for t in SPECIAL_TOKENS if t not in tokenizer.get_vocab()]
    if missing:
        raise UserError(f"tokenizer {str(path)!r} lacks {', '.join(missing)}; ELECTRA needs a BERT-style "
                        "WordPiece vocabulary")
    return tokenizer


def trained_tokenizer_dir(corpus_files: list[Path], cache_dir: Path, vocab_size: int) -> Path:
    """Train (once) a lower-cased WordPiece vocabulary on the corpus; its saved directory."""
    key = hashlib.sha256(repr((files_signature(corpus_files), vocab_size)).encode()).hexdigest()[:16]
    target = cache_dir / "tokenizers" / key
    if (target / "tokenizer_config.json").is_file():
        return target
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizer

    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator((line for line, _ in iter_paragraphs(corpus_files)),
                                vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    tokenizer = BertTokenizer(vocab=trainer.get_vocab(), do_lower_case=True, model_max_length=512)
    with atomic_dir(target) as tmp:
        tokenizer.save_pretrained(tmp)
    return target


def tokenizer_fingerprint(tokenizer) -> str:
    """Hash of the tokenizer's full definition (vocabulary, normalisation, special tokens)."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:16]
