"""How statements run on a connection: the executor contract and SQLAlchemy Core
(:mod:`.base`), the fast path on a driver's cursor (:mod:`.cursor`, with SQLite's), and
PostgreSQL's (:mod:`.postgres`). Which one a connection gets is its backend's choice
(:meth:`symfonic_store.db.backends.base.Backend.executor`)."""
