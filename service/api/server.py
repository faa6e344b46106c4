"""Running the API with uvicorn: in the foreground (`procsift serve`) or beside the daemon loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import uvicorn

from procsift.collector.errors import ProcsiftError
from procsift.models import Bundle
from procsift.service.api.app import create_app
from procsift.service.api.settings import Settings
from procsift.service.live import LiveLink

__all__ = ["serve", "start_in_thread", "ApiThread"]


def serve(settings: Settings) -> None:
    """Serve the prediction API until interrupted."""
    app = create_app(settings)
    print(f"procsift: serving on http://{settings.host}:{settings.port}/ (model: {settings.model or 'bundled default'})",
          flush=True)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")


class ApiThread:
    """uvicorn in a daemon thread; stop() ends it."""

    def __init__(self, server: uvicorn.Server) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.run, name="procsift-api", daemon=True)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask uvicorn to exit and wait for it."""
        self.server.should_exit = True
        self.thread.join(timeout)


def start_in_thread(host: str, port: int, bundle: Bundle | Callable[[], Bundle], live: LiveLink,
                    token_file: str, timeout: float = 10.0) -> ApiThread:
    """Start the full API (prediction, live, control, dashboard) beside a running daemon."""
    get = bundle if callable(bundle) else (lambda: bundle)
    settings = Settings(host=host, port=port, token_file=token_file)
    app = create_app(settings, bundle=get, live_link=live)  # type: ignore[arg-type]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    handle = ApiThread(server)
    handle.thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not handle.thread.is_alive() or time.monotonic() > deadline:
            raise ProcsiftError(f"the API could not listen on {host}:{port} (port in use?); "
                                "use --port, or --no-api")
        time.sleep(0.05)
    print(f"procsift: API and dashboard on http://{host}:{port}/", flush=True)
    return handle
