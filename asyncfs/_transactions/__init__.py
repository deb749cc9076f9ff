"""Transactions: a directory that changes all at once or not at all
(:mod:`.transaction`), staged by the plugin's own transaction ops
(:mod:`.staging`) or, on any plugin, in a sibling directory with a journal,
locks and recovery (:mod:`.generic`); docs/transactions.md.
"""

from .transaction import Transaction

__all__ = ["Transaction"]
