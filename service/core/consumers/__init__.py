"""Consumer instances: the ``ConsumerService`` façade (``service``), the instances as the ports
hold them (``instances``) and their polls (``polls``)."""

from .polls import Allowance, Batch, Blocked, Polled
from .service import ConsumerService, ShareHooks

__all__ = ["Allowance", "Batch", "Blocked", "ConsumerService", "Polled", "ShareHooks"]
