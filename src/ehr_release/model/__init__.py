"""The data model every stage shares: the one ``Dataset`` every reader gives, code
hierarchies, the map-function contract and the shapes of the verify and evaluate reports.
"""
