"""The fine-tuning settings: ELECTRA's recipe as defaults, validated on construction.

Torch-free, so the CLI can build its help and check settings without loading torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from foundation.infra.errors import UserError
from foundation.infra.settings import setting
from foundation.training.optimizer_settings import Optimizer, optimizer_errors, optimizer_setting
from tasks.class_weights import parse_errors as class_weight_errors
from tasks.registry import SquadTask

DOC_STRIDE = 128  # SQuAD: tokens between the starts of consecutive windows of a long context (ELECTRA's)
MAX_QUERY_LENGTH = 64  # SQuAD: question tokens kept

# ELECTRA's SQuAD 2.0 null threshold (configure_finetuning.py, qa_na_threshold) on its answerability
# classifier's null odds; without the classifier the null odds are [CLS]-score minus best-span score,
# for which 0.0 is the usual threshold (BERT, transformers' utils_qa.py).
ANSWERABLE_NULL_THRESHOLD = -2.75
SPAN_NULL_THRESHOLD = 0.0


def default_null_threshold(answerability_head: bool) -> float:
    """The null-odds threshold for SQuAD 2.0 answers: ELECTRA's with its classifier, else 0."""
    return ANSWERABLE_NULL_THRESHOLD if answerability_head else SPAN_NULL_THRESHOLD


# The GLUE head a family gets under head=auto (reports/FIDELITY.md, row "GLUE head by family"): ELECTRA's own
# single dense layer for its discriminators, where it is written back into transformers' head exactly;
# every other family keeps the classification head its authors fine-tune with.
ELECTRA_HEAD_FAMILIES = ("electra",)


def fit_max_length(chosen: int | None, task_length: int, positions: int | None,
                   longer: Literal["cut", "refuse"] = "cut") -> int:
    """The max_length a task runs with on a model of `positions` positions (None: not known): the one set,
    refused beyond them; else the task's own, which where it is longer the task's `longer` cuts to them (GLUE,
    text, tagging: as run_glue.py cuts to the tokenizer's limit) or refuses (SQuAD: its windows are laid
    out for that length)."""
    length = chosen or task_length
    if positions and length > positions and (chosen or longer == "refuse"):
        raise UserError(f"max_length {length} exceeds the model's {positions} positions; pass "
                        f"max_length={positions} or less")
    return min(length, positions) if positions else length


def head_for(head: str, family: str | None) -> str:
    """The GLUE head a `head` setting means on a model of this family: auto is ELECTRA's head on an ELECTRA
    discriminator, the family's own (hf) on any other; no family (recorded before families were): ELECTRA."""
    if head != "auto":
        return head
    return "electra" if (family or "electra") in ELECTRA_HEAD_FAMILIES else "hf"


# ELECTRA's fine-tuning learning rates and layer-wise decay by model size (paper, Appendix).
RECIPE = {"small": (3e-4, 0.8), "base": (1e-4, 0.8), "large": (5e-5, 0.9)}


