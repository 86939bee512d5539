"""Declared parameters and what they carry: constraints that word their own message,
the inputs a run's parameters name loaded once, and a comparison's store of
comparator releases.
"""
