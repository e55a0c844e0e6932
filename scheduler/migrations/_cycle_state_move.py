"""Moving the placement cycle's state from the scheduler's ``scheduler_pool.cycle_state`` column into the
workflows app's ``workflows_poolcyclestate`` table, shared by the scheduler's migration 0022 and the
workflows app's 0023 (not a migration itself: the loader skips modules whose name starts with ``_``).

Neither app's migrations may depend on a later migration of the other (migrating one app back alone, as
tests of older migrations do, would then need the other's too), so the two run in either order. Each
step therefore does what is left to do: the rows are copied and the column dropped once both the table
and the column exist (by whichever of the two migrations comes second), and going back the column comes
back, holding the table's rows, whenever either is undone."""

from django.db import models

TABLE = "workflows_poolcyclestate"
COPY = (f"INSERT INTO {TABLE} (pool_id, state) SELECT id, cycle_state FROM scheduler_pool "
        f"WHERE cycle_state IS NOT NULL AND id NOT IN (SELECT pool_id FROM {TABLE})")
COPY_BACK = (f"UPDATE scheduler_pool SET cycle_state = (SELECT state FROM {TABLE} WHERE pool_id = scheduler_pool.id) "
             f"WHERE id IN (SELECT pool_id FROM {TABLE})")


def _column() -> models.JSONField:
    field = models.JSONField(null=True, blank=True)
    field.set_attributes_from_name("cycle_state")
    return field


def _exists(schema_editor) -> tuple[bool, bool]:
    """Whether the table and the column exist."""
    introspection = schema_editor.connection.introspection
    with schema_editor.connection.cursor() as cursor:
        tables = set(introspection.table_names(cursor))
        columns = {column.name for column in introspection.get_table_description(cursor, "scheduler_pool")}
    return TABLE in tables, "cycle_state" in columns


def move_out(apps, schema_editor) -> None:
    """Copy the column's states into the table and drop the column, once both exist."""
    table, column = _exists(schema_editor)
    if table and column:
        schema_editor.execute(COPY)
        schema_editor.remove_field(apps.get_model("scheduler", "Pool"), _column())


def move_back(apps, schema_editor) -> None:
    """The column back (when gone), holding the table's states (when it exists)."""
    table, column = _exists(schema_editor)
    if not column:
        schema_editor.add_field(apps.get_model("scheduler", "Pool"), _column())
    if table:
        schema_editor.execute(COPY_BACK)
