"""Database URLs: parsing, the drivers the store uses, and masking passwords in text."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from .backends.base import Backend

from ..errors import InvalidInputError

DEFAULT_URL = "sqlite:///symfonic_store.db"




def parse_url(url: str | URL) -> URL:
    """Parse a database URL, failing with an error that never shows the password."""
    # SQLAlchemy loads here, not on import: the command line's --help does without it.
    from sqlalchemy.engine import URL, make_url

    if isinstance(url, URL):
        _check_url_text(url.render_as_string(hide_password=False))
        return _password_out_of_query(url)
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError("database URL", "give a URL such as sqlite:///symfonic_store.db")
    _check_url_text(url)
    try:
        return _password_out_of_query(make_url(url.strip()))
    except Exception:
        raise InvalidInputError(
            "database URL",
            "not a database URL; use sqlite:///path/to/file.db or "
            "postgresql+psycopg://user@host:5432/dbname",
        ) from None


def _password_out_of_query(url: URL) -> URL:
    # libpq also takes the password as a query parameter (`?password=`), which
    # SQLAlchemy's reprs do not mask: move it to where every repr hides it.
    password = url.query.get("password")
    if password is None:
        return url
    from .backends import backend_for_url  # only for such a URL: parsing loads no backend

    backend = backend_for_url(url)
    if backend is None or not backend.password_in_query:
        return url
    if isinstance(password, tuple):
        password = password[-1]  # as libpq does, the last one wins
    return url.difference_update_query(["password"]).set(password=password)


def _check_url_text(text: str) -> None:
    # Drivers and the file system fail on these with errors of their own; say it here.
    if "\x00" in text:
        raise InvalidInputError("database URL", "must not contain NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("database URL", "is not valid Unicode text") from None


def safe_url(url: str | URL) -> str:
    """The URL as text with any password masked: for messages and logs."""
    try:
        return parse_url(url).render_as_string(hide_password=True)
    except InvalidInputError:
        return "<unparseable URL>"


def _backend(url: URL) -> type[Backend]:
    # Imported here: the command line parses URLs without loading the backends.
    from .backends import backend_for_url

    backend = backend_for_url(url)
    if backend is None:
        raise InvalidInputError(
            "database URL",
            f"unsupported database {url.get_backend_name()!r}: symfonic-store runs on SQLite "
            "(sqlite:///file.db) and PostgreSQL (postgresql+psycopg://...)",
        )
    return backend


def sync_url(url: str | URL) -> URL:
    """The URL with the synchronous driver the store uses (pysqlite, psycopg 3)."""
    parsed = parse_url(url)
    return parsed.set(drivername=_backend(parsed).sync_driver)


def async_url(url: str | URL) -> URL:
    """The URL with the asyncio driver the store uses (aiosqlite, psycopg 3 async)."""
    parsed = parse_url(url)
    return parsed.set(drivername=_backend(parsed).async_driver)


def prepare_for(url: URL) -> None:
    """What the URL's backend does before its first engine is made (SQLite: create the
    file's folder)."""
    _backend(url).prepare_url(url)


_PASSWORD_IN_TEXT = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")
_PASSWORD_SETTING = re.compile(r"(\b(?:ssl)?password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def scrub(text: str) -> str:
    """Mask anything that looks like a password in ``text``: in a URL, or ``password=...``."""
    return _PASSWORD_SETTING.sub(r"\1***", _PASSWORD_IN_TEXT.sub(r"\1***@", text))
