"""Single-row writes for the hot path of A2A calls (the task services, and the team router's
hops), and the one read a team call makes (its members' health), without the ORM building
each statement anew.

Every A2A message writes at least three rows (the task, its compare-and-set update, the
event), on the database thread every A2A call of a process shares or on the event loop's own
connection (``relay_project.loop_database``, ``relay_project.loop_sqlite``). The ORM spends
0.2 to 0.5 ms of CPU building each of these statements, several times what the database
takes to run them. These helpers run the same statements: the SQL text is made once per
model and set of columns, and each value is prepared by its field exactly as the ORM
prepares it (``pre_save`` and ``get_db_prep_save`` for values written, ``get_db_prep_value``
for values compared), so SQLite and PostgreSQL receive what ``save()`` and ``update()``
would send them. No model signals are sent: use them only for models without receivers.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model


def _connection():
    """The default database's connection of this thread, looked up once per statement: every
    use of ``django.db.connection`` looks it up again (a context-local read), and preparing
    a row's values uses it once or twice a column."""
    return connections[DEFAULT_DB_ALIAS]


@cache
def _preparing():
    """A connection object of the default database that only prepares values and never
    connects, one for the process. In async code Django keeps a connection object per task
    (asgiref's context-local storage), so every call's job made one of its own, with its
    operations, features and introspection, just to ask how to prepare a value: 20-40 µs a
    call. Preparing a value needs nothing of a connection's state."""
    return connections.create_connection(DEFAULT_DB_ALIAS)


def vendor() -> str:
    """The default database's vendor ("postgresql", "sqlite"), without looking up a
    connection."""
    return _preparing().vendor


_COMMIT_WITHOUT_DISK_WAIT = "set_config('synchronous_commit', 'off', true)"
"""Evaluated by a statement, turns the disk wait off for its transaction alone: PostgreSQL
reads the setting at commit."""


def insert(instance: Model, *, wait_for_disk: bool = True) -> None:
    """Inserts ``instance`` as ``save(force_insert=True)`` would; an automatic primary key
    left unset is read back. ``wait_for_disk`` as for ``update_then_insert`` (PostgreSQL
    only; other databases ignore it)."""
    db = _connection()
    model = type(instance)
    pk = model._meta.pk
    read_pk = getattr(instance, pk.attname) is None
    lazy = not wait_for_disk and db.vendor == "postgresql"
    sql, fields = _insert_statement(model, read_pk, lazy)
    params = _saved_values(db, fields, instance)
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        if read_pk:
            if db.features.can_return_columns_from_insert:
                value = cursor.fetchone()[0]
            else:
                value = db.ops.last_insert_id(cursor, model._meta.db_table, pk.column)
            setattr(instance, pk.attname, value)
    stored([instance])


def insert_many(instances: Sequence[Model]) -> None:
    """Inserts ``instances`` (one model, automatic primary keys left unset and unread) as
    ``bulk_create`` would, in as few statements as the database takes parameters for: a burst
    of a stream's events, without the ORM's compiler building the statement anew for every
    burst."""
    with _connection().cursor() as cursor:
        for sql, params in insert_many_queries(instances):
            cursor.execute(sql, params)
    stored(instances)


def insert_many_queries(instances: Sequence[Model]) -> list[tuple[str, list[Any]]]:
    """The statements, and their parameters, that ``insert_many`` runs for ``instances``;
    once they ran, ``stored`` marks the instances saved."""
    db = _preparing()
    model = type(instances[0])
    fields = _inserted_fields(model)
    batch = db.ops.bulk_batch_size(fields, instances) or len(instances)
    queries = []
    for start in range(0, len(instances), batch):
        chunk = instances[start : start + batch]
        params = [value for instance in chunk for value in _saved_values(db, fields, instance)]
        queries.append((_insert_many_statement(model, len(chunk)), params))
    return queries


def insert_query(instance: Model, *, wait_for_disk: bool = True) -> tuple[str, list[Any]]:
    """PostgreSQL only: the statement, and its parameters, that ``insert`` runs for an
    instance whose primary key is set. It returns one row (``fetchone``); once it ran,
    ``stored`` marks the instance saved. Prepared as ``update_then_insert_query`` prepares
    its parameters."""
    sql, fields = _insert_statement(type(instance), False, not wait_for_disk, returns_row=True)
    return sql, _saved_values(_preparing(), fields, instance)


