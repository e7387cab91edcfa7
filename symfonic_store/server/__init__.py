"""The approval service (SPEC §9): an HTTP API and a web inbox where the approver is the
authenticated principal, never a name the caller types.

Needs the ``server`` extra: ``pip install '.[server]'`` in a checkout. Run it with
``symfonic-store serve``, or build the ASGI app yourself::

    from symfonic_store import InterruptStore
    from symfonic_store.server import TokenAuth, create_app

    app = create_app(InterruptStore(url), auth=TokenAuth("tokens.json"))
"""

from __future__ import annotations

import importlib.util

_NEEDED = {
    "starlette": "starlette",
    "jinja2": "jinja2",
    "itsdangerous": "itsdangerous",
    "jwt": "PyJWT",
    "prometheus_client": "prometheus-client",
}
_missing = [dist for module, dist in _NEEDED.items() if importlib.util.find_spec(module) is None]
if _missing:
    raise ImportError(
        f"the approval service needs {', '.join(_missing)}, which is not installed: "
        "pip install '.[server]' in a checkout of symfonic-store"
    )

from .app import create_app  # noqa: E402
from .approvals import interrupt_digest  # noqa: E402
from .auth import JwtAuth, SignedIn, TokenAuth, TrustedHeaderAuth  # noqa: E402
from .limits import RateLimits  # noqa: E402
from .policy import Policy, Rule  # noqa: E402
from .principal import Principal  # noqa: E402

__all__ = [
    "JwtAuth",
    "Policy",
    "Principal",
    "RateLimits",
    "Rule",
    "SignedIn",
    "TokenAuth",
    "TrustedHeaderAuth",
    "create_app",
    "interrupt_digest",
]
