"""Push subscriptions through a ``GatewayClient``: what ``brokergate push`` and programs call.

push = PushSubscriptions(client)
created = push.put("orders-to-billing", {"endpoint": "https://billing.example.com/hooks",
                                         "topics": ["orders"]})
created["secret"]   # whsec_…: shown at creation and rotation only
push.pause("orders-to-billing")
"""

from __future__ import annotations

from typing import Any

from .gateway_client import GatewayClient
from .http import url_path


class PushSubscriptions:
    """The push-subscription routes of one gateway (``/v3/clusters/{id}/push-subscriptions``)."""

    def __init__(self, client: GatewayClient) -> None:
        self._client = client

    def _path(self, *segments: str) -> str:
        return url_path("v3", "clusters", self._client.cluster_id(), "push-subscriptions", *segments)

    def list(self) -> list[dict[str, Any]]:
        """The caller's subscriptions (a super user's: all), each with its status."""
        return list(self._client.request("GET", self._path())["data"])

    def get(self, name: str) -> dict[str, Any]:
        return dict(self._client.request("GET", self._path(name)))

    def put(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Create ``name`` with ``spec``, or replace the spec of the caller's ``name``."""
        return dict(self._client.request("PUT", self._path(name), json=spec))

    def pause(self, name: str) -> dict[str, Any]:
        return dict(self._client.request("POST", self._path(name, "pause")))

    def resume(self, name: str) -> dict[str, Any]:
        return dict(self._client.request("POST", self._path(name, "resume")))

    def rotate_secret(self, name: str) -> dict[str, Any]:
        """A new signing secret (in the answer); the previous one is still sent for a day."""
        return dict(self._client.request("POST", self._path(name, "rotate-secret")))

    def delete(self, name: str) -> None:
        self._client.request("DELETE", self._path(name))
