"""Pools and resources: the pools you may use, and their nodes with capacity, use and free room."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mcp_server.registry import tool
from osmo.errors import ConflictError, NotFoundError
from osmo.types import User
from scheduler import selectors
from scheduler.api.serializers import NodeOutputSerializer, PoolOutputSerializer
from scheduler.api.views import pool_named
from scheduler.services import access

NODES_DEFAULT = 100
NODES_MAX = 500


@tool("osmo_search_pools", title="Your pools")
def pool_list(user: User, search: Annotated[str | None, Field(
        description="Only pools whose name or description contains this text (any case)")] = None) -> dict[str, Any]:
    """The pools you may see and submit to (`osmo pool list`): status, backend, topology keys (coarsest
    first), GPU/CPU totals (capacity, reserved, free) and the teams' quotas."""
    pools_query = access.pools_visible(selectors.pool_list(), user=user)
    pools = [pool for pool in pools_query
             if not search or search.lower() in f"{pool.name}\n{pool.description}".lower()]
    totals = {pk: value.as_dict() for pk, value in selectors.pools_totals(pool.pk for pool in pools).items()}
    quotas = selectors.pools_quota_use(pool.pk for pool in pools)
    return {"pools": PoolOutputSerializer(pools, many=True, context={"totals": totals, "quotas": quotas}).data}


@tool("osmo_list_resources", title="Nodes of your pools")
def resource_list(
    user: User,
    pool: Annotated[str | None, Field(description="Only this pool's nodes (default: every pool you may use)")] = None,
    limit: Annotated[int, Field(ge=1, le=NODES_MAX, description="At most this many nodes")] = NODES_DEFAULT,
) -> dict[str, Any]:
    """The nodes (machines) of the pools you may use, each with its labels, its value for each of the pool's
    topology keys, and per resource its capacity, used, reserved and free amounts. ``truncated`` says that
    more nodes exist than ``limit`` let through (``count`` is the total)."""
    if pool is not None:  # 404 naming it, 403 without access: as GET /api/pools/<pool>/nodes/
        if "\x00" in pool:  # PostgreSQL refuses NUL in a query; no pool has one
            raise NotFoundError(f"Pool {pool!r} not found.", details={"pool": pool})
        pools = [pool_named(pool, user)]
    else:
        pools = list(access.pools_visible(selectors.pool_list(), user=user))
    nodes: list[dict[str, Any]] = []
    count = 0
    for each in pools:
        queryset = selectors.node_list(pool=each).select_related("pool")
        count += queryset.count()
        room = limit - len(nodes)
        if room > 0:
            nodes.extend(NodeOutputSerializer(queryset[:room], many=True,
                                              context={"keys": selectors.pool_keys(each)}).data)
    return {"count": count, "truncated": count > len(nodes), "nodes": nodes}


@tool("osmo_get_resource", title="One node")
def resource_get(
    user: User,
    node: Annotated[str, Field(description="The node's name, as osmo_list_resources shows it")],
    pool: Annotated[str | None, Field(description="Its pool, when nodes of several of your pools share the "
                                                  "name")] = None,
) -> dict[str, Any]:
    """One node of a pool you may use: labels, domains, and per resource its capacity, used, reserved and
    free amounts (`osmo pool nodes`). A node of a pool you may not use is not found, as on the API."""
    if "\x00" in node or (pool is not None and "\x00" in pool):  # PostgreSQL refuses NUL in a query
        raise NotFoundError(f"Node {node!r} not found.", details={"node": node})
    pools = [pool_named(pool, user)] if pool is not None else list(
        access.pools_visible(selectors.pool_list(), user=user))
    found = list(selectors.node_queryset_with_usage().filter(name=node, pool__in=pools).select_related("pool")
                 .order_by("pool__name"))
    if not found:
        where = f" in pool {pool!r}" if pool is not None else " in the pools you may use"
        raise NotFoundError(f"Node {node!r} not found{where}.", details={"node": node, **({"pool": pool} if pool
                                                                                       else {})})
    if len(found) > 1:
        names = [row.pool.name for row in found]
        raise ConflictError(f"Nodes named {node!r} are in pools {', '.join(names)}: name the pool.",
                            details={"node": node, "pools": names})
    keys = selectors.pool_keys(next(each for each in pools if each.pk == found[0].pool_id))
    return NodeOutputSerializer(found[0], context={"keys": keys}).data
