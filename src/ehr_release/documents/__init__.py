"""The documents a release carries: the internal certificate, the recipient's datasheet,
their rendering and plain words, and the format documentation.
"""
