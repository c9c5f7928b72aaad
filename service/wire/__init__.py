"""The v2 JSON wire's codecs, the data plane's hot path: records to and from v2 JSON
(``records``), how keys, values and headers travel inside it (``formats``), the common produce
body read without a JSON parser (``values_body``), and the timestamps a client sends
(``timestamps``). The models that document the same shapes are in ``api_schemas``."""
