"""Embedding tables that live on the parameter servers (`layer.Embedding`) and how a process
supplies their rows (`feed.py`: worker minibatches; `tables.py`: naming, specs, trained rows)."""
