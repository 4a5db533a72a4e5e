"""`harness serve`: a real server process on a free loopback port, serving a tiny exported bundle."""

import asyncio
import json
import random
import re
import shutil
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.cli import main
from harness.deploy.batcher import Busy, MicroBatcher
from tests.conftest import PLAIN, write_glue_dir, write_squad, write_tiny_model
from tests.serving import Server, call, harness_predict

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


@pytest.fixture(scope="module")
def server(bundle, tmp_path_factory):
    # Small limits, so that the oversized cases stay small.
    running = Server(bundle, tmp_path_factory.mktemp("log") / "serve.log", "max_body_bytes=65536",
                     "max_text_chars=1000")
    yield running
    running.stop()


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
    (b'{"text": " ", "text_pair": "b"}', 422, "empty text"),
]
# What once got a bare 500 (issue 49), or could: values no answer can echo, numbers Python will not
# convert, lone surrogates wherever a string can be, and malformed JSON of other kinds.
PAIR = '"text": "a", "text_pair": "b"'
HOSTILE = [
    (f'{{{PAIR}, "id": NaN}}', "holds NaN, which is not JSON"),
    (f'{{{PAIR}, "id": Infinity}}', "holds Infinity, which is not JSON"),
    (f'[{{{PAIR}, "id": [1, -Infinity]}}]', "holds -Infinity, which is not JSON"),
    (f'{{{PAIR}, "id": 1e999}}', "the number 1e999, beyond a 64-bit float"),
    (f'{{{PAIR}, "id": -1.5E+400}}', "the number -1.5E+400, beyond a 64-bit float"),
    (f'{{{PAIR}, "id": "\\ud800"}}', "['id'] holds U+D800 at character 0, a lone surrogate"),
    (f'[{{{PAIR}}}, {{{PAIR}, "id": {{"k": ["ok", "x\\udfff"]}}}}]',
     "[1]['id']['k'][1] holds U+DFFF at character 1, a lone surrogate"),
    (f'{{{PAIR}, "id": {{"\\udbff": 1}}}}', "a key of ['id'] holds U+DBFF"),
    ('{"text": "a", "text_pair": "b\\ud800"}', "['text_pair'] holds U+D800 at character 1"),
    ('{"text\\ud800": "a"}', "a key of the body holds U+D800"),
    (f'{{{PAIR}, "id": {"7" * 4301}}}', "an integer of 4301 digits, over Python's limit of 4300"),
    (f'{{"text": -{"7" * 5000}, "text_pair": "b"}}', "an integer of 5000 digits"),
    (f'{{{PAIR}, "id": {"[" * 65}{"]" * 65}}}', "nests JSON more than 64 deep"),
    (f'{{{PAIR}}} {{{PAIR}}}', "not valid JSON (Extra data"),
    (f'{{{PAIR}, "id": 01}}', "not valid JSON"),
    ('{"text": "a\tb", "text_pair": "b"}', "not valid JSON (Invalid control character"),  # a raw tab
    ("{'text': 'a'}", "not valid JSON"),
]
BAD_REQUESTS += [(body.encode(), 400, named) for body, named in HOSTILE]


@pytest.mark.slow
@pytest.mark.parametrize(("body", "status", "named"), BAD_REQUESTS, ids=[c[2] for c in BAD_REQUESTS])
def test_a_bad_request_gets_a_4xx_with_one_line(body, status, named, server):
    got, answer = call(server.url, body)
    assert got == status and set(answer) == {"error"}
    assert named in answer["error"] and "\n" not in answer["error"]
    assert call(server.url, json.dumps({"text": "a", "text_pair": "b"}).encode())[0] == 200  # still serving


@pytest.mark.slow
def test_harness_predict_refuses_an_id_it_could_not_print(bundle, tmp_path, capsys):
    path = tmp_path / "requests.jsonl"
    path.write_text('{"text": "a", "text_pair": "b"}\n{"text": "a", "text_pair": "b", "id": ["\\udc00"]}\n')
    assert main(["predict", "--bundle", str(bundle), "--input", str(path)]) == 2
    err = capsys.readouterr().err
    assert "line 2: 'id' holds a lone surrogate" in err and err.count("\n") == 1


