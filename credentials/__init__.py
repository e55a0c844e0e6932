"""The per-user credential store (docs/design.md §15): generic key/values, registry and data
credentials, encrypted at rest with Fernet keys from ``OSMO_CREDENTIALS_KEYS``, never answered by the
API. Below ``workflows`` and ``scheduler`` (the submission check and the dispatch read it); it imports
neither."""
