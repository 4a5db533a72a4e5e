"""`harness serve`: a real server process on a free loopback port, serving a tiny exported bundle."""

import asyncio
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.cli import main
from harness.deploy.batcher import Busy, MicroBatcher
from tests.conftest import REPO, write_glue_dir, write_tiny_model

PAIRS = [("the cat was very happy .", "the cat is happy ."), ("a dog was sad .", "he is bad ."),
         ("she was good .", "the film is big and red ."), ("it ran on the mat .", "they sat on a rug ."),
         ("the movie was quite bad , but not sad .", "he is happy ?"), ("red", "blue")]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """An RTE bundle (fp32 and int8) of a tiny random ELECTRA with a classification head."""
    import transformers

    root = tmp_path_factory.mktemp("serve")
    tiny = write_tiny_model(root / "tiny")
    transformers.set_seed(0)
    transformers.ElectraForSequenceClassification.from_pretrained(tiny, num_labels=2).save_pretrained(root / "clf")
    transformers.AutoTokenizer.from_pretrained(tiny).save_pretrained(root / "clf")
    code = main(["export", "onnx", "--model", str(root / "clf"), "--task", "rte", "--quantize", "int8",
                 "--data-dir", str(write_glue_dir(root / "glue")), "--output", str(root / "bundle"),
                 "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}"])
    assert code == 0
    return root / "bundle"


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


@pytest.fixture(scope="module")
def server(bundle, tmp_path_factory):
    # Small limits, so that the oversized cases stay small.
    running = Server(bundle, tmp_path_factory.mktemp("log") / "serve.log", "max_body_bytes=65536",
                     "max_text_chars=1000")
    yield running
    running.stop()


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


@pytest.mark.slow
def test_predictions_equal_harness_predict(server, bundle, tmp_path, capsys):
    records = [{"text": a, "text_pair": b} | ({"id": i} if i % 2 else {}) for i, (a, b) in enumerate(PAIRS)]
    expected = harness_predict(bundle, records, tmp_path, capsys)
    assert len({r["probability"] for r in expected}) == len(PAIRS)  # distinct answers: a real comparison
    assert call(server.url, json.dumps(records).encode()) == (200, expected)
    # One object, one answer. int8 quantises activations per batch, so an answer depends on its batch
    # in the 4th decimal: the same request alone is `harness predict` of it alone.
    (alone,) = harness_predict(bundle, records[1:2], tmp_path, capsys)
    assert alone != expected[1]
    assert call(server.url, json.dumps(records[1]).encode()) == (200, alone)
    status, health = call(server.url, path="/health")
    assert status == 200 and (health["task"], health["precision"], health["labels"]) == (
        "rte", "int8", ["entailment", "not_entailment"])