@pytest.mark.slow
def test_values_at_the_limits_are_echoed(server):
    """The largest integer Python converts, a float near its limit, nesting to MAX_DEPTH: answered as sent."""
    for value in (int("7" * 4300), -1.5e308, [[[[]]]], {"k": ["\u00e9\U0001f600"]}):
        status, answer = call(server.url, json.dumps({"text": "a", "text_pair": "b", "id": value}).encode())
        assert status == 200 and answer["id"] == value
    deep = "[" * 64 + "]" * 64  # the id at depth 1 of the body: 64 lists in it end at depth 64
    status, answer = call(server.url, f'{{"text": "a", "text_pair": "b", "id": {deep[1:-1]}}}'.encode())
    assert status == 200 and json.dumps(answer["id"]) == "[" * 63 + "]" * 63


def wait_for_log(server, text: str, seconds: float = 10) -> str:
    deadline = time.monotonic() + seconds
    while text not in (log := server.log_path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return log


@pytest.mark.slow
def test_a_client_gone_mid_upload_is_one_info_line(server):
    with socket.create_connection(server.address) as gone:
        gone.sendall(b"POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{\"text\": ")
        time.sleep(0.2)
    log = wait_for_log(server, "left before its request body had arrived")
    lines = [line for line in log.splitlines() if "left before" in line]
    assert lines == ["INFO:     client 127.0.0.1 left before its request body had arrived; nothing predicted"]
    assert "Traceback" not in log and "ERROR" not in log
    assert call(server.url, json.dumps({"text": "a", "text_pair": "b"}).encode())[0] == 200


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
    (["max_pending=10"], "max_items=64, max_rows=128, max_pending=10: need max_items <= max_rows <= max_pending"),
    (["max_items=200"], "max_items=200, max_rows=128, max_pending=1024: need max_items <= max_rows"),
    (["request_timeout_s=0", "limit_concurrency=1", "timeout_graceful_shutdown=-1"],
     "request_timeout_s=0.0, timeout_graceful_shutdown=-1.0, limit_concurrency=1: the limits must be"),
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


def test_the_batcher_counts_rows_and_drops_jobs_whose_caller_gave_up():
    """max_batch and max_pending bound rows (a SQuAD request's windows), not requests; a job cancelled
    while queued leaves the queue and frees its rows, and is never predicted."""
    calls, release = [], threading.Event()

    def predict(requests):
        calls.append(list(requests))
        if len(calls) == 1:
            release.wait(10)
        return [r.upper() for r in requests]

    async def scenario():
        batcher = MicroBatcher(predict, max_batch=5, max_pending=8)
        worker = asyncio.create_task(batcher.work())
        first = asyncio.create_task(batcher.submit(["a"], rows=3))
        while not calls:
            await asyncio.sleep(0.01)
        big = asyncio.create_task(batcher.submit(["b"], rows=4))
        small = asyncio.create_task(batcher.submit(["c", "d"], rows=2))
        await asyncio.sleep(0.05)
        assert batcher.pending == 6
        with pytest.raises(Busy, match="6 rows are waiting and this request makes 3, the limit is 8"):
            await batcher.submit(["e"], rows=3)
        big.cancel()  # its caller's time limit
        await asyncio.sleep(0.05)
        assert batcher.pending == 2
        late = asyncio.create_task(batcher.submit(["f"], rows=3))  # fits now: 2 + 3 <= 5 rows a batch
        await asyncio.sleep(0.05)
        release.set()
        results = await asyncio.gather(first, small, late)
        worker.cancel()
        return results, batcher.stats

    results, stats = asyncio.run(scenario())
    assert calls == [["a"], ["c", "d", "f"]]  # "b" never ran
    assert results == [["A"], ["C", "D"], ["F"]]
    assert (stats.requests, stats.rows, stats.batches, stats.largest_batch) == (4, 8, 2, 5)
    assert stats.sizes == {3: 1, 5: 1}


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


# --- Limits in model rows: a SQuAD bundle, whose long contexts make several windows each ---------------

@pytest.fixture(scope="module")
def squad_bundle(tmp_path_factory):
    """A SQuAD v1.1 bundle (fp32) of a tiny random ELECTRA: 64-token windows, 16 tokens apart."""
    import transformers

    root = tmp_path_factory.mktemp("serve-squad")
    tiny = write_tiny_model(root / "tiny")
    transformers.set_seed(0)
    transformers.ElectraForQuestionAnswering.from_pretrained(tiny).save_pretrained(root / "qa")
    transformers.AutoTokenizer.from_pretrained(tiny).save_pretrained(root / "qa")
    write_squad(root / "data" / "dev-v1.1.json", "1.1", num_articles=1)
    assert main(["export", "onnx", "--model", str(root / "qa"), "--task", "squad", "--data-dir",
                 str(root / "data"), "--output", str(root / "bundle"),
                 "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}"]) == 0
    return root / "bundle"


def squad_body(*context_words: int) -> bytes:
    """One question per context of `n` words (a word of the tiny vocabulary is one token); a list if several.

    By hand: "the cat ?" is 3 tokens, so a 64-token window holds 64 - 3 - 3 ([CLS], [SEP], [SEP]) = 58
    context tokens and windows start 16 apart (doc_stride): n words make 1 + ceil(max(n - 58, 0) / 16)
    windows: 58 -> 1, 59 -> 2, 74 -> 2, 75 -> 3, 91 -> 4, 107 -> 5."""
    records = [{"question": "the cat ?", "context": " ".join(PLAIN[i % len(PLAIN)] for i in range(n))}
               for n in context_words]
    return json.dumps(records[0] if len(records) == 1 else records).encode()


WINDOWS = {58: 1, 59: 2, 74: 2, 75: 3, 91: 4, 107: 5}  # worked by hand in squad_body


@pytest.fixture(scope="module")
def squad_server(squad_bundle, tmp_path_factory):
    # A request of one row waits 2.5 s for company (batch_wait_ms) but has 1 s (request_timeout_s): it
    # gets 504, and holds its row in the queue meanwhile. Two rows or more fill a batch (max_batch) and
    # run at once.
    running = Server(squad_bundle, tmp_path_factory.mktemp("log") / "serve.log", "max_batch=2",
                     "batch_wait_ms=2500", "request_timeout_s=1", "max_items=2", "max_rows=4", "max_pending=4",
                     "limit_concurrency=4", "threads=1")
    yield running
    running.stop()


@pytest.mark.slow
def test_rows_are_the_windows_that_encode_makes(squad_bundle, bundle):
    from harness.deploy.onnx_predictor import Predictor, Request

    predictor = Predictor(squad_bundle, "fp32")
    rng = random.Random(0)
    requests = [Request(" ".join(rng.choices(PLAIN, k=rng.randint(1, 30))) + " ?",
                        " ".join(rng.choices(PLAIN, k=rng.randint(1, 300)))) for _ in range(200)]
    owners = predictor.encode(requests).owners
    windows = [owners.count(i) for i in range(len(requests))]
    assert max(windows) >= 10 and predictor.rows(requests) == windows
    by_hand = [Request("the cat ?", json.loads(squad_body(n))["context"]) for n in WINDOWS]
    assert predictor.rows(by_hand) == list(WINDOWS.values())
    assert Predictor(bundle).rows(by_hand[:3]) == [1, 1, 1]  # classification: one row an object


@pytest.mark.slow
def test_a_request_over_max_rows_in_windows_is_413(squad_server):
    status, answer = call(squad_server.url, squad_body(59))  # 2 windows: a full batch, answered at once
    assert status == 200 and set(answer) == {"answer", "start", "end", "score"}
    status, answers = call(squad_server.url, squad_body(74, 59))  # 2 + 2 = max_rows
    assert status == 200 and len(answers) == 2
    assert call(squad_server.url, squad_body(107)) == (413, {"error": (
        "request makes 5 model rows, a context window of 64 tokens each, over the server's limit of 4 "
        "(max_rows); send fewer or shorter texts per request")})
    status, answer = call(squad_server.url, squad_body(75, 59))  # 3 + 2
    assert status == 413 and answer["error"].startswith("2 objects make 5 model rows")


@pytest.mark.slow
def test_a_full_queue_is_503_and_no_answer_in_time_504(squad_server):
    before = call(squad_server.url, path="/health")[1]["batches"]
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        waiting = pool.submit(call, squad_server.url, squad_body(58))  # 1 row: waits for company, 2.5 s
        while call(squad_server.url, path="/health")[1]["pending_rows"] != 1:
            assert time.monotonic() - started < 2, "the request never queued"
            time.sleep(0.02)
        # 1 row waiting + 4 > max_pending 4, though 4 alone is within max_rows
        assert call(squad_server.url, squad_body(91)) == (503, {"error": (
            "server busy (1 rows are waiting and this request makes 4, the limit is 4 (max_pending)); "
            "retry shortly")})
        status, answer = waiting.result()
    assert 1 <= time.monotonic() - started < 2.4
    assert (status, answer) == (504, {"error": (
        "no answer within 1 s (request_timeout_s), the server is overloaded; the request was dropped unless "
        "already running; retry later or send fewer or shorter texts")})
    while (health := call(squad_server.url, path="/health")[1])["pending_rows"]:  # the batch's wait ends
        assert time.monotonic() - started < 10
        time.sleep(0.05)
    assert health["batches"] == before  # the request that timed out was never run
    assert call(squad_server.url, squad_body(59))[0] == 200


@pytest.mark.slow
def test_a_body_still_arriving_at_the_time_limit_is_408(squad_server):
    with socket.create_connection(squad_server.address, timeout=10) as slow:
        started = time.monotonic()
        slow.sendall(b"POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"question\": ")
        head, _, body = slow.recv(4096).partition(b"\r\n\r\n")
        while len(body) < int(re.search(rb"content-length: (\d+)", head)[1]):
            body += slow.recv(4096)
    assert head.startswith(b"HTTP/1.1 408 ") and 1 <= time.monotonic() - started < 3
    assert json.loads(body) == {"error": "request body not received within 1 s (request_timeout_s); send it "
                                         "faster or in smaller requests"}


@pytest.mark.slow
def test_limit_concurrency_is_uvicorns(squad_server):
    idle = [socket.create_connection(squad_server.address) for _ in range(3)]  # with a 4th: limit_concurrency
    try:
        time.sleep(0.2)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(squad_server.url + "/predict", data=squad_body(59)),
                                   timeout=10)
        assert refused.value.code == 503 and refused.value.read() == b"Service Unavailable"
    finally:
        for connection in idle:
            connection.close()
    time.sleep(0.2)
    assert call(squad_server.url, squad_body(59))[0] == 200
    assert "Exceeded concurrency limit." in squad_server.log_path.read_text()


