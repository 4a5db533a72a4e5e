"""What `harness serve` holds under load, beside `harness predict` in a loop and onnxruntime in-process.

Starts `harness serve` on 127.0.0.1 (a free port) and, for each client count N, runs N client threads
for a fixed time, each sending one request at a time over its own keep-alive connection (one
object per request, sentences drawn in turn from the input). Prints requests/s, p50/p99 latency, the
error count and the mean batch the server formed. References, measured while no server runs: the
same requests through a `Predictor` in this process, one at a time and in batches of 32 (the ceiling
without HTTP), and `harness predict` in a fresh process per request (what a deployment without a
server pays). Every loop is bounded by time or count. Exits 1 if any request failed.

    python benchmarks/serve_load.py [--bundle DIR] [--input FILE.jsonl] [--clients 1,4,16] [--seconds 20]

--hostile K (issue 49): instead, one run of the first --clients count for --seconds in which every
K-th request of each client is hostile, in turn: each body that once got a 500 or could (NaN,
Infinity, 1e999, a 4,301-digit integer, lone surrogates, deep nesting, malformed JSON), each limit
(max_items, max_text_chars, max_body_bytes), texts the bundle cannot take, and a client that leaves
mid-upload; each on a connection of its own. It checks that every good request got 200, every
hostile one a 4xx, and that the server's log holds no traceback and one info line per client that
left; prints the figures (requests/s, p50/p95 latency, counts) as markdown; exits 1 otherwise.

    python benchmarks/serve_load.py --preset electra-tiny --hostile 5 --clients 4 --seconds 60 threads=1

Without --bundle: a random-init ELECTRA-Small with a 2-class head, exported for SST-2 with int8
(`harness init`, then `harness export onnx`), kept in --work. Without --input: SST-2 dev sentences
from $SHARED_DIR/data/glue (or ../shared beside the checkout). Clients and server share the
machine's cores: on a small machine the clients' own time is part of what is measured.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.config import load_config  # noqa: E402
from harness.deploy.onnx_predictor import Predictor, Request, read_requests  # noqa: E402
from harness.deploy.serve_config import ServeConfig  # noqa: E402

HARNESS = [sys.executable, "-m", "harness.cli"]


def make_bundle(work: Path, preset: str = "electra-small") -> Path:
    """A random `preset` SST-2 classifier exported with int8 (once; kept in `work`)."""
    if preset != "electra-small":  # electra-small's files stay where earlier runs put them
        work = work / preset
    bundle = work / "bundle"
    if (bundle / "manifest.json").is_file():
        return bundle
    import transformers

    shared = Path(os.environ.get("SHARED_DIR", REPO.parent / "shared"))
    checkpoint = work / preset
    if not checkpoint.is_dir():
        subprocess.run([*HARNESS, "init", "--preset", preset, "--output", str(work / "init"),
                        "--tokenizer", str(shared / "models" / "electra-small-discriminator")], check=True)
        transformers.set_seed(0)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(work / "init", num_labels=2)
        model.save_pretrained(checkpoint)
        transformers.AutoTokenizer.from_pretrained(work / "init").save_pretrained(checkpoint)
    subprocess.run([*HARNESS, "export", "onnx", "--model", str(checkpoint), "--task", "sst2", "--quantize",
                    "int8", "--data-dir", str(shared / "data" / "glue"), "--max-eval-examples", "200",
                    "--output", str(bundle), "--tracking-uri", f"sqlite:///{work / 'mlflow.db'}"], check=True)
    return bundle


def sst2_requests(work: Path) -> Path:
    """The SST-2 dev sentences as JSON Lines requests."""
    shared = Path(os.environ.get("SHARED_DIR", REPO.parent / "shared"))
    rows = (shared / "data" / "glue" / "SST-2" / "dev.tsv").read_text().splitlines()[1:]
    path = work / "sst2-dev.jsonl"
    path.write_text("".join(json.dumps({"text": row.split("\t")[0].strip()}) + "\n" for row in rows))
    return path


@dataclass
class Tally:
    """One row of the table, summed over the rounds."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    batches: int = 0  # what the server formed
    batched: int = 0

    def row(self, name: str) -> str:
        cuts = statistics.quantiles(self.latencies, n=100, method="inclusive") if len(self.latencies) > 1 \
            else [float("nan")] * 99
        note = f"mean batch {self.batched / self.batches:.1f}" if self.batches else ""
        return (f"| {name} | {len(self.latencies)} | {len(self.latencies) / self.seconds:.1f} | "
                f"{cuts[49] * 1000:.1f} | {cuts[98] * 1000:.1f} | {len(self.errors)} | {note} |")


