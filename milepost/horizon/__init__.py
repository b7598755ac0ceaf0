"""The horizon score: how long a task (in atomic steps of goal distance) a policy finishes, with an interval.

- ``estimator``: the logistic (METR's form) and per-step reliability fits, the hierarchical bootstrap, intervals.
- ``suites``: the fixed, versioned task suites (``tiny``, ``standard``) and their pinned content hashes.
- ``report``: play a suite through the evaluation runner and write ``horizon.md`` / ``.png`` / ``.json``.
- ``compare``: several reports side by side and whether their horizons differ.
- ``coverage``: the closed form of the format-error noisy oracle and the interval's coverage by simulation.

``milepost horizon`` (``cli/horizon.py``) is the command line over these.
"""
