"""The release flow's stages as thin Prefect tasks around plain functions: ingest, the
algorithm's stages, history, certify, publish, and the retry and redaction rules they
share.
"""
