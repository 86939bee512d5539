"""The small foundations every layer uses: typed errors, canonical JSON, durable files and
the one source of randomness.
"""
