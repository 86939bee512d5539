"""The Prefect flows: a release (ingest to park), its publication after a decision, a
comparison, and the local server and launcher they run under.
"""
