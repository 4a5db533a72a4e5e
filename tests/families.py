"""Tiny random checkpoints of each encoder family a user may bring, with tokenizers trained or built here:
BERT (WordPiece, token types), RoBERTa (byte-level BPE trained in the test, no token types), DeBERTa-v3's
shape (SentencePiece-style Unigram, relative attention, type_vocab_size 0), DistilBERT (no token types,
layers at transformer.layer), ModernBERT (layers at `layers`, no token types)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import WORDS

SPECIALS_BERT = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SIZES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
         "max_position_embeddings": 80}
FAMILIES = ("bert", "roberta", "deberta-v2", "distilbert", "modernbert")


def _corpus() -> list[str]:
    return [" ".join(WORDS)] * 5 + ["the cat sat on the mat .", "a dog was very happy .", "she is sad ?"] * 5


def _wordpiece(directory: Path, tokenizer_class):
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join([*SPECIALS_BERT, *WORDS]) + "\n")
    tokenizer = tokenizer_class(vocab=str(vocab), do_lower_case=True)
    vocab.unlink()  # the saved tokenizer.json is what loads
    return tokenizer


def _byte_level_bpe(directory: Path):
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_corpus(), vocab_size=300, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(directory))
    return transformers.RobertaTokenizer(vocab=str(directory / "vocab.json"),
                                         merges=str(directory / "merges.txt"))


def _unigram():
    import transformers
    from tokenizers import SentencePieceUnigramTokenizer

    unigram = SentencePieceUnigramTokenizer()
    unigram.train_from_iterator(_corpus(), vocab_size=60, unk_token="[UNK]",
                                special_tokens=["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"])
    pieces = json.loads(unigram.to_str())["model"]["vocab"]
    return transformers.DebertaV2Tokenizer(vocab=[tuple(piece) for piece in pieces])


def write_family_model(family: str, directory: Path, seed: int = 0) -> Path:
    """A 2-layer, 32-wide random masked-LM checkpoint of `family` with its tokenizer, saved as Hub repos are."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    transformers.set_seed(seed)
    if family == "bert":
        tokenizer = _wordpiece(directory, transformers.BertTokenizer)
        model = transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=len(tokenizer), **SIZES))
    elif family == "distilbert":
        tokenizer = _wordpiece(directory, transformers.DistilBertTokenizer)
        model = transformers.DistilBertForMaskedLM(transformers.DistilBertConfig(
            vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
            max_position_embeddings=80))
    elif family == "roberta":
        tokenizer = _byte_level_bpe(directory)
        model = transformers.RobertaForMaskedLM(transformers.RobertaConfig(
            vocab_size=len(tokenizer), type_vocab_size=1, pad_token_id=tokenizer.pad_token_id, **SIZES))
    elif family == "modernbert":
        tokenizer = _byte_level_bpe(directory)
        ids = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id")
               for name in ("pad", "bos", "eos", "cls", "sep")}
        model = transformers.ModernBertForMaskedLM(transformers.ModernBertConfig(
            vocab_size=len(tokenizer), global_attn_every_n_layers=1, local_attention=16, **ids, **SIZES))
    elif family == "deberta-v2":  # DeBERTa-v3's shape: relative attention, no absolute positions or types
        tokenizer = _unigram()
        model = transformers.DebertaV2ForMaskedLM(transformers.DebertaV2Config(
            vocab_size=len(tokenizer), type_vocab_size=0, relative_attention=True, position_buckets=16,
            max_relative_positions=-1, pos_att_type=["p2c", "c2p"], position_biased_input=False,
            norm_rel_ebd="layer_norm", share_att_key=True, **SIZES))
    else:
        raise ValueError(f"no tiny {family!r} here; choose one of {', '.join(FAMILIES)}")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def write_hub_cache(cache: Path, repo_id: str, source: Path, commit: str = "0" * 40,
                    ref: str = "main") -> Path:
    """`source`'s files as huggingface_hub lays out a downloaded repo: models--org--name/refs/<ref> holding
    the commit, snapshots/<commit>/ the files (real files where the Hub keeps links to blobs)."""
    import shutil

    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / ref).write_text(commit)
    snapshot = repo / "snapshots" / commit
    shutil.copytree(source, snapshot)
    return snapshot


def write_squad_file(path: Path, num_articles: int = 4) -> Path:
    """A SQuAD v1.1 file of short contexts; each answer is the sentence the question's words come from."""
    import random

    rng = random.Random(0)
    words = [w for w in WORDS if w not in ",.?"]
    articles = []
    for a in range(num_articles):
        sentences = [" ".join(rng.choice(words) for _ in range(4)) + " ." for _ in range(6)]
        context = " ".join(sentences)
        qas = []
        for q in range(3):
            k = rng.randrange(len(sentences))
            start = sum(len(s) + 1 for s in sentences[:k])
            qas.append({"id": f"a{a}q{q}", "question": sentences[k][:-2] + " ?",
                        "answers": [{"text": sentences[k][:-2], "answer_start": start}]})
        articles.append({"title": f"article {a}", "paragraphs": [{"context": context, "qas": qas}]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": "1.1", "data": articles}))
    return path
