"""A model card's "How to use" section: transformers' pipeline with the model's Hub task, and the ONNX bundle
(`harness export onnx`, then `harness predict`), each with an input of the task's form."""

from __future__ import annotations

from harness.publish.card_task import CardTask
from harness.publish.saved import SavedModel

PLACEHOLDER = "ORG/NAME"  # before `harness push --repo ORG/NAME` names the repository


def usage(task: CardTask, saved: SavedModel, repo: str | None = None) -> list[str]:
    """The section's lines: a Python snippet and the bundle's two commands."""
    where = repo or PLACEHOLDER
    said = (f"from the Hub repository `{repo}`" if repo else
            f"from the Hub repository `harness push --repo {PLACEHOLDER}` uploads it to, or from this folder")
    lines = ["## How to use", "", f"With transformers (`pipeline(\"{task.pipeline_tag}\")`), {said}:", "",
             "```python", "from transformers import pipeline", "",
             *_python(task, where), "```", ""]
    bundle = f"RUN/onnx/{saved.task}-seed{saved.seed}"
    run = saved.folder.parent.parent.name
    lines += [f"As an ONNX bundle (onnxruntime only, no torch), from the run that saved this model (RUN, "
              f"here `{run}`):", "", "```bash",
              f"harness export onnx --run RUN --task {saved.task} --seed {saved.seed}   # writes {bundle}",
              f"harness predict --bundle {bundle} {_predict_input(task)}", "```", ""]
    return lines


def _python(task: CardTask, where: str) -> list[str]:
    if task.problem == "question_answering":
        return [f'answer = pipeline("question-answering", model="{where}")',
                'answer(question="Who wrote it?", context="It was written by Ada.")  # {"answer": ...}']
    if task.problem == "tagging":
        return [f'tagger = pipeline("token-classification", model="{where}")',
                'tagger("the cat sat on the mat")  # a tag per sub-token: the tags above']
    options = {"regression": ', function_to_apply="none"',  # the raw score, on the label's scale
               "multilabel": ", top_k=None"}.get(task.problem, "")  # every label's sigmoid score
    text = '{"text": "a fine film", "text_pair": "it is good"}' if task.pair else '"a fine film"'
    answer = {"regression": "  # [{'label': 'LABEL_0', 'score': the predicted value}]",
              "multilabel": "  # every label with its score; keep those over a threshold, e.g. 0.5"}
    return [f'classify = pipeline("text-classification", model="{where}"{options})',
            f"classify({text}){answer.get(task.problem, '')}"]


def _predict_input(task: CardTask) -> str:
    if task.problem == "question_answering":
        return '"Who wrote it?" "It was written by Ada."'
    if task.problem == "tagging":
        return '"the cat sat on the mat"'
    return '"a fine film" "it is good"' if task.pair else '"a fine film"'