LONG = "the cat " * 600  # 4,800 characters, over max_text_chars=1000
BAD_REQUESTS = [  # body, status, what the one line must name
    (b'{"text": "a", "txt": "b"}', 400, "unknown key(s) 'txt'"),
    (b'{"text": 3, "text_pair": "a"}', 400, "'text' must be a string"),
    (b'[{"text": "a", "text_pair": "b"}, 7]', 400, "item 1: expected a JSON object"),
    (b'"the cat"', 400, "got str"),
    (b'{"text": "caf\xe9", "text_pair": "b"}', 400, "not UTF-8 (byte 0xe9 at offset 13)"),
    (b'{"text": "a", ', 400, "not valid JSON"),
    (b"", 400, "not valid JSON"),
    (b"[" * 50_000, 400, "nests JSON too deeply"),
    (b"[]", 400, "empty list"),
    (json.dumps([{"text": "a", "text_pair": "b"}] * 65).encode(), 413, "65 objects in one request"),
    (json.dumps({"text": "a", "text_pair": "b" * 70_000}).encode(), 413, "over the server's limit of 65536"),
    (json.dumps({"text": LONG, "text_pair": "b"}).encode(), 413, "'text' has 4800 characters"),
    (b'{"text": "the cat"}', 422, "rte classifies a pair of sentences"),
    (b'{"text": "a", "text_pair": "\\ud800"}', 422, "U+D800"),
    (b'{"text": " ", "text_pair": "b"}', 422, "empty text"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("body", "status", "named"), BAD_REQUESTS, ids=[c[2] for c in BAD_REQUESTS])
def test_a_bad_request_gets_a_4xx_with_one_line(body, status, named, server):
    got, answer = call(server.url, body)
    assert got == status and set(answer) == {"error"}
    assert named in answer["error"] and "\n" not in answer["error"]
    assert call(server.url, json.dumps({"text": "a", "text_pair": "b"}).encode())[0] == 200  # still serving


@pytest.mark.slow
def test_unknown_paths_and_methods_get_one_line(server):
    assert call(server.url, path="/nope") == (404, {"error": "Not Found: GET /nope; the service has GET /health "
                                                             "and POST /predict"})
    status, answer = call(server.url, path="/predict")  # GET
    assert status == 405 and "POST /predict" in answer["error"]


@pytest.mark.slow
def test_concurrent_requests_share_batches_and_get_their_own_answers(bundle, tmp_path, capsys):
    records = [{"text": a, "text_pair": b, "id": i} for i, (a, b) in enumerate(PAIRS * 4)]  # 24 requests
    # fp32: an answer does not depend on its batch beyond rounding (int8's does, see above).
    expected = harness_predict(bundle, records, tmp_path, capsys, "--precision", "fp32")
    # A batch's first request waits up to 200 ms for others: the 24 clients, released together, meet.
    server = Server(bundle, tmp_path / "serve.log", "--precision", "fp32", "batch_wait_ms=200", "max_batch=8")
    try:
        barrier = threading.Barrier(len(records))

        def one(record):
            barrier.wait()
            return call(server.url, json.dumps(record).encode())

        with ThreadPoolExecutor(len(records)) as pool:
            answers = list(pool.map(one, records))
        assert [status for status, _ in answers] == [200] * len(records)
        assert [(a["id"], a["label"]) for _, a in answers] == [(e["id"], e["label"]) for e in expected]
        assert [a["probabilities"] for _, a in answers] == [pytest.approx(e["probabilities"], abs=1e-6)
                                                            for e in expected]
        stats = call(server.url, path="/health")[1]["batches"]
    finally:
        server.stop()
    assert stats["requests"] == 24 and stats["largest_batch"] == 8 and stats["batches"] < 24


@pytest.mark.slow
def test_a_damaged_bundle_is_refused_before_listening(bundle, tmp_path, capsys):
    copy = shutil.copytree(bundle, tmp_path / "bundle")
    model = copy / "model.int8.onnx"
    model.write_bytes(model.read_bytes()[:-1] + b"\x00")
    assert main(["serve", "--bundle", str(copy), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: checksum mismatch") and "model.int8.onnx" in err
    assert err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "named"), [
    (["max_batch=0", "batch_wait_ms=-1"], "max_batch=0, batch_wait_ms=-1.0"),
    (["max_bach=8"], "unknown setting 'max_bach'"),
    (["--port", "70000"], "--port 70000 is not a port"),
    (["--host", "203.0.113.7"], "cannot listen on 203.0.113.7:8000 (Cannot assign requested address)"),  # TEST-NET-3: not this machine's
])
def test_bad_server_arguments_are_one_line(argv, named, bundle, capsys):
    assert main(["serve", "--bundle", str(bundle), *argv]) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1


@pytest.mark.slow
def test_a_port_in_use_is_one_line(bundle, capsys):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--bundle", str(bundle), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and err.count("\n") == 1


def test_the_listening_socket_gives_connections_tcp_nodelay():
    """asyncio sets TCP_NODELAY only on sockets that say IPPROTO_TCP; without it each keep-alive answer
    (headers and body written apart) waited ~40 ms for the client's delayed ACK (found by serve_load.py)."""
    import socket

    from harness.commands.serve import listen

    async def accepted_nodelay():
        found = asyncio.get_running_loop().create_future()

        def on_connect(reader, writer):
            found.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=listen("127.0.0.1", 0))
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(found, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accepted_nodelay()) != 0


def test_the_batcher_takes_what_queued_during_a_batch_up_to_max_batch():
    """The policy in harness/deploy/batcher.py, with a predict function the test holds until released."""
    calls, release = [], threading.Event()

    def predict(requests):
        calls.append(list(requests))
        if len(calls) == 1:
            release.wait(10)
        if "bad" in requests:
            raise ValueError("bad request")
        return [r.upper() for r in requests]

    async def scenario():
        batcher = MicroBatcher(predict, max_batch=4, max_pending=9)
        worker = asyncio.create_task(batcher.work())
        first = asyncio.create_task(batcher.submit(["a"]))
        while not calls:  # the first batch is running (and held)
            await asyncio.sleep(0.01)
        queued = [asyncio.create_task(batcher.submit(job)) for job in (["b", "c"], ["d"], ["e", "f"], ["bad"],
                                                                      ["g"])]
        await asyncio.sleep(0.05)
        with pytest.raises(Busy):  # 7 waiting + 3 > max_pending 9
            await batcher.submit(["h", "i", "j"])
        release.set()
        results = await asyncio.gather(first, *queued, return_exceptions=True)
        worker.cancel()
        return results, batcher.stats

    results, stats = asyncio.run(scenario())
    assert calls == [["a"], ["b", "c", "d"], ["e", "f", "bad", "g"], ["e", "f"], ["bad"], ["g"]]
    assert results[:4] == [["A"], ["B", "C"], ["D"], ["E", "F"]] and results[5] == ["G"]
    assert isinstance(results[4], ValueError)  # the failing job fails alone
    assert (stats.requests, stats.batches, stats.largest_batch) == (7, 4, 3)


def test_the_batcher_waits_for_company_only_when_asked():
    calls = []

    def predict(requests):
        calls.append(list(requests))
        return requests

    async def scenario(wait_s):
        batcher = MicroBatcher(predict, max_batch=2, max_wait_s=wait_s)  # two requests fill a batch
        worker = asyncio.create_task(batcher.work())
        first = asyncio.create_task(batcher.submit(["a"]))
        await asyncio.sleep(0.1)
        second = asyncio.create_task(batcher.submit(["b"]))
        await asyncio.gather(first, second)
        worker.cancel()

    asyncio.run(scenario(0.0))
    asyncio.run(scenario(5.0))
    assert calls == [["a"], ["b"], ["a", "b"]]


def test_without_the_serve_extra_the_fix_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # `import uvicorn` fails as if it were not installed
    assert main(["serve", "--bundle", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "harness serve needs uvicorn" in err and "pip install 'electra-harness[serve]'" in err
    assert err.count("\n") == 1
