"""`harness serve` in a child process and `harness predict` in this one, for the tests of any pipeline."""

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from harness.cli import main
from tests.conftest import REPO


class Server:
    """`harness serve` in its own process on port 0; the port is read from its first line."""

    def __init__(self, bundle, log_path, *settings):
        self.log_path = log_path
        self.log = log_path.open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--bundle", str(bundle),
                                         "--port", "0", *settings], cwd=REPO, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not (found := re.search(r"on http://127\.0\.0\.1:(\d+)", log_path.read_text())):
            assert self.process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "server did not start in 60 s"
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{found[1]}"
        self.address = ("127.0.0.1", int(found[1]))

    def stop(self) -> None:
        """SIGTERM: uvicorn shuts down cleanly, then dies of the signal it caught (its convention)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.log.close()
        log = self.log_path.read_text()
        assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in log, log
        assert "Traceback" not in log, log


def call(url: str, body: bytes | None = None, path: str = "/predict") -> tuple[int, object]:
    """(status, decoded JSON answer) of a POST of `body` (GET without one)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, data=body), timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def harness_predict(bundle, records, tmp_path, capsys, *flags) -> list[dict]:
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["predict", "--bundle", str(bundle), "--input", str(path), *flags]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]
