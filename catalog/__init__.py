"""Apps: stored, parameterised workflow templates with versions (OSMO's ``osmo app``; docs/design.md §11, "Apps")."""
