"""Governance: the identity behind a decision, what is worth publishing, release
pseudonyms and the audit's integrity check.
"""
