"""Text corpus -> tokenised paragraphs in an Arrow cache.

Input: plain or gzipped text, one paragraph per line, a blank line between documents (the
BERT/ELECTRA convention). Each paragraph becomes one row of WordPiece ids plus a flag for "first
paragraph of a document". The rows are written by `datasets` in batches and memory-mapped when
read, so a corpus larger than memory streams through; the cache key covers the files (path, size,
mtime) and the tokenizer, so a changed corpus or vocabulary is re-tokenised.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from foundation.infra.errors import UserError
from foundation.training.quiet import quiet_datasets

TEXT_SUFFIXES = (".txt", ".raw", ".text")  # inside folders; optionally followed by .gz
PIPELINE_VERSION = 1  # bump when tokenisation output changes, to invalidate caches
ENCODE_BATCH = 1000


def corpus_files(paths: tuple[str, ...] | list[str]) -> list[Path]:
    """The text files named by `paths`: files as given, folders searched for *.txt/.raw[.gz]."""
    files: list[Path] = []
    for name in paths:
        path = Path(name).expanduser()
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and _is_text(p))
            if not found:
                raise UserError(f"corpus folder {name!r} has no text files ({', '.join(TEXT_SUFFIXES)}, "
                                "optionally gzipped); pass files or a folder that holds them")
            files.extend(found)
        else:
            raise UserError(f"corpus path {name!r} does not exist; pass text files or folders")
    for path in files:
        check_text(path)
    if next(iter_paragraphs(files), None) is None:  # reads up to the first non-blank line
        raise UserError(f"corpus {', '.join(map(repr, paths))} holds no text (every file is empty or blank); "
                        "pass files with one paragraph per line")
    return files


SNIFF_BYTES = 1 << 20  # the head of each file; reading a large corpus whole would cost minutes


def check_text(path: Path) -> None:
    """A UserError for a file whose head is not UTF-8 text (a binary file named .txt, another encoding).

    Decoding replaces bad bytes, so such a file would otherwise be trained on as noise without a word.
    """
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
        raise UserError(f"corpus file {str(path)!r} cannot be read ({error}); fix or remove it") from None
    if b"\0" in head:
        raise UserError(f"corpus file {str(path)!r} is binary (NUL bytes at offset {head.index(0)}), not "
                        "text; remove it from the corpus or pass only text files")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # not merely a character cut at the end of the head
            raise UserError(f"corpus file {str(path)!r} is not UTF-8 text (byte 0x{head[error.start]:02x} "
                            f"at offset {error.start}); convert it to UTF-8 or remove it from the corpus") \
                from None


def _is_text(path: Path) -> bool:
    name = path.name.removesuffix(".gz")
    return not path.name.startswith(".") and name.endswith(TEXT_SUFFIXES)


def files_signature(files: Iterable[Path]) -> list[tuple[str, int, int]]:
    """Path, size and mtime of each file: changes when the corpus does."""
    return [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]


def iter_paragraphs(files: list[Path]) -> Iterator[tuple[str, bool]]:
    """(paragraph, starts_document) for every non-blank line; files and blank lines end documents."""
    for path in files:
        opener = gzip.open if path.name.endswith(".gz") else open
        new_document = True
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                text = line.strip()
                if not text:
                    new_document = True
                    continue
                yield text, new_document
                new_document = False


def tokenized_paragraphs(files: list[Path], tokenizer_dir: Path, tokenizer_key: str, cache_dir: Path):
    """Arrow-backed `datasets.Dataset` of {"input_ids", "starts_document"}, built once and cached."""
    import datasets

    key = cache_key("tokens", files_signature(files), tokenizer_key, PIPELINE_VERSION)
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32")),
                                  "starts_document": datasets.Value("bool")})
    with quiet_datasets():
        return datasets.Dataset.from_generator(
            _encode_paragraphs, features=features, cache_dir=str(cache_dir / "datasets"), fingerprint=key,
            gen_kwargs={"files": [str(f) for f in files], "tokenizer_dir": str(tokenizer_dir), "key": key})


def _encode_paragraphs(files: list[str], tokenizer_dir: str, key: str) -> Iterator[dict]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.model_max_length = 1 << 30  # paragraphs are split when packed, not here
    texts: list[str] = []
    flags: list[bool] = []
    for text, starts in iter_paragraphs([Path(f) for f in files]):
        texts.append(text)
        flags.append(starts)
        if len(texts) == ENCODE_BATCH:
            yield from _encode(tokenizer, texts, flags)
            texts, flags = [], []
    yield from _encode(tokenizer, texts, flags)


def _encode(tokenizer, texts: list[str], flags: list[bool]) -> Iterator[dict]:
    if not texts:
        return
    encoded = tokenizer(texts, add_special_tokens=False, return_attention_mask=False,
                        return_token_type_ids=False)["input_ids"]
    for ids, starts in zip(encoded, flags, strict=True):
        if ids:
            yield {"input_ids": ids, "starts_document": starts}


def cache_key(*parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