def _saved_values(db, fields: Sequence[Field], instance: Model) -> list[Any]:
    """The values of ``fields`` of ``instance`` as ``save()`` prepares them for ``db``."""
    return [field.get_db_prep_save(field.pre_save(instance, True), db) for field in fields]


def update(model: type[Model], *, where: dict[str, Any], values: dict[str, Any]) -> int:
    """``UPDATE`` the rows whose ``where`` fields equal the given values (none of them None)
    with ``values``; returns how many rows changed. With the expected state in ``where``,
    a compare-and-set, as ``filter(**where).update(**values)``."""
    with _connection().cursor() as cursor:
        cursor.execute(*update_query(model, where=where, values=values))
        return cursor.rowcount


def update_query(
    model: type[Model], *, where: dict[str, Any], values: dict[str, Any]
) -> tuple[str, list[Any]]:
    """The statement, and its parameters, that ``update`` runs."""
    sql, written, compared = _update_statement(model, tuple(values), tuple(where))
    return sql, _update_params(_preparing(), written, compared, values, where)


def _update_params(
    db, written: list[Field], compared: list[Field], values: dict[str, Any], where: dict[str, Any]
) -> list[Any]:
    """The parameters of ``_update_statement``: values written as ``save()`` prepares them,
    values compared as a filter does."""
    params = [
        field.get_db_prep_save(value, db)
        for field, value in zip(written, values.values(), strict=True)
    ]
    params += [
        field.get_db_prep_value(value, db, prepared=False)
        for field, value in zip(compared, where.values(), strict=True)
    ]
    return params


def update_then_insert_query(
    model: type[Model],
    *,
    where: dict[str, Any],
    values: dict[str, Any],
    instances: Sequence[Model],
    notify: tuple[str, str] | None = None,
    notify_if: str | None = None,
    wait_for_disk: bool = True,
) -> tuple[str, list[Any]]:
    """PostgreSQL only: the statement, and its parameters, that runs ``update`` (a
    compare-and-set with the expected state in ``where``) and, only when it changed a row,
    the inserts of ``instances`` (one model; automatic keys left unread) and a NOTIFY on
    ``notify`` (channel, payload): atomic on its own and one round trip, where a transaction
    of them costs four or more (BEGIN and COMMIT included). It returns one row when the row
    was changed, none otherwise (``fetchone`` runs it here; once it changed the row,
    ``stored`` marks the instances saved). With ``notify_if`` (a column of ``model``), the
    NOTIFY is sent only when the updated row holds more than zero there.

    Not ``wait_for_disk``: the statement's commit does not wait for PostgreSQL to flush it to
    disk (``synchronous_commit`` off for this transaction alone). It is as visible and as
    atomic as any other; only a crash of the database server within a fraction of a second
    of it could lose it. Outside a transaction only: in one, it would apply to the whole.

    The parameters are prepared without a connection (``_preparing``): a field prepares a
    value without a round trip."""
    inserted_model = type(instances[0])
    sql, written, compared, inserted = _update_then_insert_statement(
        model,
        tuple(values),
        tuple(where),
        inserted_model,
        len(instances),
        notify is not None,
        notify_if,
        wait_for_disk,
    )
    db = _preparing()
    params = _update_params(db, written, compared, values, where)
    for instance in instances:
        params += _saved_values(db, inserted, instance)
    if notify is not None:
        params += list(notify)
    return sql, params


