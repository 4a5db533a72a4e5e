"""`harness serve`: an ONNX bundle behind HTTP (Starlette on uvicorn), torch-free like the predictor.

GET /health says what is served and how requests were batched. POST /predict takes what a line of
`harness predict --input` holds, one JSON object or a list of them, and answers the same results (an
object, or a list in the same order). Concurrent requests share onnxruntime calls through the
micro-batcher (harness/deploy/batcher.py, which states the policy). A bad request gets a 4xx and a
one-line {"error": ...}: 400 for a body that is not strict UTF-8 JSON (NaN, Infinity, a number that
overflows a float, an integer over Python's 4,300 digits, a lone surrogate in any string, nesting
over MAX_DEPTH) or objects with wrong keys or types, 408 for a body still arriving at the time limit,
413 for a body, list, text or request (in model rows) over the limits, 422 for texts the bundle
cannot take (empty, a pair for a one-sentence task). Overload is a 5xx with one line: 503 when the
queue (in model rows) is full, 504 when the answer is not ready within the time limit. Limits count
model rows (Predictor.rows: one per classification object, one per SQuAD context window, one per
tagging window of whole words), as that is what a request costs. A tagging bundle answers each
text's words, tags and spans (text, type, character offsets). A client that leaves mid-upload is one
info line. The bundle's checksums are verified before the server listens
(harness/deploy/onnx_predictor.Predictor).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import sys

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from foundation.infra.errors import UserError
from harness.deploy.batcher import Busy, MicroBatcher
from harness.deploy.onnx_predictor import Predictor, Request, request_from_record
from harness.deploy.serve_config import ServeConfig

log = logging.getLogger("harness.serve")

MAX_DEPTH = 64  # JSON nesting a body may have: requests need 3; json.loads's own limit moves with the stack


class Rejected(Exception):
    """A request answered with `status` and a one-line reason."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


def create_app(predictor: Predictor, config: ServeConfig) -> Starlette:
    """The service: its micro-batcher runs for as long as the app does."""
    batcher = MicroBatcher(predictor.predict, config.max_batch, config.batch_wait_ms / 1000,
                           config.max_pending)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        worker = asyncio.create_task(batcher.work())
        yield
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker

    async def health(request: HttpRequest) -> JSONResponse:
        manifest = predictor.manifest
        return JSONResponse({"status": "ok", "task": manifest["task"], "kind": predictor.pipeline.name,
                             "precision": predictor.precision,
                             "labels": predictor.pipeline.answer_labels(),
                             **({"scheme": manifest["scheme"]} if "scheme" in manifest else {}),
                             "max_length": predictor.max_length,
                             "input_keys": predictor.pipeline.request_keys,
                             **({"threshold": manifest["threshold"]} if "threshold" in manifest else {}),
                             "batches": vars(batcher.stats), "pending_rows": batcher.pending})

    async def predict(request: HttpRequest) -> Response:
        phase = "body"  # what the time limit interrupts: the upload (408) or the answer (504)
        try:
            async with asyncio.timeout(config.request_timeout_s):
                body = await read_body(request, config.max_body_bytes)
                phase = "answer"
                return await answer(body)
        except TimeoutError:
            if phase == "body":
                raise Rejected(408, f"request body not received within {config.request_timeout_s:g} s "
                                    "(request_timeout_s); send it faster or in smaller requests") from None
            raise Rejected(504, f"no answer within {config.request_timeout_s:g} s (request_timeout_s), "
                                "the server is overloaded; the request was dropped unless already running; "
                                "retry later or send fewer or shorter texts") from None
        except asyncio.CancelledError:  # uvicorn's timeout_graceful_shutdown: an answer, not a traceback
            raise Rejected(503, "server shutting down (timeout_graceful_shutdown passed); retry "
                                "shortly") from None
        except ClientDisconnect:  # nobody to answer: one line in the log, not a traceback
            log.info("client %s left before its request body had arrived; nothing predicted",
                     request.client.host if request.client else "?")
            return Response(status_code=400)

    async def answer(body: bytes) -> JSONResponse:
        records, single = parse_body(body, config.max_items)
        requests = [to_request(record, predictor, config.max_text_chars, "request" if single else f"item {i}")
                    for i, record in enumerate(records)]
        rows = await count_rows(predictor, requests)
        if rows > config.max_rows:
            what = "request" if single else f"{len(requests)} objects"
            raise Rejected(413, f"{what} make{'s' if single else ''} {rows} model rows"
                                f"{predictor.pipeline.row_unit()}, over the "
                                f"server's limit of {config.max_rows} (max_rows); send fewer or shorter "
                                "texts per request")
        try:
            results = await batcher.submit(requests, rows)
        except Busy as error:
            raise Rejected(503, f"server busy ({error}); retry shortly") from None
        except UserError as error:  # what the checks above let through, in this request alone (batcher.py)
            raise Rejected(422, str(error)) from None
        except Exception as error:  # a bug, not the client's: the traceback to the log, the server goes on
            log.exception("predict failed")
            raise Rejected(500, f"internal error ({type(error).__name__}: {error})") from None
        return JSONResponse(results[0] if single else results)

    async def rejected(request: HttpRequest, error: Rejected) -> JSONResponse:
        return JSONResponse({"error": one_line(str(error))}, status_code=error.status)

    async def not_routed(request: HttpRequest, error: HTTPException) -> JSONResponse:  # 404, 405
        return JSONResponse({"error": f"{error.detail}: {request.method} {request.url.path}; the service has "
                                      "GET /health and POST /predict"}, status_code=error.status_code)

    return Starlette(routes=[Route("/health", health, methods=["GET"]),
                             Route("/predict", predict, methods=["POST"])],
                     exception_handlers={Rejected: rejected, HTTPException: not_routed}, lifespan=lifespan)


