"""The text of a file the store or its server is configured with (``--tokens``, ``--policy``).

Both are read the same way, so both refuse the same way: a message that names the file.
"""

from __future__ import annotations

from pathlib import Path

from .errors import InvalidInputError


def read_config_text(path: str | Path, field: str) -> str:
    """The UTF-8 text of the file at ``path``; ``field`` names it in the error.

    Raises:
        InvalidInputError: the file cannot be read, or is not UTF-8 text.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(field, f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InvalidInputError(field, "is not UTF-8 text") from None
