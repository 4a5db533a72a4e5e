"""`harness serve`: an ONNX bundle behind HTTP (Starlette on uvicorn), torch-free like the predictor.

GET /health says what is served and how requests were batched. POST /predict takes what a line of
`harness predict --input` holds, one JSON object or a list of them, and answers the same results (an
object, or a list in the same order). Concurrent requests share onnxruntime calls through the
micro-batcher (harness/deploy/batcher.py, which states the policy). A bad request gets a 4xx and a
one-line {"error": ...}: 400 for a body that is not UTF-8 JSON or objects with wrong keys or types,
413 for a body, list or text over the limits, 422 for texts the bundle cannot take (empty, a pair
for a one-sentence task, lone surrogates), 503 when the queue is full. The bundle's checksums are
verified before the server listens (harness/deploy/onnx_predictor.Predictor).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from harness.deploy.batcher import Busy, MicroBatcher
from harness.deploy.onnx_predictor import REQUEST_KEYS, Predictor, Request, request_from_record
from harness.deploy.serve_config import ServeConfig
from pretrain.infra.errors import UserError

log = logging.getLogger("harness.serve")


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
        return JSONResponse({"status": "ok", "task": manifest["task"], "kind": predictor.kind,
                             "precision": predictor.precision, "labels": predictor.labels,
                             "max_length": predictor.max_length, "input_keys": REQUEST_KEYS[predictor.kind],
                             "batches": vars(batcher.stats)})

    async def predict(request: HttpRequest) -> JSONResponse:
        records, single = parse_body(await read_body(request, config.max_body_bytes), config.max_items)
        requests = [to_request(record, predictor, config.max_text_chars, "request" if single else f"item {i}")
                    for i, record in enumerate(records)]
        try:
            results = await batcher.submit(requests)
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


def parse_body(body: bytes, max_items: int) -> tuple[list, bool]:
    """The JSON objects of a body and whether it held one object (rather than a list)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise Rejected(400, f"request body is not UTF-8 (byte 0x{body[error.start]:02x} at offset "
                            f"{error.start}); send JSON encoded as UTF-8") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise Rejected(400, f"request body is not valid JSON ({error.msg} at line {error.lineno} column "
                            f"{error.colno}); send one object or a list of objects") from None
    except RecursionError:
        raise Rejected(400, "request body nests JSON too deeply; send one object or a list of "
                            "objects") from None
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
        request = request_from_record(record, predictor.kind, where)
    except UserError as error:
        raise Rejected(400, str(error)) from None
    for key, text in zip(REQUEST_KEYS[predictor.kind], (request.text, request.text_pair), strict=True):
        if text is not None and len(text) > max_text_chars:
            raise Rejected(413, f"{where}: {key!r} has {len(text)} characters, over the server's limit of "
                                f"{max_text_chars} (max_text_chars); shorten it")
    try:
        predictor.check(request)
    except UserError as error:
        raise Rejected(422, str(error)) from None
    return request


def one_line(text: str) -> str:
    return " ".join(text.split())
