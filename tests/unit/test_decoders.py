"""What a decoded record value holds in memory: its bytes, not the encoder's buffer."""

from __future__ import annotations

import tracemalloc

from service.wire.formats import DECODERS


def test_small_json_values_hold_only_their_bytes():
    decode = DECODERS["json"]
    tracemalloc.start()
    try:
        values = [decode({"n": i}, "value") for i in range(2000)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert values[7] == b'{"n":7}'
    assert held < 2000 * 200  # orjson's own output would hold about 4 KiB each
