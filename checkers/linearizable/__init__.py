"""Linearizability checker: Wing & Gong search, Lowe's cache, P-compositionality.

Public API (see docs/checkers-linearizable.md):

- ``check_events(events, model, *, time_limit=None, partition=True) -> dict``: docs/ARCHITECTURE.md's
  result object for a history given as event dicts.
- ``MODELS``: name -> `Model` (``register``, ``cas-register``, ``kv``, ``log``).
- ``Model``: the record of pure functions a model is.
"""

from checkers.linearizable.check import analyse, check_events
from checkers.linearizable.models import MODELS, Model, get_model

__all__ = ["MODELS", "Model", "analyse", "check_events", "get_model"]
