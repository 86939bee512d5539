"""Where work runs: the CPUs this process may use and GenDiag's workers.
"""
