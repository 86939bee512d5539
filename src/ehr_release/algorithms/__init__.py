"""The anonymizers, one package per family: pure, typed code with no I/O and no Prefect; the
verifiers in :mod:`ehr_release.privacy` share none of it.
"""