def in_process(predictor: Predictor, requests: list[Request], seconds: float, batch: int,
               tally: Tally) -> None:
    """`batch` requests per predict call for `seconds`; each request's latency is its call's."""
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        first = len(tally.latencies)
        chosen = [requests[(first + k) % len(requests)] for k in range(batch)]
        began = time.perf_counter()
        predictor.predict(chosen)
        tally.latencies += [time.perf_counter() - began] * batch
    tally.seconds += time.perf_counter() - start


def cli_loop(bundle: Path, records: list[dict], precision: str, runs: int, tally: Tally) -> None:
    """`harness predict` in a fresh process per request, `runs` times."""
    start = time.perf_counter()
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run([*HARNESS, "predict", "--bundle", str(bundle), "--precision", precision],
                              input=json.dumps(records[len(tally.latencies) % len(records)]),
                              capture_output=True, text=True, timeout=120)
        tally.latencies.append(time.perf_counter() - began)
        if done.returncode != 0:
            tally.errors.append(done.stderr.strip()[-200:])
    tally.seconds += time.perf_counter() - start


class Server:
    """`harness serve` on 127.0.0.1, any free port."""

    def __init__(self, bundle: Path, precision: str, settings: list[str], log: Path):
        self.log = log.open("w")
        self.process = subprocess.Popen([*HARNESS, "serve", "--bundle", str(bundle), "--host", "127.0.0.1",
                                         "--port", "0", "--precision", precision, *settings],
                                        stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + 120
        while not (found := re.search(r"on http://127\.0\.0\.1:(\d+)", log.read_text())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"harness serve did not start:\n{log.read_text()}")
            time.sleep(0.1)
        self.port = int(found[1])

    def get(self, path: str) -> dict:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        connection.request("GET", path)
        return json.loads(connection.getresponse().read())

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        self.log.close()


def client(port: int, bodies: list[bytes], offset: int, deadline: float, latencies: list,
           errors: list) -> None:
    """Requests one at a time over one keep-alive connection until `deadline`; a failure reconnects."""
    connection, i = http.client.HTTPConnection("127.0.0.1", port, timeout=60), offset
    while time.perf_counter() < deadline:
        began = time.perf_counter()
        try:
            connection.request("POST", "/predict", bodies[i % len(bodies)],
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
            if response.status != 200:
                errors.append(f"{response.status} {answer[:200]!r}")
            else:
                latencies.append(time.perf_counter() - began)
        except (OSError, http.client.HTTPException) as error:
            errors.append(repr(error))
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        i += 1
    connection.close()


def load(server: Server, bodies: list[bytes], clients: int, seconds: float, tally: Tally) -> None:
    """N clients for `seconds`."""
    before = server.get("/health")["batches"]
    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(server.port, bodies, len(tally.latencies) + k * 97,
                                                     start + seconds, tally.latencies, tally.errors))
               for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tally.seconds += time.perf_counter() - start
    after = server.get("/health")["batches"]
    tally.batches += after["batches"] - before["batches"]
    tally.batched += after["requests"] - before["requests"]


# --- --hostile: good and hostile requests mixed (issue 49) -------------------------------------------------

GONE = "client gone mid-upload"


def hostile_bodies(config: ServeConfig, kind: str) -> dict[str, tuple[bytes, int]]:
    """{what: (body, the 4xx it must get)}; the limits from the server's own settings."""
    first, second = ("text", "text_pair") if kind == "sequence-classification" else ("question", "context")
    one = {first: "a charming film"} | ({second: "it is"} if kind != "sequence-classification" else {})
    good = json.dumps(one)[1:-1]  # its keys and values, to write the bodies json.dumps cannot
    bodies = {  # json.dumps writes a lone surrogate as its escape, as a hostile client would
        "NaN as id": (f'{{{good}, "id": NaN}}', 400),
        "Infinity as id": (f'{{{good}, "id": Infinity}}', 400),
        "1e999 as id": (f'{{{good}, "id": 1e999}}', 400),
        "lone surrogate in id": (json.dumps(one | {"id": "\ud800"}), 400),
        "lone surrogate in a text": (json.dumps(one | {first: "a \udfff film"}), 400),
        "lone surrogate in a key of id": (json.dumps(one | {"id": {"\udbff": 1}}), 400),
        "4,301-digit integer": (f'{{{good}, "id": {"7" * 4301}}}', 400),
        "nesting 65 deep": (f'{{{good}, "id": {"[" * 65}{"]" * 65}}}', 400),
        "nesting 50,000 deep": ("[" * 50_000, 400),
        "malformed JSON": (f"{{{good},", 400),
        "not UTF-8": (json.dumps(one | {first: "caf\xe9"}, ensure_ascii=False).encode("latin-1"), 400),
        "unknown key": (json.dumps(one | {"txt": "a"}), 400),
        f"list over max_items ({config.max_items})": (json.dumps([one] * (config.max_items + 1)), 413),
        f"text over max_text_chars ({config.max_text_chars})":
            (json.dumps(one | {first: "a " * config.max_text_chars}), 413),
        f"body over max_body_bytes ({config.max_body_bytes})":
            (json.dumps(one | {"id": "x" * config.max_body_bytes}), 413),
        "empty text": (json.dumps(one | {first: " "}), 422),
        GONE: (b"", 0),
    }
    return {name: (body.encode() if isinstance(body, str) else body, status)
            for name, (body, status) in bodies.items()}


@dataclass
class Mixed:
    """What the mixed run saw."""

    good: list[float] = field(default_factory=list)  # latencies of good requests answered 200
    good_failed: list[str] = field(default_factory=list)
    hostile: dict[str, dict[int, int]] = field(default_factory=dict)  # what -> {status: count}
    hostile_latency: list[float] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # hostile requests not answered as they must be
    lock: threading.Lock = field(default_factory=threading.Lock)


def send_hostile(port: int, name: str, body: bytes, status: int, seen: Mixed) -> None:
    """One hostile request on a connection of its own (a refused upload may leave it unusable)."""
    began = time.perf_counter()
    got: int | str
    try:
        if name == GONE:  # headers and a part of the body, then away: the server must not answer
            with socket.create_connection(("127.0.0.1", port), timeout=60) as gone:
                gone.sendall(b"POST /predict HTTP/1.1\r\nHost: load\r\nContent-Length: 1000\r\n\r\n{\"tex")
            got = 0
        else:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                connection.request("POST", "/predict", body, {"Content-Type": "application/json"})
                response = connection.getresponse()
                answer = response.read()
                got = response.status
                if set(json.loads(answer)) != {"error"} or "\n" in json.loads(answer)["error"]:
                    got = f"{got} without a one-line error: {answer[:200]!r}"
            finally:
                connection.close()
    except (OSError, http.client.HTTPException, ValueError) as error:
        got = repr(error)
    with seen.lock:
        seen.hostile.setdefault(name, {})
        seen.hostile[name][got] = seen.hostile[name].get(got, 0) + 1  # type: ignore[index]
        if got != status:
            seen.wrong.append(f"{name}: {got} (expected {status})")
        elif name != GONE:
            seen.hostile_latency.append(time.perf_counter() - began)


def mixed_client(port: int, bodies: list[bytes], hostile: list[tuple[str, bytes, int]], every: int,
                 offset: int, deadline: float, seen: Mixed) -> None:
    """Good requests over one keep-alive connection; every `every`-th one a hostile request instead."""
    connection, i = http.client.HTTPConnection("127.0.0.1", port, timeout=60), offset
    while time.perf_counter() < deadline:
        i += 1
        if i % every == 0:
            send_hostile(port, *hostile[(i // every) % len(hostile)], seen)
            continue
        began = time.perf_counter()
        try:
            connection.request("POST", "/predict", bodies[i % len(bodies)],
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
            if response.status == 200:
                seen.good.append(time.perf_counter() - began)
            else:
                seen.good_failed.append(f"{response.status} {answer[:200]!r}")
        except (OSError, http.client.HTTPException) as error:
            seen.good_failed.append(repr(error))
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.close()


def hostile_run(bundle: Path, records: list[dict], args, config: ServeConfig) -> int:
    """--hostile: the mixed run, its checks and its markdown."""
    clients = int(args.clients.split(",")[0])
    manifest = json.loads((bundle / "manifest.json").read_text())
    hostile = [(name, *sent) for name, sent in hostile_bodies(config, manifest["kind"]).items()]
    # Good requests: single objects, and every 8th a list of 4 (as a client batching its own would send).
    bodies = [json.dumps(records[i % len(records)] if i % 8 else records[i:i + 4]).encode()
              for i in range(len(records))]
    log = args.work / "serve-hostile.log"
    print(f"bundle {bundle} ({manifest['task']}), {len(records)} distinct good requests, {clients} clients, "
          f"every {args.hostile}th request hostile ({len(hostile)} kinds in turn), {args.seconds:g} s, "
          f"{os.cpu_count()} CPUs, serve settings {' '.join(args.settings) or 'default'}", flush=True)
    server = Server(bundle, args.precision, args.settings, log)
    seen = Mixed()
    try:
        before = server.get("/health")["batches"]
        start = time.perf_counter()
        threads = [threading.Thread(target=mixed_client, args=(server.port, bodies, hostile, args.hostile,
                                                               k * 7, start + args.seconds, seen))
                   for k in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - start
        after = server.get("/health")["batches"]
    finally:
        server.stop()
    text = log.read_text()
    gone = sum(seen.hostile.get(GONE, {}).values())
    left = text.count("left before its request body had arrived")
    tracebacks = text.count("Traceback")
    answered = len(seen.good) + sum(count for name, counts in seen.hostile.items() if name != GONE
                                    for count in counts.values())
    sent = sum(count for counts in seen.hostile.values() for count in counts.values())
    good_cuts = statistics.quantiles(seen.good, n=100, method="inclusive")
    bad_cuts = statistics.quantiles(seen.hostile_latency, n=100, method="inclusive")
    print(f"\n| what | requests | requests/s | p50 ms | p95 ms | answered as they must be |\n"
          f"|---|---|---|---|---|---|\n"
          f"| good requests | {len(seen.good) + len(seen.good_failed)} | {len(seen.good) / seconds:.1f} | "
          f"{good_cuts[49] * 1000:.1f} | {good_cuts[94] * 1000:.1f} | {len(seen.good)} with 200, "
          f"{len(seen.good_failed)} otherwise |\n"
          f"| hostile requests (a connection each) | {sent} | {len(seen.hostile_latency) / seconds:.1f} | "
          f"{bad_cuts[49] * 1000:.1f} | {bad_cuts[94] * 1000:.1f} | "
          f"{len(seen.hostile_latency) + gone - len(seen.wrong)} with the 4xx named below (or, left "
          f"mid-upload, none), {len(seen.wrong)} otherwise |\n"
          f"| all answered | {answered} | {answered / seconds:.1f} | | | |")
    print("\n| hostile request | status: count |\n|---|---|")
    for name, _, status in hostile:
        counts = ", ".join(f"{got or 'no answer'}: {n}" for got, n in seen.hostile.get(name, {}).items())
        print(f"| {name} (must get {status or 'no answer'}) | {counts or 'not sent'} |")
    print(f"\n{seconds:.1f} s; server batches: {after['batches'] - before['batches']} of "
          f"{after['rows'] - before['rows']} rows; server log: {tracebacks} tracebacks, {left} info lines "
          f"for {gone} clients that left mid-upload")
    problems = seen.good_failed[:5] + seen.wrong[:5]
    if tracebacks:
        problems.append(f"{tracebacks} tracebacks in the server log {log}")
    if left != gone:
        problems.append(f"{left} info lines for {gone} clients that left mid-upload")
    if len(seen.hostile) < len(hostile):
        problems.append(f"{len(hostile) - len(seen.hostile)} hostile kinds never sent; run longer")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, help="bundle directory (default: make one in --work)")
    parser.add_argument("--input", type=Path, help="JSON Lines requests (default: SST-2 dev sentences)")
    parser.add_argument("--work", type=Path, default=Path("runs/serve-load"), help="where made files go")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "int8"])
    parser.add_argument("--clients", default="1,4,16", help="client counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="per row and round")
    parser.add_argument("--rounds", type=int, default=3, help="turns each row takes")
    parser.add_argument("--predict-runs", type=int, default=4, help="`harness predict` processes per round")
    parser.add_argument("--preset", default="electra-small", help="model shape of the bundle made without "
                        "--bundle (`harness models`)")
    parser.add_argument("--hostile", type=int, metavar="K", help="every K-th request hostile (see above)")
    parser.add_argument("settings", nargs="*", metavar="key=value", help="`harness serve` settings")
    args = parser.parse_args()
    config = load_config(ServeConfig, None, args.settings)  # the in-process references run as the server
    args.work.mkdir(parents=True, exist_ok=True)
    bundle = args.bundle or make_bundle(args.work, args.preset)
    records = [json.loads(line) for line in (args.input or sst2_requests(args.work)).read_text().splitlines()
               if line.strip()]
    if args.hostile:
        return hostile_run(bundle, records, args, config)
    print(f"bundle {bundle}, {len(records)} distinct requests, precision {args.precision}, "
          f"{os.cpu_count()} CPUs, serve settings {' '.join(args.settings) or 'default'}, "
          f"{args.rounds} rounds of {args.seconds:g} s per row")
    predictor = Predictor(bundle, args.precision, config.onnx_batch, config.threads)  # as the server's
    requests = read_requests([json.dumps(r) for r in records], predictor.pipeline, "input")
    predictor.predict(requests[:config.max_batch])  # warm-up
    bodies = [json.dumps(r).encode() for r in records]
    server = Server(bundle, args.precision, args.settings, args.work / "serve.log")
    # The rows take turns, round after round, so that other load on the machine falls on all of them.
    rows = {"onnxruntime in-process, 1 request per call":
            lambda tally: in_process(predictor, requests, args.seconds, 1, tally),
            f"onnxruntime in-process, {config.max_batch} requests per call (latency: the call's)":
            lambda tally: in_process(predictor, requests, args.seconds, config.max_batch, tally)}
    for clients in map(int, args.clients.split(",")):
        rows[f"`harness serve`, {clients} clients"] = \
            lambda tally, clients=clients: load(server, bodies, clients, args.seconds, tally)
    rows["`harness predict`, a process per request"] = \
        lambda tally: cli_loop(bundle, records, args.precision, args.predict_runs, tally)
    tallies = {name: Tally() for name in rows}
    try:
        for _ in range(args.rounds):
            for name, measure in rows.items():
                measure(tallies[name])
    finally:
        server.stop()
    print("| what | requests | requests/s | p50 ms | p99 ms | errors | note |\n|---|---|---|---|---|---|---|")
    print("\n".join(tally.row(name) for name, tally in tallies.items()))
    failures = [error for tally in tallies.values() for error in tally.errors]
    for error in failures[:5]:
        print(f"error: {error}", file=sys.stderr)
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
