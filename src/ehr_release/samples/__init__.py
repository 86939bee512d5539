"""Generated patients for demos, tests and benchmarks, in every input layout.
"""
