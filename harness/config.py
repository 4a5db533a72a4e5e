"""Fill a frozen config dataclass from a TOML file plus `key=value` overrides.

Like nanoGPT's configurator, minus the globals: unknown keys are rejected and every problem is
reported at once, so a typo never silently trains with a default.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import sys
import textwrap
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from foundation.infra import settings
from foundation.infra.errors import UserError

C = TypeVar("C")
WIDTH = 100  # help text columns


def load_config(cls: type[C], config_file: str | Path | None = None, overrides: list[str] = (),
                **fixed: Any) -> C:
    """Config of type `cls`: defaults, then the TOML file, then `key=value` overrides, then `fixed`."""
    errors: list[str] = []
    values = _current(cls, read_toml(Path(config_file)), errors) if config_file is not None else {}
    given: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            errors.append(f"override {item!r} is not key=value")
            continue
        given[key.strip()] = raw.strip()
    values.update(_current(cls, given, errors))  # after the file's: key=value wins, by either name
    fields = {f.name: f for f in dataclasses.fields(cls)}
    typed: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    unknown = [key for key in values if key not in fields]
    for key, value in values.items():
        if key not in fields:  # every unknown key in one error, where the first stood
            errors += [unknown_setting(unknown, sorted(fields))] if key == unknown[0] else []
            continue
        try:
            typed[key] = _coerce(value, hints[key])
        except ValueError as error:
            errors.append(f"setting {key}={value!r}: {error}")
    errors += [f"{key}={value!r} must be a finite number" for key, value in fixed.items()
               if not _finite(value)]
    typed.update({key: value for key, value in fixed.items() if _finite(value)})
    try:  # even after type errors: the range checks of the well-typed values belong in the same report
        config = cls(**typed)
    except ValueError as error:  # __post_init__ validation
        errors.append(str(error))
    if errors:
        raise UserError("; ".join(errors))
    return config


def _current(cls: type, values: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    """`values` with each setting's former name (settings.Setting.formerly) read as its current one, with a
    warning; a former and a current name in one source are an error."""
    former = settings.former_names(cls)
    found = {}
    for key, value in values.items():
        name = former.get(key, key)
        if name != key:
            if name in values:
                errors.append(f"{key} and {name} are one setting; give only {name}")
                continue
            warn_renamed(f"setting {key}", name)
        found[name] = value
    return found


def unknown_setting(keys: str | Sequence[str], known: Sequence[str]) -> str:
    """One error naming the unknown keys, the known setting each was likely meant to be, and the known
    ones (listed once, however many keys are unknown)."""
    keys = [keys] if isinstance(keys, str) else list(dict.fromkeys(keys))
    close = {key: difflib.get_close_matches(key, known, n=1) for key in keys}
    guesses = [f"{found[0]!r}" + (f" for {key!r}" if len(keys) > 1 else "")
               for key, found in close.items() if found]
    guess = f"did you mean {', '.join(guesses)}? " if guesses else ""
    named = ", ".join(repr(key) for key in keys)
    return f"unknown setting{'s' * (len(keys) > 1)} {named} ({guess}known: {', '.join(known)})"


def warn_renamed(old: str, new: str) -> None:
    """The one line a setting or flag given by its former name prints before it is taken."""
    print(f"harness: warning: {old} is deprecated; use {new}", file=sys.stderr)


def read_toml(path: Path, what: str = "config file", flag: str = "--config") -> dict[str, Any]:
    """A TOML settings file, or a UserError naming it (`what`, given with `flag`) and what is wrong."""
    if path.is_dir():
        raise UserError(f"{what} {str(path)!r} is a directory; pass a TOML file with {flag}")
    if not path.is_file():
        raise UserError(f"{what} {str(path)!r} does not exist; pass a TOML file with {flag}")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise UserError(f"{what} {str(path)!r} is not UTF-8 text (byte {error.start}); save it as UTF-8"
                        ) from None
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{what} {str(path)!r} is not valid TOML: {error}") from error


def _coerce(value: Any, hint: Any) -> Any:
    """Convert a TOML value or command-line string to the field's declared type."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null", "")):
            return None
        return _coerce(value, options[0])
    if origin in (tuple, list):
        (item_type, *_) = typing.get_args(hint) or (str,)
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(_coerce(v.strip() if isinstance(v, str) else v, item_type) for v in items if v != "")
    if hint is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "1", "yes"):
            return True
        if str(value).lower() in ("false", "0", "no"):
            return False
        raise ValueError("expected true or false")
    if hint in (int, float):
        try:
            number = hint(value) if hint is float or not isinstance(value, str) else int(float(value))
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"expected a finite number ({hint.__name__})") from None
        if not math.isfinite(number):  # nan passes every range check, then breaks torch
            raise ValueError(f"expected a finite number ({hint.__name__}), not {number}")
        if hint is int and isinstance(value, str) and float(value) != number:
            raise ValueError("expected a whole number")
        return number
    if typing.get_origin(hint) is typing.Literal:
        if value not in typing.get_args(hint):
            raise ValueError(f"choose one of {', '.join(map(str, typing.get_args(hint)))}")
        return value
    return hint(value) if callable(hint) else value


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return all(map(_finite, value)) if isinstance(value, tuple | list) else True


