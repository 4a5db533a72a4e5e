"""Read official SQuAD v1.1 / v2.0 JSON into flat examples, and split them reproducibly by article.

One row per question: id, title, context, question, answers {text: [...], answer_start: [...]},
is_impossible. Unanswerable questions have empty answer lists; v2.0's `plausible_answers` are dropped.
The Hub's rajpurkar/squad rows have the same columns minus is_impossible, which `load_squad_hub` adds.
"""

import json
import random
import warnings
from pathlib import Path

import datasets

from foundation.infra.errors import UserError

VERSIONS = ("1.1", "2.0")
HUB_NAMES = {"1.1": "rajpurkar/squad", "2.0": "rajpurkar/squad_v2"}
SPLITS = ("train", "dev")

# Explicit, so a file whose questions are all unanswerable still gets typed (not null) answer lists.
SCHEMA = datasets.Features(
    {
        "id": datasets.Value("string"),
        "title": datasets.Value("string"),
        "context": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answers": {
            "text": datasets.Sequence(datasets.Value("string")),
            "answer_start": datasets.Sequence(datasets.Value("int32")),
        },
        "is_impossible": datasets.Value("bool"),
    }
)


def check_version(version: str) -> str:
    """Return version if it is a SQuAD version we read, else raise UserError listing the choices."""
    if version not in VERSIONS:
        raise UserError(f"unknown SQuAD version {version!r}; choose one of {', '.join(VERSIONS)}")
    return version


def squad_file(data_dir: str | Path, version: str, split: str) -> Path:
    """Path of the official file under data_dir for split 'train' or 'dev', e.g. dev-v1.1.json."""
    check_version(version)
    if split not in SPLITS:
        raise UserError(f"unknown SQuAD split {split!r}; choose one of {', '.join(SPLITS)}")
    path = Path(data_dir) / f"{split}-v{version}.json"
    if not path.is_file():
        present = sorted(p.name for p in Path(data_dir).glob("*.json")) if Path(data_dir).is_dir() else []
        raise UserError(
            f"{path} not found (JSON files there: {', '.join(present) or 'none'}); "
            f"put the official {path.name} there or pass another --data-dir"
        )
    return path


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise UserError(f"SQuAD file {path} not found; check the path or pass --data-dir")
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise UserError(f"{path} is empty; expected the official SQuAD JSON with a 'data' list of articles")
    try:
        top = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(
            f"{path} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}; "
            f"re-download or fix the file"
        ) from err
    if not isinstance(top, dict) or not isinstance(top.get("data"), list):
        raise UserError(f"{path} has no top-level 'data' list; is it an official SQuAD file?")
    return top


def _get(record: dict, key: str, where: str):
    if key not in record:
        raise UserError(f"{where} has no {key!r} field; add it (official SQuAD files always have one)")
    return record[key]


def _answer_problems(qid: str, context: str, answers: list[dict], impossible: bool) -> list[str]:
    # Problems are reported, never fixed or dropped: the caller decides whether the data is usable.
    if impossible and answers:
        return [f"{qid!r} is marked impossible but has {len(answers)} answers"]
    if not impossible and not answers:
        return [f"{qid!r} is answerable but has no answers"]
    problems = []
    for answer in answers:
        where = f"answer of {qid!r}"
        text, start = _get(answer, "text", where), _get(answer, "answer_start", where)
        if not isinstance(start, int) or not isinstance(text, str):
            raise UserError(f"{where} has answer_start {start!r}, text {text!r}; need an int and a string")
        end = start + len(text)
        if start < 0 or end > len(context):
            problems.append(f"{qid!r} answer [{start}:{end}] lies outside its {len(context)}-char context")
        elif context[start:end] != text:
            problems.append(f"{qid!r} answer {text!r} != context[{start}:{end}] {context[start:end]!r}")
    return problems


def _flatten(top: dict, path: Path, version: str) -> tuple[list[dict], list[str]]:
    rows, problems, seen = [], [], set()
    for article_index, article in enumerate(top["data"]):
        title = article.get("title", f"article {article_index}")
        for paragraph_index, paragraph in enumerate(_get(article, "paragraphs", f"article {title!r}")):
            where = f"paragraph {paragraph_index} of article {title!r}"
            context = _get(paragraph, "context", where)
            for question_index, qa in enumerate(_get(paragraph, "qas", where)):
                qid = _get(qa, "id", f"question {question_index} in {where}")
                if qid in seen:
                    raise UserError(f"{path} repeats question id {qid!r} (in {where}); ids must be unique")
                seen.add(qid)
                if "is_impossible" in qa and version == "1.1":
                    raise UserError(
                        f"{path} question {qid!r} has 'is_impossible', a SQuAD 2.0 field, but version 1.1 "
                        f"was asked for; use --version 2.0"
                    )
                impossible = bool(qa.get("is_impossible", False))
                answers = _get(qa, "answers", f"question {qid!r}")
                problems += _answer_problems(qid, context, answers, impossible)
                rows.append(
                    {
                        "id": qid,
                        "title": title,
                        "context": context,
                        "question": _get(qa, "question", f"question {qid!r}"),
                        "answers": {
                            "text": [a["text"] for a in answers],
                            "answer_start": [a["answer_start"] for a in answers],
                        },
                        "is_impossible": impossible,
                    }
                )
    return rows, problems


def load_squad_json(path: str | Path, version: str) -> tuple[datasets.Dataset, int]:
    """Flat examples from an official SQuAD file, and how many answers disagree with their context."""
    check_version(version)
    path = Path(path)
    rows, problems = _flatten(_read_json(path), path, version)
    if not rows:
        raise UserError(f"{path} holds no questions; expected articles with paragraphs and 'qas'")
    if problems:
        shown = "; ".join(problems[:3])
        warnings.warn(f"{path}: {len(problems)} answer problems, kept as is (first: {shown})", stacklevel=2)
    return datasets.Dataset.from_list(rows, features=SCHEMA), len(problems)


def load_squad_hub(version: str, split: str) -> datasets.Dataset:
    """The same flat examples from the Hugging Face Hub (needs internet); split is 'train' or 'validation'."""
    name = HUB_NAMES[check_version(version)]
    try:
        examples = datasets.load_dataset(name, split=split)
    except Exception as err:  # any network, cache or name failure has the same fix
        raise UserError(
            f"could not load {name} split {split!r} from the Hugging Face Hub ({type(err).__name__}: {err}); "
            f"download the official SQuAD JSON and pass --data-dir"
        ) from err
    impossible = [not answers["text"] for answers in examples["answers"]]
    return examples.add_column("is_impossible", impossible).cast(SCHEMA)


def split_by_article(
    examples: datasets.Dataset, dev_fraction: float = 0.2, seed: int = 0
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """Split into (train, dev) on article titles, so no article is in both; same seed, same split."""
    if not 0.0 < dev_fraction < 1.0:
        raise UserError(f"dev_fraction {dev_fraction} must be between 0 and 1 (exclusive), e.g. 0.2")
    # Sorting first makes the split depend on the set of titles and the seed, not on file order.
    titles = sorted(set(examples["title"]))
    if len(titles) < 2:
        raise UserError(f"cannot split {len(titles)} article(s) by article; give at least 2 articles")
    random.Random(seed).shuffle(titles)
    num_dev = min(max(1, round(dev_fraction * len(titles))), len(titles) - 1)
    dev_titles = set(titles[:num_dev])
    is_dev = [title in dev_titles for title in examples["title"]]
    train = examples.select([i for i, dev in enumerate(is_dev) if not dev])
    dev = examples.select([i for i, dev in enumerate(is_dev) if dev])
    return train, dev
