"""Comparing candidate releases of one dataset: the grid and ranking, the written
comparison file and its report.
"""
