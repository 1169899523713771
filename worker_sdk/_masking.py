"""Database passwords never reach a line the SDK logs.

The outbox relay works on the caller's database: a driver error, or a
coordinator's answer quoting a URL, can carry ``user:password@`` or a libpq
``password=...``. Every line it logs goes through :func:`mask_credentials`.
(The coordinator has its own copy of this rule: the SDK never imports it.)
"""

from __future__ import annotations

import re

MASK = "***"

# scheme://user:password@host — the password runs to the last '@' before a blank
# or a quote, so an unescaped '@' inside it is masked as well.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s'\"]*:)[^\s'\"]*@")
# libpq keyword form: password=secret (optionally quoted).
_DSN_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s&;,]+)", re.I)


def mask_credentials(text: object) -> str:
    """``str(text)`` with every URL or connection-string password replaced by ``***``."""
    shown = str(text)
    if "://" not in shown and "password" not in shown.lower():
        return shown
    shown = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", shown)
    return _DSN_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", shown)


__all__ = ["MASK", "mask_credentials"]
