"""LangGraph glue: the seed's marker protocol in a graph, and waking expired graphs.

Importing this package imports LangGraph and LangChain; ``import symfonic_store``
alone does not (its integration names load this package on first use).
"""

# The package's public names; the demo imports the same list, deliberately.
from ..protocol import expired_resume_value
from .gateway import InterruptGateway
from .marker import (
    GraphCallable,
    InterruptRequest,
    InterruptState,
    create_interrupt_node,
    create_tools_node,
    make_interrupt_router,
    request_interrupt,
)
from .wakers import awaiting_on, make_async_graph_waker, make_graph_waker, waiting_on

__all__ = [
    "GraphCallable",
    "InterruptGateway",
    "InterruptRequest",
    "InterruptState",
    "awaiting_on",
    "create_interrupt_node",
    "create_tools_node",
    "expired_resume_value",
    "make_async_graph_waker",
    "make_graph_waker",
    "make_interrupt_router",
    "request_interrupt",
    "waiting_on",
]
