"""The database layer: schema, URLs, engines, error translation, migrations, statements.

Nothing here knows about interrupts' rules; :mod:`symfonic_store.store` does.
"""
