"""A release on its way out: the bundle parked for the reviewer and its verification
wherever it happens.
"""
