"""Transactions: a directory that changes all at once or not at all (the
face of :mod:`asyncfs._transactions`; docs/transactions.md)."""

from ._transactions import Transaction

__all__ = ["Transaction"]
