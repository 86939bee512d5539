"""A release request and its plan: the request as given, the intake that reads its input
and opens the run, and the plan every task is handed.
"""
