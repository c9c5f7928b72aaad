"""``brokergate serve``'s uvicorn server, which drains: a stop signal reaches the app at once.

On SIGTERM uvicorn stops accepting connections and waits for the requests in
flight, up to its graceful-shutdown timeout, before the app hears of it (the
lifespan ends only after). A long-poll would hold that wait for its whole
timeout and then be cut off. This server tells the app first
(``service.app.begin_drain``): long-polls and stateless reads answer with what
they have, produces in flight finish, and the process exits well inside a
Kubernetes grace period.
"""

from __future__ import annotations

from types import FrameType

import uvicorn
from fastapi import FastAPI

from .app import begin_drain


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        begin_drain(self._app)
        super().handle_exit(sig, frame)