def settings_help(cls: type, heading: str, skip: tuple[str, ...] = ()) -> str:
    """A help epilog listing `cls`'s settings, defaults and choices, read from the dataclass itself.

    `name=value` shows a default; a bare name defaults to None, which the config resolves (recipe,
    preset or task default); `(a|b)` lists the allowed values. Settings of several roles
    (foundation/infra/settings.py) are listed by role, each under a line saying what the role is.
    """
    hints = typing.get_type_hints(cls)
    described = {name: s for name, s in settings.settings(cls).items() if name not in skip}
    groups: dict[str, list[str]] = {}
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        default = field.default if field.default is not dataclasses.MISSING else None
        item = field.name if default is None else f"{field.name}={shown(default)}"
        choices = settings.choices(hints[field.name])
        role = described[field.name].role
        groups.setdefault(role, []).append(f"{item} ({'|'.join(map(str, choices))})" if choices else item)
    lines = []
    for role, items in groups.items():
        if len(groups) > 1:
            names = [name for name, s in described.items() if s.role == role]
            resumable = [name for name in names if described[name].resumable]
            free = "any" if resumable == names else ", ".join(resumable)
            resume = f"; a resume may change {free}" if free else ""
            lines.append(f"[{role}: {settings.ROLE_HELP[role]}{resume}]")
        lines += _packed(items)
    return textwrap.fill(heading, width=WIDTH) + "\n" + "\n".join("  " + line for line in lines)


def add_flags(parser: argparse.ArgumentParser, cls: type, prefix: str = "",
              changes: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """A flag for each of cls's settings declared with one (`setting(flag=Flag(...))`), its type, choices
    and help read from the field, as transformers' HfArgumentParser reads TrainingArguments. The flag's
    own default is None: the config's default (named in the help) stands unless the flag is given.
    `prefix` goes before each dest; `changes`: per setting, argparse options replacing these (flag:
    another name; required; help; metavar). A flag's former names (Flag.deprecated) still set it, with a
    warning."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        flag = settings.described(field).flag
        if flag is None:
            continue
        hint = _plain(hints[field.name])
        choices = flag.choices if flag.choices is not None else settings.choices(hint)
        options: dict[str, Any] = {"dest": prefix + field.name,
                                   "metavar": flag.metavar or (None if choices else field.name.upper()),
                                   "help": flag_help(cls, field.name).replace("%", "%%")}
        if choices:
            options["choices"] = list(choices)
        if typing.get_origin(hint) is tuple:
            if flag.repeat:  # else one comma list, as key=value takes it
                options["action"] = "append"
        elif hint in (int, float):
            options["type"] = hint
        elif hint is bool:  # a switch: given, the setting is true (key=value says false too)
            options.pop("metavar")
            options |= {"action": "store_const", "const": True}
        elif hint is not str and not choices:
            raise TypeError(f"{cls.__name__}.{field.name}: add_flags makes flags of str, int, float, bool, "
                            f"Literal and tuple settings, not {hint}")
        change = dict((changes or {}).get(field.name, {}))
        name = change.pop("flag", flag.name)
        options |= change
        parser.add_argument(name, **options)
        former = options | {"help": argparse.SUPPRESS, "required": False}
        appends = former.pop("action", None) == "append"
        for old in flag.deprecated:
            parser.add_argument(old, action=FormerFlag, current=name, appends=appends, **former)


class FormerFlag(argparse.Action):
    """A flag's former name: the one-line warning, then what the flag does."""

    def __init__(self, option_strings: list[str], dest: str, current: str, appends: bool = False,
                 **options: Any):
        super().__init__(option_strings, dest, **options)
        self.current, self.appends = current, appends

    def __call__(self, parser, namespace, values, option_string=None):
        warn_renamed(option_string, self.current)
        if self.appends:
            values = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, values)


