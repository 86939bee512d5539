"""Each family's evaluation: utility metrics, tables, charts and trivial baselines.
"""
