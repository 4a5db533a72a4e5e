"""What each setting of a config dataclass is, said once, on its field.

A config declares every field with `setting()`: its role, whether a resumed run may change it, its value
for results written before it existed, and a line of help. The resume rules of both loops, the legacy
defaults, the recipe departures, `--help` and the command-line flags some settings also have (`flag=`,
built by harness/config.py's add_flags, as transformers' HfArgumentParser builds its CLI from
TrainingArguments) are read from here, so adding a setting is one line. A setting two configs share is
declared once and placed in each with `declared()` (foundation/training/optimizer_settings.py). A renamed
setting keeps its former names (`formerly=`, `Flag(deprecated=)`): still read, with a one-line warning.

Roles:
  recipe   what a run trains and measures; changing it makes another experiment (and, in fine-tuning,
           departs from ELECTRA's recipe)
  runtime  how this machine computes it: moves results by numerical noise or a different random draw
           at most (precision, torch.compile, batch slicing, the seed)
  output   what is written, where and how often; never the numbers
  budget   when a run stops (pre-training: the first one reached)
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

Role = Literal["recipe", "runtime", "output", "budget"]
ROLES: tuple[str, ...] = Role.__args__
ROLE_HELP = {"recipe": "what a run trains and measures", "runtime": "how this machine computes it",
             "output": "what is written, where and how often", "budget": "when a run stops"}
_KEY = "setting"
_SAME = object()  # `before` not given: results written before the setting behaved as its default


@dataclasses.dataclass(frozen=True)
class Flag:
    """The command-line flag a setting also has; its type, a Literal's choices and its help come from the
    field (harness/config.py, add_flags)."""

    name: str  # --max-flops
    metavar: str | None = None
    repeat: bool = False  # a tuple setting takes one item a flag (--corpus a --corpus b), not a comma list
    choices: Collection | None = None  # allowed values the type cannot say (a registry), read when parsing
    deprecated: tuple[str, ...] = ()  # former names of the flag, still taken with a one-line warning


@dataclasses.dataclass(frozen=True)
class Setting:
    """A field's description (see the module's docstring for the roles)."""

    role: Role
    resumable: bool  # a resumed run (or another invocation into the same output) may change it
    before: Any  # its value in results and configs written before it existed (the key absent)
    help: str
    flag: Flag | None = None  # the command-line flag that sets it, besides key=value
    formerly: tuple[str, ...] = ()  # former names of the key, still read (TOML, key=value) with a warning


RECIPE_SETTING = Setting("recipe", False, None, "")  # a field declared without setting(): the strictest


def setting(default: Any, *, role: Role, resumable: bool = False, before: Any = _SAME, help: str = "",
            flag: Flag | None = None, formerly: tuple[str, ...] = ()) -> Any:
    """A dataclass field with its default and what it is; `before` defaults to `default`."""
    if role not in ROLES:
        raise ValueError(f"unknown setting role {role!r}; choose one of {', '.join(ROLES)}")
    return declared(default, Setting(role, resumable, default if before is _SAME else before, help, flag,
                                     formerly))


def declared(default: Any, meaning: Setting) -> Any:
    """A fresh dataclass field for a Setting declared once and used by several configs."""
    return dataclasses.field(default=default, metadata={_KEY: meaning})


def described(field: dataclasses.Field) -> Setting:
    """The field's Setting; one declared without setting() counts as recipe, not resumable."""
    found = field.metadata.get(_KEY)
    return found if found is not None else dataclasses.replace(RECIPE_SETTING, before=field.default)


def settings(cls: type) -> dict[str, Setting]:
    """{name: Setting} of a config dataclass, in field order."""
    return {field.name: described(field) for field in dataclasses.fields(cls)}


def former_names(cls: type) -> dict[str, str]:
    """{former name: current name} of cls's renamed settings."""
    return {old: name for name, s in settings(cls).items() for old in s.formerly}


def of_role(cls: type, *roles: Role) -> tuple[str, ...]:
    """The names of cls's settings in these roles, in field order."""
    return tuple(name for name, s in settings(cls).items() if s.role in roles)


def resumable(cls: type) -> tuple[str, ...]:
    """The names of the settings a resume may change."""
    return tuple(name for name, s in settings(cls).items() if s.resumable)


def befores(cls: type) -> dict[str, Any]:
    """{name: value for results written before it existed} of every setting."""
    return {name: s.before for name, s in settings(cls).items()}


def choices(hint: Any) -> tuple:
    """The values a type allows when it is a Literal (or an optional one), else ()."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next((found for arg in typing.get_args(hint) if (found := choices(arg))), ())
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else ()


def choice_errors(config: Any) -> list[str]:
    """'unknown NAME VALUE; choose one of ...' for each Literal-typed setting of `config` outside its type."""
    hints = typing.get_type_hints(type(config))
    errors = []
    for field in dataclasses.fields(config):
        allowed, value = choices(hints[field.name]), getattr(config, field.name)
        if allowed and value is not None and value not in allowed:
            errors.append(f"unknown {field.name} {value!r}; choose one of {', '.join(map(str, allowed))}")
    return errors


def differences(cls: type, saved: Mapping, current: Mapping, *, may_change: tuple[str, ...] = (),
                normal: Callable[[str, Any], Any] = lambda key, value: value) -> list[tuple[str, Any, Any]]:
    """The one resume rule: (name, saved, current) for each setting of cls that a resume may not change
    (not resumable, not in `may_change`) and that differs; a key `saved` lacks (written before the
    setting existed) stands for that setting's `before`. `normal` maps a value to its comparable form."""
    found = []
    for name, s in settings(cls).items():
        if s.resumable or name in may_change or name not in current:
            continue
        old, new = saved.get(name, s.before), current[name]
        if normal(name, old) != normal(name, new):
            found.append((name, old, new))
    return found