def flag_help(cls: type, name: str) -> str:
    """The help of the flag of cls's setting `name`: the setting's help and default."""
    field = cls.__dataclass_fields__[name]
    meaning = settings.described(field)
    hint = _plain(typing.get_type_hints(cls)[name])
    comma_list = typing.get_origin(hint) is tuple and not meaning.flag.repeat
    text = f"comma list: {meaning.help}" if comma_list else meaning.help
    return text if field.default in (None, "", ()) else f"{text} (default: {shown(field.default)})"


def flag_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """{setting: value} of the flags add_flags made for cls that were given (a repeated flag's as a tuple)."""
    given = {field.name: getattr(args, field.name) for field in dataclasses.fields(cls)
             if settings.described(field).flag is not None and getattr(args, field.name, None) is not None}
    return {name: tuple(value) if isinstance(value, list) else value for name, value in given.items()}


def _plain(hint: Any) -> Any:
    """The type an optional hint (`float | None`) allows besides None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint


def _packed(items: list[str]) -> list[str]:
    """Comma-separated lines of whole items: a setting and its choices never break across lines."""
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + len(item) + 2 > WIDTH - 2:
            lines.append("")
        lines[-1] += f"{item}, "
    return [line.rstrip(" ") for line in lines[:-1]] + [lines[-1].rstrip(", ")]


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()  # as TOML and key=value spell it
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or '""'
    return str(value) if value != "" else '""'


def as_dict(config: Any) -> dict[str, Any]:
    """JSON-ready dict of a config dataclass."""
    return dataclasses.asdict(config)


def from_dict(cls: type[C], values: Mapping[str, Any]) -> C:
    """The config as_dict() gave `values` (read back from JSON: lists become tuples again)."""
    hints = typing.get_type_hints(cls)
    return cls(**{key: _coerce(value, hints[key]) for key, value in values.items()})


def load_settings(classes: Sequence[type], config_file: str | None, overrides: Sequence[str]) -> tuple:
    """One config of each class from one flat TOML file and key=value list; each key goes to the config that
    has it (items without `=` to the first, whose check reports them). Torch-free, so a command checks its
    settings before loading torch."""
    if len(classes) == 1:
        return (load_config(classes[0], config_file, list(overrides)),)
    items = [f"{key}={str(value).lower() if isinstance(value, bool) else value}"
             for key, value in (read_toml(Path(config_file)) if config_file else {}).items()]
    items += list(overrides)
    owners = {field.name: cls for cls in classes for field in dataclasses.fields(cls)}
    known = sorted(owners)
    owners |= {old: cls for cls in classes for old in settings.former_names(cls)}
    keys = [item.partition("=")[0].strip() for item in items]
    # Unknown keys are reported here, against every config; malformed items are load_config's to report.
    unknown = [key for key, item in zip(keys, items, strict=True) if "=" in item and key not in owners]
    errors = [unknown_setting(unknown, known)] if unknown else []
    configs = []
    for cls in classes:
        mine = [item for key, item in zip(keys, items, strict=True)
                if owners.get(key) is cls or (cls is classes[0] and "=" not in item)]
        try:
            configs.append(load_config(cls, None, mine))
        except UserError as error:
            errors.append(str(error))
    if errors:
        raise UserError("; ".join(errors))
    return tuple(configs)
