"""View models of the status pages: plain dataclasses built from the selectors of ``workflows`` and
``scheduler``, one module per page family. Views only hand them to templates."""
