"""A PostgreSQL schema migrated once per test run and restored into a fresh schema per test.

Alembic's upgrade costs 0.3-1 s a schema on PostgreSQL; restoring what ``pg_dump`` captured
of the migrated template (tables, sequences, indexes, the append-only trigger functions and
their triggers, the version row) costs a fifth of that. The template's name is unique and
long, so renaming it in the dump's text renames every reference, the ``SET search_path`` of
the functions included. Without a usable ``pg_dump`` (none on PATH, or older than the
server) each copy is migrated by Alembic instead: slower, the same schema.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import sqlalchemy as sa

from symfonic_store import InterruptStore


def schema_url(base: sa.URL, schema: str) -> str:
    """``base`` with its connections' ``search_path`` set to ``schema`` (libpq ``options``)."""
    url = base.update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def capture(base: sa.URL, schema: str) -> str | None:
    """``schema`` as SQL that recreates it, or None when pg_dump cannot say."""
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        return None
    env = dict(os.environ)
    if base.password is not None:
        env["PGPASSWORD"] = str(base.password)
    conninfo = base.set(drivername="postgresql", password=None).render_as_string()
    done = subprocess.run(
        [pg_dump, "--dbname", conninfo, "--schema", schema, "--no-owner", "--no-privileges",
         "--inserts"],
        capture_output=True, text=True, env=env, check=False,
    )
    if done.returncode != 0:
        return None
    # psql's own commands (\\restrict) are not SQL; the comments are noise.
    lines = [line for line in done.stdout.splitlines() if not line.startswith(("\\", "--"))]
    return "\n".join(lines)


class SchemaTemplate:
    """The migrated template schema and the dump that copies it."""

    def __init__(self, base: sa.URL, name: str, dump: str | None) -> None:
        self.base = base
        self.name = name
        self.dump = dump
        self.checkpointer = False
        # No pool: every restore and drop is one short connection, none left open.
        self.admin = sa.create_engine(base, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)

    @classmethod
    def migrate(cls, base: sa.URL, *, checkpointer: bool = False) -> SchemaTemplate:
        """Migrate a new template schema (with LangGraph's checkpoint tables too when
        ``checkpointer``) and capture it."""
        name = f"symfonic_template_{uuid.uuid4().hex}"
        template = cls(base, name, None)
        template.checkpointer = checkpointer
        with template.admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        template.set_up(schema_url(base, name))
        template.dump = capture(base, name)
        return template

    def set_up(self, url: str) -> None:
        store = InterruptStore(url)
        try:
            store.setup()
            if self.checkpointer:
                store.checkpointer().setup()
        finally:
            store.close()

    def copy(self, schema: str) -> str:
        """Create ``schema`` at head (restored, or migrated without a dump); its URL."""
        url = schema_url(self.base, schema)
        with self.admin.connect() as conn:
            if self.dump is None:
                conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            else:
                # One transaction, its commit not waited on: the copy is a test's scratch.
                sql = self.dump.replace(self.name, schema)
                raw = conn.connection.driver_connection
                assert raw is not None
                raw.execute(f"BEGIN; SET LOCAL synchronous_commit = off; {sql}; COMMIT;")
        if self.dump is None:
            self.set_up(url)
        return url

    def drop_copy(self, schema: str) -> None:
        with self.admin.connect() as conn:
            conn.exec_driver_sql("SET synchronous_commit = off")
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')

    def drop(self) -> None:
        self.drop_copy(self.name)
        self.admin.dispose()
