"""The scheduler app's SQL that the ORM cannot say, one function per statement, each with the reason.
Everything else of the app reads and writes through the ORM (``tests/test_architecture.py`` fails on
raw SQL outside the apps' ``sql`` modules, ``osmo/bulk.py`` and ``osmo/beat.py``).

Row versions. A pool's node rows are kept per process (the solver's snapshot, the domain totals of
the pool page) and read again only when their version moved. The version of a row is PostgreSQL's
own: every INSERT or UPDATE writes a new row version at a new place (``ctid``) by some transaction
(``xmin``), and the version it replaces stays where it was until vacuumed, so the (ctid, xmin) pair
of the visible version changes with any write, a second write by the same transaction included.
Hashed and summed with the count by the database: ~10 ms on 20,000 nodes (hashing every column
instead costs ~50 ms). System columns are no model fields, so the ORM can carry them only as a raw
expression (:func:`node_row_version`, which the read of a bucket's rows puts in an ORM query). The
two aggregates every cycle and every pool page run over a pool's versions are written out here:
built by the ORM around that expression they cost 0.6-0.75 ms more of the process's CPU per call
(0.07-0.1 ms as SQL; 2,304 nodes, ``docs/benchmarks-log.md``) for a statement that stays raw anyway.

A version column of our own was considered instead and not taken: every writer of a node row (the
Kubernetes and inventory syncs' ``QuerySet.update`` and bulk writes, the admin, the services) would
have to move it, and a writer that forgets makes kept state silently stale; a trigger moving it runs
for every node row written (a sync writes thousands) to record what PostgreSQL records anyway. The
ctid/xmin pair has one weakness, which is harmless here: ``VACUUM FULL`` or ``CLUSTER`` rewrite rows
at new places without a write, so a kept state is read again once more than needed.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import BigIntegerField
from django.db.models.expressions import RawSQL

from scheduler.models import Node, PoolEpoch

_NODE_ROW_VERSION = "hashtextextended(ctid::text || ':' || xmin::text, 0)"  # one row's version


def node_row_version() -> RawSQL:
    """One node row's version (see the module), as an expression for ORM queries of
    :class:`~scheduler.models.Node`: a hash of its ``ctid`` and ``xmin``. Raw: system columns are
    not model fields. PostgreSQL only."""
    return RawSQL(_NODE_ROW_VERSION, (), output_field=BigIntegerField())


def nodes_version(pool_id: int) -> tuple[int, int]:
    """The count of the pool's node rows and the sum of their versions, one aggregate. Raw: the row
    version (see the module). PostgreSQL only."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), coalesce(sum({_NODE_ROW_VERSION}), 0) FROM {Node._meta.db_table} "
                       "WHERE pool_id = %s", [pool_id])
        count, total = cursor.fetchone()
    return int(count), int(total)


def node_buckets(pool_id: int, bucket_ids: int) -> dict[int, tuple[int, int]]:
    """The pool's node rows per bucket of ``bucket_ids`` consecutive ids: bucket -> (count, sum of
    their versions), one grouped aggregate. Raw: the row version (see the module). PostgreSQL only."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id / %s, count(*), sum({_NODE_ROW_VERSION}) FROM {Node._meta.db_table} "
                       "WHERE pool_id = %s GROUP BY 1", [bucket_ids, pool_id])
        return {int(bucket): (int(count), int(total)) for bucket, count, total in cursor.fetchall()}


def pool_epochs_bump(pool_ids: Iterable[int], *, inventory: bool) -> None:
    """Move each pool's capacity epoch on by one (and its inventory epoch, with ``inventory``),
    creating its epoch row at 1 when there is none: one upsert per pool, which takes only the epoch
    row's lock. Raw: the ORM's upsert (``bulk_create(update_conflicts=...)``) sets a conflicting row
    to the new values and cannot add to them, and an ``F()`` update needs the row to exist (a
    ``get_or_create`` first is a second statement and a race between two first bumps)."""
    table = PoolEpoch._meta.db_table
    sql = (
        f"INSERT INTO {table} (pool_id, capacity_epoch, inventory_epoch) VALUES (%s, 1, %s) "
        f"ON CONFLICT (pool_id) DO UPDATE SET capacity_epoch = {table}.capacity_epoch + 1, "
        f"inventory_epoch = {table}.inventory_epoch + excluded.inventory_epoch"
    )
    with connection.cursor() as cursor:
        for pool_id in pool_ids:
            cursor.execute(sql, [pool_id, 1 if inventory else 0])
