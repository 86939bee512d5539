"""The ``ehr-release`` command groups, one module per job; :mod:`ehr_release.cli` wires them
into one Typer app. Every module imports only Typer and the standard library at import time,
so parsing a command (and ``--help``) stays quick.
"""
