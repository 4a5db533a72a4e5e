"""Secrets out of everything printed, logged, saved or echoed: the one redaction of URIs and command lines.

A tracking URI, an Optuna storage URL or a `--params-from STORAGE#STUDY` may carry a password: in the
user-info (`postgresql://user:PW@host/db`, `mysql://:PW@host/db`, `http://user:PW@host:5000`) or in the
query (`?password=PW`, `?token=PW`). `redact_uri` replaces each such secret by `***` wherever a URI stands
in a text (an error message, a hint, a tag); `redact_argv` does it to a command line before it is
recorded or echoed. A user without a password (`postgresql://user@host/db`) is no secret and stays.

Over-redaction is the safe side: a password may hold `/` or `@` unescaped (SQLAlchemy accepts both), so
the user-info runs from `://` to the last `@` of the URI.
"""

from __future__ import annotations

import re

MASK = "***"
# Query keys whose values are secrets: these names, alone or as a suffix (`db_password`, `access_token`)
SECRET_KEYS = ("password", "passwd", "pwd", "token", "secret", "api_key", "apikey")
# Flags whose value is a URI even where it lacks a scheme (`user:pw@host`, a DSN MySQL tools accept)
URI_FLAGS = ("--tracking-uri", "--storage", "--params-from")

# A URI: scheme://, then anything up to whitespace, a quote or a closing bracket.
_URI = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`()\[\]{}]*")
# Its user-info with a password: `user:` (user possibly empty), the password up to the last `@`.
_USERINFO = re.compile(r"^(?P<head>[^:]*://[^:/?#@]*):(?P<password>.*)@(?P<tail>[^@]*)$", re.DOTALL)
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&;](?:[\w.\-]*[_.\-])?(?:" + "|".join(SECRET_KEYS) + r")=)(?P<value>[^&;#\s]*)",
    re.IGNORECASE)
_BARE_USERINFO = re.compile(r"^(?P<user>[^:/?#@]*):(?P<password>.*)@(?P<tail>[^@]*)$", re.DOTALL)


def redact_uri(text: str) -> str:
    """`text` (one URI, or a message with URIs in it) with every URI's passwords and tokens as ***."""
    return _URI.sub(lambda match: _redact_one(match.group(0)), text)


def _redact_one(uri: str) -> str:
    found = _USERINFO.match(uri)
    if found and found["password"]:
        uri = f"{found['head']}:{MASK}@{found['tail']}"
    return _QUERY_SECRET.sub(lambda match: match["head"] + (MASK if match["value"] else ""), uri)


def echoed(argv: list[str] | tuple[str, ...]) -> str:
    """The command line as a user retypes it (shell-quoted), passwords shown as ***, saying so if any were."""
    import shlex

    shown = redact_argv(argv)
    return shlex.join(shown) + (" (put the passwords shown as *** back)" if shown != list(argv) else "")


def redact_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    """A command line fit to record or echo: every URI in it redacted, whether it is its own word, a
    flag's value (`--storage=URI`, or the word after --tracking-uri, --storage, --params-from) or a
    setting's (`key=URI`)."""
    redacted = []
    for position, word in enumerate(argv):
        word = redact_uri(word)
        flag, equals, value = word.partition("=")
        if equals and flag in URI_FLAGS:
            word = f"{flag}={_redact_bare(value)}"
        elif position and argv[position - 1] in URI_FLAGS:
            word = _redact_bare(word)
        redacted.append(word)
    return redacted


def _redact_bare(value: str) -> str:
    """A flag's value without a scheme (`user:pw@host/db`): its password masked too."""
    if "://" in value:
        return value
    found = _BARE_USERINFO.match(value)
    if found and found["password"]:
        return f"{found['user']}:{MASK}@{found['tail']}"
    return value
