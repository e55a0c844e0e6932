"""The `osmo` command-line client."""
