"""What the scheduler app reads of a pool through the ORM, for the solver, the placement cycle and the
pages: the solver's snapshot of the nodes and what they hold (``snapshot``), and the pool's domain
tree with its totals (``domains``; the totals kept between reads in ``domain_totals``). Reads only:
writes go through :mod:`scheduler.services`. Layered by import-linter: ``domains`` on
``domain_totals`` on ``snapshot``."""