async def read_body(request: HttpRequest, limit: int) -> bytes:
    """The request body, or a 413 as soon as it is known to exceed `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Rejected(413, f"request body of {declared} bytes is over the server's limit of {limit} "
                            "(max_body_bytes); send fewer or shorter texts per request")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise Rejected(413, f"request body is over the server's limit of {limit} bytes (max_body_bytes); "
                                "send fewer or shorter texts per request")
    return bytes(body)


async def count_rows(predictor: Predictor, requests: list[Request]) -> int:
    """The model rows of `requests`; where they need the tokenizer, run beside the loop (up to a MiB of
    text)."""
    if predictor.pipeline.rows_are_one:
        return sum(predictor.rows(requests))
    return sum(await asyncio.to_thread(predictor.rows, requests))


def parse_body(body: bytes, max_items: int) -> tuple[list, bool]:
    """The JSON objects of a body and whether it held one object (rather than a list)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise Rejected(400, f"request body is not UTF-8 (byte 0x{body[error.start]:02x} at offset "
                            f"{error.start}); send JSON encoded as UTF-8") from None
    try:  # strict JSON: Python's json also reads NaN, Infinity and 1e999 (inf), which no answer can echo
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_integer)
    except json.JSONDecodeError as error:
        what = error.msg.removesuffix(" at")  # json's "Invalid control character at" names no place itself
        raise Rejected(400, f"request body is not valid JSON ({what} at line {error.lineno} column "
                            f"{error.colno}); send one object or a list of objects") from None
    except RecursionError:
        raise Rejected(400, "request body nests JSON too deeply; send one object or a list of "
                            "objects") from None
    if b"\\u" in body:  # a lone surrogate can only come from an escape; otherwise UTF-8 decoding ruled it out
        check_strings(value)
    else:
        check_depth(value)
    if not isinstance(value, list):
        return [value], True
    if not value:
        raise Rejected(400, "empty list; send at least one object")
    if len(value) > max_items:
        raise Rejected(413, f"{len(value)} objects in one request, over the server's limit of {max_items} "
                            "(max_items); split them over several requests")
    return value, False


def to_request(record: object, predictor: Predictor, max_text_chars: int, where: str) -> Request:
    """A Request the predictor can take, or the 4xx that says why not."""
    try:
        request = request_from_record(record, predictor.pipeline, where)
    except UserError as error:
        raise Rejected(400, str(error)) from None
    for key, text in zip(predictor.pipeline.request_keys, (request.text, request.text_pair), strict=True):
        if text is not None and len(text) > max_text_chars:
            raise Rejected(413, f"{where}: {key!r} has {len(text)} characters, over the server's limit of "
                                f"{max_text_chars} (max_text_chars); shorten it")
    try:
        predictor.check(request)
    except UserError as error:
        raise Rejected(422, str(error)) from None
    return request


def _no_constant(name: str) -> None:
    raise Rejected(400, f"request body holds {name}, which is not JSON (numbers are finite); send a "
                        "finite number or a string")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise Rejected(400, f"request body holds the number {_cut(literal)}, beyond a 64-bit float "
                            "(it would read as infinity); send a smaller number or a string")
    return value


def _integer(literal: str) -> int:
    try:
        return int(literal)
    except ValueError:  # over sys.get_int_max_str_digits() digits: Python refuses to convert it
        digits, most = len(literal.lstrip("-")), sys.get_int_max_str_digits()
        raise Rejected(400, f"request body holds an integer of {digits} digits, over Python's limit of "
                            f"{most}; send it as a string") from None


def check_depth(value: object) -> None:
    """400 unless `value` nests at most MAX_DEPTH lists and objects (so that its answer can be written)."""
    for _ in _walk(value):
        pass


def check_strings(value: object) -> None:
    """400 naming the first string (a key or a value, at any depth) that holds a lone surrogate, which
    no UTF-8 answer or tokenizer can take; and check_depth's check."""
    for text, where in _walk(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise Rejected(400, f"request body: {where} holds U+{ord(text[error.start]):04X} at character "
                                f"{error.start}, a lone surrogate, not text (from an escape such as "
                                "\\ud800); send valid Unicode") from None


def _walk(value: object):
    """(string, where) for each key and string value in a decoded JSON value, without recursion."""
    stack = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise Rejected(400, f"request body nests JSON more than {MAX_DEPTH} deep; send one object or "
                                "a list of objects")
        if isinstance(item, str):
            yield item, path or "the body"
        elif isinstance(item, dict):
            for key in item:
                yield key, f"a key of {path or 'the body'}"
            stack.extend(reversed([(inner, f"{path}[{_cut(repr(key))}]", depth + 1)
                                   for key, inner in item.items()]))  # popped in the body's order
        elif isinstance(item, list):
            stack.extend(reversed([(inner, f"{path}[{i}]", depth + 1) for i, inner in enumerate(item)]))


def _cut(text: str, most: int = 40) -> str:
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def one_line(text: str) -> str:
    return " ".join(text.split())
