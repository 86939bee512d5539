"""What the command line needs beyond calling a service: helpers kept out of ``cli.py``.

Each module does one job for one or more commands (reading a release's declared parameters
for ``verify``, a run id from a prefix, a status as plain lines); ``cli.py`` stays the thin
layer that parses options and prints.
"""
