"""Credentials never reach a log line or an error message.

A database URL may carry a password (``postgresql://user:secret@host/db``).
Every place that shows a URL renders it with :func:`display_url`; the log
handlers the coordinator installs pass every formatted line through
:func:`mask_credentials` as well, so a URL that slips into an exception text
(a driver error, a traceback) is masked too.
"""

from __future__ import annotations

import re

import sqlalchemy as sa

MASK = "***"

# scheme://user:password@host — the password runs to the last '@' before a blank
# or a quote, so an unescaped '@' inside it is masked as well.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s'\"]*:)[^\s'\"]*@")
# libpq keyword form: password=secret (optionally quoted).
_DSN_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s&;,]+)", re.I)


def mask_credentials(text: str) -> str:
    """``text`` with every URL or connection-string password replaced by ``***``."""
    if "://" not in text and "password" not in text.lower():
        return text
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", text)
    return _DSN_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)


def display_url(url: str) -> str:
    """``url`` as it may be shown to a person: the password, if any, is ``***``."""
    try:
        shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError, TypeError):
        # Not a URL SQLAlchemy can read (a libpq multi-host URL, say): the user
        # name stays, the password (up to the last '@') is hidden.
        if "@" not in url:
            return mask_credentials(url)
        head, tail = url.rsplit("@", 1)
        scheme, sep, userinfo = head.partition("://")
        if not sep:
            scheme, userinfo = "", head
        user, colon, _ = userinfo.partition(":")
        shown = f"{scheme}://{user}" if sep else user
        return mask_credentials(f"{shown}{':' + MASK if colon else ''}@{tail}")
    # Query-string credentials (?password=...) are not part of the URL's password.
    return mask_credentials(shown)


__all__ = ["MASK", "display_url", "mask_credentials"]
