"""The table of operations both stores share: every public method, written once.

Each public store method is a *plan* (:mod:`.plan`): a generator function with the
method's own signature and docstring, which validates its arguments, then yields the
steps it needs and returns the method's result. The plans are grouped by concept, one
module each, and composed here into :class:`Operations`:

- :mod:`.marker_ops`: the seed marker's life (mint, route, resume, expire, refusals);
- :mod:`.native_ops`: LangGraph's own interrupts, their claims and settlements;
- :mod:`.sweep_ops`: the sweep, the wake-ups it owes, the projection's rebuild;
- :mod:`.read_ops`: state, pending lists, history, the event stream, audit, verify;
- :mod:`.evidence_ops`: signed checkpoints, chains and archives;
- :mod:`.vote_ops`: assignment and quorum votes (on the marker's plans: a deciding vote
  resumes a marker);

all on :class:`~.settings.Settings` (the TTL, the payload limit, the rules). The two
stores drive the same plans through one runner (:mod:`.runner`), and
``copy_face`` gives each store method its plan's signature and docstring, so the two
public surfaces cannot drift. Adding an operation: write its plan in the module of its
concept, then name it once in each store (``sync.py``, ``aio.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from .evidence_ops import EvidenceOps
from .marker_ops import MarkerOps
from .native_ops import NativeOps
from .plan import Plan
from .read_ops import ReadOps
from .sweep_ops import SweepOps
from .vote_ops import VoteOps

T = TypeVar("T")
P = ParamSpec("P")


class Operations(VoteOps, MarkerOps, NativeOps, SweepOps, ReadOps, EvidenceOps):
    """The store's settings and every public operation, as plans (see the module doc).

    Raises (every method): :class:`~symfonic_store.InvalidInputError` for a bad argument,
    before anything is written.
    """


PlanFn = Callable[Concatenate[Operations, P], Plan[T]]
"""A plan as the stores name it: an unbound method of :class:`Operations`."""

__all__ = ["Operations", "PlanFn"]