def fetchone(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    """The first row ``sql`` returns, on this thread's connection."""
    with _connection().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def stored(instances: Sequence[Model]) -> None:
    """Marks ``instances`` as saved in the default database, as ``save()`` leaves them."""
    for instance in instances:
        instance._state.adding = False
        instance._state.db = DEFAULT_DB_ALIAS


@lru_cache(maxsize=256)
def _update_then_insert_statement(
    model: type[Model],
    written: tuple[str, ...],
    compared: tuple[str, ...],
    inserted_model: type[Model],
    count: int,
    notify: bool,
    notify_if: str | None,
    wait_for_disk: bool,
):
    update_sql, written_fields, compared_fields = _update_statement(model, written, compared)
    quote = connection.ops.quote_name
    returned = quote(_field(model, notify_if).column) if notify_if else "1"
    meta = inserted_model._meta
    inserted = _inserted_fields(inserted_model)
    # One INSERT ... SELECT per row, each its own CTE: the values take their columns' types,
    # which a VALUES list of several rows would not give them.
    insert = (
        f"INSERT INTO {quote(meta.db_table)} "
        f"({', '.join(quote(field.column) for field in inserted)}) "
        f"SELECT {', '.join(['%s'] * len(inserted))} FROM moved RETURNING 1"
    )
    stored = ", ".join(f"stored{index} AS ({insert})" for index in range(count))
    last = ["1"]
    if notify:
        announce = "pg_notify(%s, %s)"
        last = [f"CASE WHEN moved.{returned} > 0 THEN {announce} END" if notify_if else announce]
    if not wait_for_disk:
        last.append(_COMMIT_WITHOUT_DISK_WAIT)
    sql = (
        f"WITH moved AS ({update_sql} RETURNING {returned}), {stored} "
        f"SELECT {', '.join(last)} FROM stored{count - 1}, moved"
    )
    return sql, written_fields, compared_fields, inserted


def values_by_pk(
    model: type[Model], pks: Sequence[Any], fields: tuple[str, ...]
) -> list[tuple[Any, ...]]:
    """``(pk, *fields)`` of the rows with these primary keys, in no particular order, as
    ``filter(pk__in=pks).values_list("pk", *fields)`` gives them (each value converted from
    the database as the ORM converts it)."""
    if not pks:
        return []
    db = _connection()
    sql, key, converters = _select_statement(model, fields, len(pks))
    params = [key.get_db_prep_value(pk, db, prepared=False) for pk in pks]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    return [
        tuple(
            _converted(db, value, convert, column)
            for value, (convert, column) in zip(row, converters, strict=True)
        )
        for row in found
    ]


def _converted(db, value: Any, converters: list, column) -> Any:
    for convert in converters:
        value = convert(value, column, db)
    return value


@lru_cache(maxsize=64)
def _select_statement(model: type[Model], fields: tuple[str, ...], count: int):
    meta = model._meta
    quote = connection.ops.quote_name
    selected = [meta.pk, *(_field(model, name) for name in fields)]
    sql = (
        f"SELECT {', '.join(quote(field.column) for field in selected)} "
        f"FROM {quote(meta.db_table)} "
        f"WHERE {quote(meta.pk.column)} IN ({', '.join(['%s'] * count)})"
    )
    converters = []
    for field in selected:
        column = field.get_col(meta.db_table)
        converters.append(
            (connection.ops.get_db_converters(column) + field.get_db_converters(connection), column)
        )
    return sql, meta.pk, converters


@cache
def _insert_statement(
    model: type[Model], read_pk: bool, lazy: bool, *, returns_row: bool = False
) -> tuple[str, Sequence[Field]]:
    meta = model._meta
    fields = _inserted_fields(model) if read_pk else meta.concrete_fields
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} "
        f"({', '.join(quote(field.column) for field in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    returned = []
    if read_pk and connection.features.can_return_columns_from_insert:
        returned.append(quote(meta.pk.column))
    if lazy:
        returned.append(_COMMIT_WITHOUT_DISK_WAIT)
    if returns_row and not returned:
        returned.append("1")
    if returned:
        sql += f" RETURNING {', '.join(returned)}"
    return sql, fields


@cache
def _inserted_fields(model: type[Model]) -> tuple[Field, ...]:
    """The columns an insert writes when the database gives the primary key: all but it."""
    meta = model._meta
    return tuple(field for field in meta.concrete_fields if field is not meta.pk)


@lru_cache(maxsize=128)
def _insert_many_statement(model: type[Model], count: int) -> str:
    meta = model._meta
    quote = connection.ops.quote_name
    fields = _inserted_fields(model)
    row = f"({', '.join(['%s'] * len(fields))})"
    return (
        f"INSERT INTO {quote(meta.db_table)} "
        f"({', '.join(quote(field.column) for field in fields)}) "
        f"VALUES {', '.join([row] * count)}"
    )


@lru_cache(maxsize=256)
def _update_statement(
    model: type[Model], written: tuple[str, ...], compared: tuple[str, ...]
) -> tuple[str, list[Field], list[Field]]:
    meta = model._meta
    quote = connection.ops.quote_name
    written_fields = [_field(model, name) for name in written]
    compared_fields = [_field(model, name) for name in compared]
    sql = (
        f"UPDATE {quote(meta.db_table)} SET "
        + ", ".join(f"{quote(field.column)} = %s" for field in written_fields)
        + " WHERE "
        + " AND ".join(f"{quote(field.column)} = %s" for field in compared_fields)
    )
    return sql, written_fields, compared_fields


def _field(model: type[Model], name: str) -> Field:
    return model._meta.pk if name == "pk" else model._meta.get_field(name)
