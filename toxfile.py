"""tox's in-tree plugin: uv (tox-uv) told what pip is told.

tox-uv installs the environments with uv, which reads no pip.conf. Where pip is configured with local
wheels or extra indexes (this project's CPU machines keep the CPU torch in a find-links folder), uv is
given the same, and picks as pip does: the best version across all indexes (uv's own default takes an
extra index's versions first, older ones). Variables already set win. Loaded by tox on start.
"""

from __future__ import annotations

import os
import subprocess
import sys

PIP_TO_UV = {"global.find-links": "UV_FIND_LINKS", "global.extra-index-url": "UV_EXTRA_INDEX_URL"}


def _pip_config(key: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pip", "config", "get", key], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


for pip_key, uv_name in PIP_TO_UV.items():
    if uv_name not in os.environ and (value := _pip_config(pip_key)):
        os.environ[uv_name] = value
if "UV_EXTRA_INDEX_URL" in os.environ:
    os.environ.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")
