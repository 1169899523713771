"""Time-ordered identifiers (UUIDv7 text) for jobs, pauses and lease tokens."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_seq = 0

_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def new_id() -> str:
    """Return a UUIDv7 string; ids from one process sort in creation order."""
    global _last_ms, _seq
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            _seq += 1
            if _seq > 0xFFF:
                _last_ms += 1
                _seq = 0
            ms = _last_ms
        else:
            _last_ms = ms
            _seq = 0
        seq = _seq
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | rand
    # What str(uuid.UUID(int=value)) gives, without building the object.
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def is_valid_id(text: str) -> bool:
    """True when ``text`` has the canonical lower-case UUID form."""
    return bool(_UUID_RE.match(text))


def new_token() -> str:
    """An unguessable lease token."""
    return uuid.uuid4().hex
