"""The independent side: each family's verifier, closed-world formats and attacks on the
published bytes. Shares no code with :mod:`ehr_release.algorithms`.
"""