@dataclass(frozen=True)
class FinetuneConfig:
    """Fine-tuning hyperparameters; None means "ELECTRA's default for this model size or task"."""

    learning_rate: float | None = setting(None, role="recipe", help=(
        "peak rate; None: ELECTRA's for the model size (3e-4 small, 1e-4 base, 5e-5 large)"))
    layerwise_lr_decay: float | None = setting(None, role="recipe", help=(
        'each layer down trains at this times the rate of the one above; None: 0.8 (0.9 large)'))
    lr_decay_depth: Literal["electra", "corrected"] = setting("electra", role="recipe", help=(
        "electra: the head two levels above the top layer, as ELECTRA's code has it; corrected: one level"))
    num_epochs: float | None = setting(None, role="recipe", help=(
        "None: the task's (ELECTRA's: 3; 10 for RTE and STS-B; 2 for SQuAD)"))
    warmup_fraction: float = setting(0.1, role="recipe", help=(
        "of the training steps, linear warmup before the linear decay"))
    optimizer: Optimizer = optimizer_setting("optimizer")
    weight_decay: float = optimizer_setting("weight_decay")
    adam_epsilon: float = optimizer_setting("adam_epsilon")
    max_grad_norm: float = optimizer_setting("max_grad_norm")
    loss_reduction: Literal["sum", "mean"] = setting("sum", role="recipe", before="mean", help=(
        "sum: as the official run_finetuning.py, which trains on the batch-summed loss, so its clip at "
        "max_grad_norm acts on batch_size times the mean's gradient (with 32 examples it clips nearly "
        "always); Adam's steps do not change with the loss's scale, except through eps and that clip. "
        "mean: clip the batch mean's gradient (what runs before this setting did)"))
    reinit_layers: int = setting(0, role="recipe", help=(
        "re-initialise the top N encoder layers before fine-tuning (Zhang et al. 2021, \"Revisiting "
        "Few-sample BERT Fine-tuning\"): a remedy for a pre-trained encoder whose top layers collapsed; "
        "not ELECTRA's recipe, so off"))
    class_weights: str = setting("none", role="recipe", before="none", help=(
        "your own text, classification and multi-label: none (ELECTRA's unweighted loss); balanced (each "
        "class weighs rows / (classes * its rows), scikit-learn's compute_class_weight; multi-label: each "
        "label's BCE pos_weight = its negatives / positives); or LABEL=WEIGHT,... by label name, e.g. "
        "neg=1,pos=19 (an unlisted label weighs 1). results.json records the weights used"))
    long_text: Literal["truncate", "windows"] = setting("truncate", role="recipe", before="truncate", help=(
        "your own text, one text column: truncate (ELECTRA's recipe: a text is cut at max_length); windows "
        "(a departure from it): a long text is read as windows of max_length tokens, window_overlap "
        "tokens shared by neighbours (transformers' return_overflowing_tokens); each window trains on its "
        "text's label, and a text's answer at evaluation, predict and serve is the mean of its windows' "
        "logits, so dev metrics count texts, not windows"))
    window_overlap: int | None = setting(None, role="recipe", help=(
        "long_text=windows: tokens of a text that consecutive windows share (the tokenizer's stride); "
        "None: max_length // 2"))
    select_epoch: Literal["last", "best"] = setting("last", role="recipe", before="last", help=(
        "last: the last epoch's model and scores (ELECTRA's recipe); best (a departure from it): the epoch "
        "with the highest dev score (each seed's own; a tie keeps the earlier), whose model is restored at "
        "the end, so predictions, --test predictions and the saved model are that epoch's. Choosing on dev "
        "inflates dev scores: tables, cards and the leaderboard say \"best epoch on dev\"; results.json "
        "records each seed's chosen_epoch"))
    batch_size: int = setting(32, role="recipe", help='examples an optimiser step')
    gradient_accumulation_steps: int = setting(1, role="runtime", help=(
        "split each batch into this many slices, forward and backward one at a time, then step: the "
        "recipe's batch_size in less memory (scores move by summation order and dropout draws only)"))
    eval_batch_size: int = setting(128, role="runtime", help='examples a forward pass in evaluation')
    max_length: int | None = setting(None, role="recipe", help=(
        "None: the task's default (128 for GLUE, 512 for SQuAD)"))
    seed: int = setting(0, role="runtime", resumable=True, help=(
        "the first seed; seeds are the noise the median is taken over, so another invocation with another "
        "seed adds seeds to the same results"))
    precision: Literal["auto", "fp32", "bf16", "fp16"] = setting("auto", role="runtime", help=(
        "auto: bf16 where the hardware has it; fp16 (with a gradient scaler) on a GPU without (V100, T4)"))
    compile: Literal["auto", "on", "off"] = setting("auto", role="runtime", resumable=True, help=(
        "torch.compile the model; auto: on for CUDA only"))
    group_by_length: bool = setting(True, role="recipe", help=(
        "batches of similar lengths, padded to their longest (transformers' LengthGroupedSampler); "
        "false: a uniform shuffle"))
    max_train_examples: int | None = setting(None, role="recipe", help=(
        "subsample the training set, for quick looks"))
    head: Literal["auto", "electra", "hf"] = setting("auto", role="recipe", before="hf", help=(
        "GLUE head: electra = [CLS] -> dropout -> dense, STS-B targets / 5 (saved as transformers' head, "
        "exactly: tasks/glue_head.py; ELECTRA discriminators only); hf = the family's own transformers "
        "head (ELECTRA's: dense, GELU, dense); auto = electra for ELECTRA discriminators, hf for others"))
    trust_remote_code: bool = setting(False, role="runtime", help=(
        "let a Hub checkpoint whose family transformers lacks run its repository's own code, pinned as "
        "--model org/name@<commit>; off: refused"))
    double_unordered: bool = setting(True, role="recipe", before=False, help=(
        "GLUE tasks whose registry row says double_unordered (mrpc, stsb) train on both sentence orders"))
    save_models: bool = setting(True, role="output", help=(
        "keep each seed's fine-tuned model in the output folder"))
    predict_test: bool = setting(True, role="output", help=(
        "GLUE: predict the test sets (for the server's zip) after training, most of a short run's fixed "
        "cost; no dev score uses it"))

    def __post_init__(self):
        problems = [f"{name} must be positive (got {getattr(self, name)})" for name in (
            "learning_rate", "num_epochs", "batch_size", "eval_batch_size", "max_length",
            "max_train_examples", "gradient_accumulation_steps", "window_overlap")
            if getattr(self, name) is not None and getattr(self, name) <= 0]
        if 0 < self.batch_size < self.gradient_accumulation_steps:  # a batch of 0 is refused above already
            problems.append(f"gradient_accumulation_steps={self.gradient_accumulation_steps} would slice a "
                            f"batch of {self.batch_size} into empty slices; choose at most batch_size")
        if self.reinit_layers < 0:
            problems.append(f"reinit_layers must be 0 or more (got {self.reinit_layers})")
        for name in ("layerwise_lr_decay", "warmup_fraction"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                problems.append(f"{name} must be between 0 and 1 (got {value})")
        if self.window_overlap is not None and self.long_text != "windows":
            problems.append(f"window_overlap={self.window_overlap} applies to long_text=windows only; pass "
                            "long_text=windows or leave window_overlap out")
        problems += optimizer_errors(self) + class_weight_errors(self.class_weights)
        if problems:
            raise ValueError("; ".join(problems))

    def resolved(self, size: str, task_epochs: float, task_max_length: int | None = None,
                 family_head: str | None = None) -> FinetuneConfig:
        """This config with the size-, family- and task-dependent defaults filled in (family_head: what
        head=auto stands for with this model; None leaves it auto)."""
        learning_rate, decay = RECIPE[size]
        return dataclasses.replace(
            self, head=family_head if self.head == "auto" and family_head else self.head,
            learning_rate=self.learning_rate or learning_rate,
            layerwise_lr_decay=self.layerwise_lr_decay if self.layerwise_lr_decay is not None else decay,
            num_epochs=self.num_epochs or task_epochs, max_length=self.max_length or task_max_length)


@dataclass(frozen=True)
class SquadConfig:
    """SQuAD-only settings (the loop's own, max_length included, are in FinetuneConfig)."""

    doc_stride: int = setting(DOC_STRIDE, role="recipe", help=(
        "tokens from one window's start to the next's (ELECTRA's meaning)"))
    max_query_length: int = setting(MAX_QUERY_LENGTH, role="recipe", help='SQuAD: question tokens kept')
    n_best: int = setting(20, role="recipe", help="start and end candidates per window")
    max_answer_length: int = setting(30, role="recipe", help="tokens")
    null_threshold: float | None = setting(None, role="recipe", help=(
        'v2.0: "" above these null odds; None: -2.75 with the head, else 0'))
    answerability_head: bool | None = setting(None, role="recipe", help=(
        "ELECTRA's answerable classifier (configure_finetuning.py: on, for v1.1 too, where it is trained "
        "to say \"answerable\" and its logit is not used); None: on"))
    joint_prediction: bool = setting(True, role="recipe", before=False, help=(
        "ELECTRA's joint start/end prediction (configure_finetuning.py: on); false: independent start and "
        "end heads (transformers' ElectraForQuestionAnswering, what runs before this setting used)"))
    holdout_fraction: float = setting(0.2, role="recipe", help=(
        "without a train file: this share of the dev articles is evaluated on"))
    holdout_seed: int = setting(0, role="recipe", help=(
        'without a train file: which dev articles are held out'))
    max_eval_examples: int | None = setting(None, role="recipe", help=(
        "evaluate on a seeded sample of the dev questions, for quick looks"))

    def __post_init__(self):
        problems = [f"{name} must be positive (got {getattr(self, name)})" for name in (
            "doc_stride", "max_query_length", "n_best", "max_answer_length", "max_eval_examples")
            if getattr(self, name) is not None and getattr(self, name) <= 0]
        fraction = self.holdout_fraction
        if not 0 < fraction < 1:
            problems.append(f"holdout_fraction must be between 0 and 1, e.g. 0.2 (got {fraction})")
        if problems:
            raise ValueError("; ".join(problems))

    def resolved(self, task: SquadTask) -> SquadConfig:
        """This config with the head and the null threshold decided for the task."""
        head = self.uses_head(task)
        threshold = default_null_threshold(head) if self.null_threshold is None else self.null_threshold
        return dataclasses.replace(self, answerability_head=head, null_threshold=threshold)

    def uses_head(self, task: SquadTask) -> bool:
        """Whether the answerability classifier is on (ELECTRA's default: yes, for both versions)."""
        return True if self.answerability_head is None else self.answerability_head
