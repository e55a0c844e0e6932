"""Django admin of the scheduler app, one module per kind of object (Django imports this package and
each module registers its admins):

- :mod:`scheduler.admin.pools`: pools with their topology keys, platforms, grants and team quotas inline in
  order (edit ``position`` to reorder; saving goes through :func:`scheduler.services.pools.pool_keys_set`,
  so a change bumps ``keys_version``) and a read-only hierarchy view (zone > ... > nodes, GPU totals per
  domain: :func:`scheduler.reads.domains.pool_domain_tree`, the tree the status pages draw too);
- :mod:`scheduler.admin.nodes`: nodes with capacity/used/reserved/free columns from the one free-capacity
  query (:func:`scheduler.selectors.node_queryset_with_usage`), a filter per topology key of the selected
  pool, search by name, by any label value or by ``key=value`` (``rack=rack-0003``), cordon/uncordon;
- :mod:`scheduler.admin.backends`: backends (a replace-only, never shown kubeconfig), reservations and
  worker heartbeats.
"""

from scheduler.admin import backends, nodes, pools

__all__ = ["backends", "nodes", "pools"]
