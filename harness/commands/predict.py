"""`harness predict`: labels, scores or answers from an ONNX bundle, without torch.

Keep the imports light: this path must not import torch or transformers (tests/test_onnx.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """input:
  harness predict --bundle B "a fine film"                     one text (two for pair tasks)
  harness predict --bundle B "Who wrote it?" "It was written by ..."   SQuAD: question, context
  harness predict --bundle B --input requests.jsonl            JSON Lines from a file ('-': stdin)
  ... | harness predict --bundle B                             JSON Lines from stdin

JSON Lines: one object per line, blank lines skipped; {"text": ..., "text_pair": ...} for GLUE
bundles, {"question": ..., "context": ...} for SQuAD bundles, {"text": ...} or {"tokens": [...]}
for tagging bundles; an optional "id" is echoed.
Output: one JSON object per input on stdout, in input order (tagging: tokens, tags and spans with
character offsets). Inputs over the bundle's max_length are truncated with a note on stderr (SQuAD
contexts and tagging sentences are windowed instead)."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict", help="predict with an exported ONNX bundle (no torch)", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Predict with a bundle from `harness export onnx` using onnxruntime only.")
    parser.add_argument("--bundle", type=Path, required=True, help="bundle directory")
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="a text and optional pair (SQuAD: question and context)")
    parser.add_argument("--input", metavar="FILE", help="JSON Lines file of requests, '-' for stdin")
    parser.add_argument("--precision", choices=["auto", "fp32", "int8"], default="auto",
                        help="model to run (default: int8 when the bundle has it)")
    parser.add_argument("--batch-size", type=int, default=32, help="requests per onnxruntime call")
    parser.set_defaults(handler=handle)


def utf8_lines(data: bytes, source: str) -> list[str]:
    """The lines of UTF-8 input (a byte-order mark allowed), or a UserError naming the first bad line."""
    from foundation.infra.errors import UserError

    try:
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise UserError(f"{source} line {line}: not UTF-8 text (byte 0x{data[error.start]:02x}); save or "
                        "send the requests as UTF-8") from None


def handle(args) -> int:
    import json

    from foundation.infra.errors import UserError
    from harness.deploy.onnx_predictor import Predictor, read_requests

    if args.texts and args.input:
        raise UserError("pass texts or --input, not both")
    if len(args.texts) > 2:
        raise UserError(f"got {len(args.texts)} texts; pass one text, or two for a pair (SQuAD: question "
                        "and context); quote each one, or use --input for many")
    predictor = Predictor(args.bundle, args.precision, args.batch_size)
    if args.texts:
        requests = [predictor.pipeline.from_texts(args.texts)]
    elif args.input in (None, "-"):
        if args.input is None and sys.stdin.isatty():
            raise UserError("no input: pass a text, --input FILE, or pipe JSON Lines to stdin")
        requests = read_requests(utf8_lines(sys.stdin.buffer.read(), "stdin"), predictor.pipeline, "stdin")
    else:
        path = Path(args.input)
        if not path.is_file():
            raise UserError(f"--input file {args.input!r} does not exist")
        requests = read_requests(utf8_lines(path.read_bytes(), args.input), predictor.pipeline, args.input)
    for result in predictor.predict(requests):
        if "note" in result:
            print(f"harness: note: {result['note']}", file=sys.stderr)
        print(json.dumps(result, ensure_ascii=False))
    return 0
