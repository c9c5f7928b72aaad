"""An external schema registry, reached over Confluent's REST API (``http.HttpSchemaRegistry``)."""

from .http import HttpSchemaRegistry
from .options import RegistryClientOptions

__all__ = ["HttpSchemaRegistry", "RegistryClientOptions"]
