"""`procsift serve`: the prediction API alone (no daemon, nothing on this machine is changed)."""

from __future__ import annotations

import argparse

from procsift.collector.errors import ProcsiftError
from procsift.service.cli._args import port

EXAMPLES = """examples:
  procsift serve                          the bundled model on http://127.0.0.1:8765
  procsift serve --model mybundle --port 9000
  curl -s localhost:8765/v1/predict -H 'content-type: application/json' \\
       -d '{"windows": [{"pid": 1, "start_time": 1, "switches_in": 40, "syscall_counts": {"epoll_wait": 40}}]}'
Settings also come from PROCSIFT_HOST, PROCSIFT_PORT, PROCSIFT_MODEL, PROCSIFT_TOKEN_FILE,
PROCSIFT_MAX_BODY_BYTES, PROCSIFT_MAX_BATCH_ROWS.
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `serve` verb."""
    p = sub.add_parser("serve", help="the prediction REST API alone", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", metavar="BUNDLE", help="model bundle folder (default: the bundled one)")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=port, help="port (default 8765)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError  # noqa: PLC0415

    from procsift.models import load_bundle  # noqa: PLC0415
    from procsift.service.api.server import serve  # noqa: PLC0415
    from procsift.service.api.settings import Settings  # noqa: PLC0415

    overrides = {k: v for k, v in (("model", args.model), ("host", args.host), ("port", args.port)) if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as err:
        first = err.errors()[0]
        raise ProcsiftError(f"invalid setting {'.'.join(map(str, first['loc']))}: {first['msg']}") from err
    load_bundle(settings.model)  # a bad bundle is one clear line here, before the server starts
    serve(settings)
    return 0
