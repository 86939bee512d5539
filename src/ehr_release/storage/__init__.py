"""Persistence (SQLModel): datasets, runs and their results, approvals, artifacts, audit."""
