"""A throwaway PostgreSQL server on loopback for tests: initdb into a temporary directory, pg_ctl start.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user (the Debian
package creates it) through runuser. `.ci/run` installs the package when it can.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port

SUPERUSER = "harness"


def find_bin_dir() -> Path | None:
    """The directory holding initdb and pg_ctl: PATH first, then Debian's /usr/lib/postgresql/*/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                      key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


def why_unavailable() -> str | None:
    """None when a server can be started here, else the reason (for pytest.skip)."""
    if find_bin_dir() is None:
        return "PostgreSQL binaries (initdb, pg_ctl) not found; install the postgresql package (.ci/run does)"
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "psycopg2 missing; pip install psycopg2-binary (the test extra has it)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the server as 'postgres'"
    return None


@contextlib.contextmanager
def server(database: str = "optuna") -> Iterator[str]:
    """Start a server with one empty database; yields its SQLAlchemy URL; stops and deletes it after."""
    bin_dir = find_bin_dir()
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        import pwd

        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", free_port()

    def run(*command: str) -> None:
        done = subprocess.run([*as_user, *command], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(command[0]).name} failed ({done.returncode}): {done.stderr.strip()}")

    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "-A", "trust", "--no-sync")
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start")
        try:
            run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", SUPERUSER, database)
            yield f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{database}"
        finally:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)
