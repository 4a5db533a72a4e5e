"""A pre-training's plan: its settings resolved, its corpus read and its resume point found, once.

`check` needs no look at the output folder, so `harness pretrain` calls it before its output lock
creates OUT: a bad setting or corpus fails in one line with nothing written. `find_resume_point` looks
at OUT, under that lock, so no other run changes OUT after it. The loop (`train.train`) takes the plan
and checks nothing again. Under torchrun every process makes its own plan: all raise or none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from foundation.infra.errors import UserError
from pretrain import checkpoint as ckpt
from pretrain.config import PretrainConfig, check_runnable, resolve
from pretrain.corpus_source import CorpusSource, from_paths


@dataclass(frozen=True)
class Inputs:
    """What a run trains on, checked: the part of its plan that does not depend on OUT."""

    config: PretrainConfig  # resolved: every None default filled from the preset and the objective
    corpus: CorpusSource  # the text files it tokenises and what pretrain_meta.json records of them


@dataclass(frozen=True)
class Plan:
    """Everything a pre-training decides before its first step."""

    config: PretrainConfig  # resolved, as in Inputs
    corpus: CorpusSource
    resume: ckpt.ResumePoint | None  # the checkpoint the run goes on from; None: a fresh run

    @property
    def output(self) -> Path:
        return Path(self.config.output_dir)


def check(config: PretrainConfig, corpus: CorpusSource | None = None) -> Inputs:
    """The resolved config and its corpus, or a UserError for a missing corpus, output or budget or for
    an unreadable corpus. `corpus`: the files behind `config.corpus` where the caller has read them (a
    task-text spec); None reads its files and folders here."""
    try:
        check_runnable(config)
    except ValueError as error:
        raise UserError(str(error)) from error
    config = resolve(config)
    return Inputs(config, corpus or from_paths(config.corpus))


def find_resume_point(inputs: Inputs) -> Plan:
    """The plan of `inputs` in OUT as it stands, or a UserError if OUT holds other files, a run of other
    settings or one whose budgets are spent."""
    config = inputs.config
    return Plan(config, inputs.corpus, ckpt.resume_point(Path(config.output_dir), config))


def make(config: PretrainConfig, corpus: CorpusSource | None = None) -> Plan:
    """`check`, then `find_resume_point`: the plan of a process that holds no output lock."""
    return find_resume_point(check(config, corpus))
