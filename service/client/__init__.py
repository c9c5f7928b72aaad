"""brokergate's Python client: ``GatewayClient`` and its consumers (see ``gateway_client``)."""

from .gateway_client import *  # noqa: F403  (its __all__: every public name of the client)
from .gateway_client import __all__ as __all__
