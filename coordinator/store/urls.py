"""Database URLs: the forms the coordinator accepts, and the libpq string for
the connections it opens without SQLAlchemy (the LISTEN connection).

PostgreSQL URLs may name several hosts, as libpq does for a primary and its
standbys; with ``target_session_attrs=read-write`` a connection goes to
whichever host is the primary now:

* libpq form: ``postgresql://user@db-a:5432,db-b:5432/jobs?target_session_attrs=read-write``
* SQLAlchemy form: ``postgresql+psycopg://user@/jobs?host=db-a:5432&host=db-b:5432&...``

``normalize_url`` turns the first into the second (SQLAlchemy cannot parse a
comma-separated host list in the authority part); every other URL is returned
unchanged.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import sqlalchemy as sa
from psycopg.conninfo import make_conninfo
from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg

_MULTI_HOST = re.compile(
    r"^(?P<scheme>postgres(?:ql)?(?:\+psycopg)?)://"
    r"(?:(?P<userinfo>[^@/?]*)@)?"
    r"(?P<hosts>[^/?@]*,[^/?@]*)"
    r"(?P<rest>[/?].*)?$"
)


def normalize_url(url: str) -> str:
    """``url`` in a form SQLAlchemy can parse (multi-host libpq URLs rewritten)."""
    match = _MULTI_HOST.match(url)
    if match is None:
        return url
    rest = match["rest"] or "/"
    path, _, query = rest.partition("?")
    hosts = "&".join(f"host={quote(h, safe=':[]')}" for h in match["hosts"].split(",") if h)
    userinfo = f"{match['userinfo']}@" if match["userinfo"] is not None else ""
    query = f"{hosts}&{query}" if query else hosts
    return f"postgresql+psycopg://{userinfo}{path or '/'}?{query}"


def sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy URL for ``url``: multi-host URLs rewritten, and PostgreSQL
    URLs without a driver given psycopg 3."""
    url = normalize_url(url)
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def query_options(url: str) -> dict[str, str]:
    """The query options of PostgreSQL ``url`` as libpq reads them: an option
    given more than once is the last one given. SQLAlchemy hands a repeated
    option on as a tuple, whose text psycopg would send; ``host`` is left out
    (several are the SQLAlchemy form of a multi-host URL, which the dialect
    joins itself)."""
    query = sa.engine.make_url(sqlalchemy_url(url)).query
    return {
        name: value[-1] if isinstance(value, tuple) else value
        for name, value in query.items()
        if name != "host"
    }


def libpq_conninfo(url: str) -> str:
    """The libpq connection string psycopg would be given for PostgreSQL ``url``
    (every host, port and query option, such as ``target_session_attrs``, kept;
    options as ``query_options`` reads them)."""
    parsed = sa.engine.make_url(sqlalchemy_url(url))
    _, kwargs = pg_psycopg.dialect().create_connect_args(parsed)
    kwargs.pop("context", None)
    kwargs.update(query_options(url))
    return make_conninfo(**{k: str(v) for k, v in kwargs.items() if v is not None})


__all__ = ["libpq_conninfo", "normalize_url", "query_options", "sqlalchemy_url"]
