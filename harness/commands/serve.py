"""`harness serve`: an ONNX bundle from `harness export onnx` as an HTTP service, without torch."""

from __future__ import annotations

import argparse
import copy
import os
import socket
import sys
from pathlib import Path

from harness.config import settings_help
from harness.deploy.serve_config import ServeConfig

EPILOG = """examples:
  harness serve --bundle runs/onnx/sst2-seed0 --port 8000
  curl -s localhost:8000/predict -d '{"text": "a gripping film ."}'
  curl -s localhost:8000/predict -d '[{"text": "a gripping film .", "id": 1}, {"text": "dull ."}]'
  curl -s localhost:8000/health

POST /predict takes what a line of `harness predict --input` holds, one JSON object or a list, and
answers the same results. Concurrent requests are batched into one onnxruntime call (max_batch,
batch_wait_ms). Limits count model rows (a classification object is one, a SQuAD context one per
window): max_rows a request, max_pending queued; request_timeout_s bounds a request's time. A bad
request gets a 4xx with {"error": "..."}, overload a 503 or 504. No authentication and no TLS:
beyond 127.0.0.1, put a reverse proxy with TLS and authentication in front. Needs the serve extra:
pip install 'electra-harness[serve]'.

""" + settings_help(ServeConfig, "settings (key=value):")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve an exported ONNX bundle over HTTP (no torch)", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve a bundle from `harness export onnx` over HTTP with onnxruntime only; its "
                    "checksums are verified before the server listens.")
    parser.add_argument("--bundle", type=Path, required=True, help="bundle directory")
    parser.add_argument("--host", default="127.0.0.1", help=(
        "address to listen on (default: %(default)s; the service has no authentication or TLS: beyond "
        "this machine, put a reverse proxy with both in front)"))
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s; 0: any free one)")
    parser.add_argument("--precision", choices=["auto", "fp32", "int8"], default="auto",
                        help="model to run (default: int8 when the bundle has it)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="settings (see below)")
    parser.set_defaults(handler=handle)


def listen(host: str, port: int) -> socket.socket:
    """A bound, listening socket, or a UserError naming the address (uvicorn would exit with a log line)."""
    from foundation.infra.errors import UserError

    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is not a port; choose 0 to 65535 (0: any free one)")
    try:
        family, socket_type, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE)[0]
        # proto IPPROTO_TCP, not create_server's 0: asyncio sets TCP_NODELAY on a connection only when
        # its socket says TCP, and without it every keep-alive answer waits ~40 ms for a delayed ACK.
        server = socket.socket(family, socket_type, proto)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(address)
        server.listen(1024)
        return server
    except OSError as error:  # a name lookup's errno is no OS error number
        reason = error.strerror if isinstance(error, socket.gaierror) else \
            os.strerror(error.errno) if error.errno else str(error)
        raise UserError(f"cannot listen on {host}:{port} ({reason}); choose another --host or "
                        "--port") from None


def handle(args) -> int:
    from foundation.infra.errors import UserError
    from harness.config import load_config
    from harness.deploy.onnx_predictor import Predictor

    config = load_config(ServeConfig, None, args.overrides)
    try:
        import uvicorn

        from harness.deploy.serve import create_app
    except ImportError as error:
        raise UserError(f"harness serve needs {error.name}, which is not installed; pip install "
                        "'electra-harness[serve]' (starlette and uvicorn)") from None
    predictor = Predictor(args.bundle, args.precision, config.onnx_batch, config.threads)
    server = listen(args.host, args.port)
    host, port = server.getsockname()[:2]
    print(f"harness: serving {args.bundle} ({predictor.manifest['task']}, {predictor.precision}) on "
          f"http://{host}:{port} (POST /predict, GET /health); Ctrl-C stops", file=sys.stderr, flush=True)
    # uvicorn's logging, plus the service's own lines (harness.serve: a client gone, a bug's traceback).
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["loggers"]["harness.serve"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    uvicorn.Server(uvicorn.Config(create_app(predictor, config), log_level="info", log_config=log_config,
                                  access_log=config.access_log,
                                  limit_concurrency=config.limit_concurrency,
                                  timeout_graceful_shutdown=config.timeout_graceful_shutdown)).run(sockets=[server])
    return 0