@pytest.mark.slow
def test_shutdown_waits_timeout_graceful_shutdown_then_cancels(bundle, tmp_path):
    server = Server(bundle, tmp_path / "serve.log", "batch_wait_ms=60000", "request_timeout_s=60",
                    "timeout_graceful_shutdown=1")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(call, server.url, json.dumps({"text": "a", "text_pair": "b"}).encode())
        while call(server.url, path="/health")[1]["pending_rows"] != 1:
            time.sleep(0.02)
        started = time.monotonic()
        server.stop()  # SIGTERM: the waiting request is cancelled after 1 s, not 60
        assert time.monotonic() - started < 10
        assert waiting.result() == (503, {"error": "server shutting down (timeout_graceful_shutdown passed); "
                                                   "retry shortly"})
    assert "Cancel 1 running task(s), timeout graceful shutdown exceeded" in server.log_path.read_text()


def test_health_shows_a_multilabel_bundles_threshold():
    from types import SimpleNamespace

    from harness.deploy.serve import create_app
    from harness.deploy.serve_config import ServeConfig

    def health(manifest):
        predictor = SimpleNamespace(manifest=manifest, precision="fp32", labels=["a", "b"], max_length=8,
                                    predict=None, pipeline=SimpleNamespace(name="sequence-classification",
                                                                          request_keys=("text", "text_pair"),
                                                                          answer_labels=lambda: ["a", "b"]))
        route = next(r for r in create_app(predictor, ServeConfig()).routes if r.path == "/health")
        return json.loads(asyncio.run(route.endpoint(None)).body)

    assert health({"task": "topics", "multilabel": True, "threshold": 0.3})["threshold"] == 0.3
    assert "threshold" not in health({"task": "rte"})


def test_a_tagging_bundles_health_lists_the_tags_its_answers_hold_in_the_files_scheme():
    """The model's labels are BIOES (ELECTRA trains on them); answers come back in the file's scheme, and
    /health lists that scheme's tags, worked by hand for IOB2 and BIOES over the types NP and VP."""
    from harness.deploy.token_classification import Predictor

    bioes_labels = ["B-NP", "B-VP", "E-NP", "E-VP", "I-NP", "I-VP", "O", "S-NP", "S-VP"]

    def listed(scheme):
        manifest = {"max_length": 16, "labels": bioes_labels, "types": ["NP", "VP"], "scheme": scheme,
                    "word_splitter": "Whitespace"}
        return Predictor(manifest, None, None).answer_labels()

    assert listed("IOB2") == ["O", "B-NP", "I-NP", "B-VP", "I-VP"]
    assert listed("IOB1") == ["O", "B-NP", "I-NP", "B-VP", "I-VP"]
    assert listed("BIOES") == ["O", "B-NP", "I-NP", "E-NP", "S-NP", "B-VP", "I-VP", "E-VP", "S-VP"]
