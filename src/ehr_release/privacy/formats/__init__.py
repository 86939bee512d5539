"""The verifiers' closed-world declarations of every release format, one module a family.

Each module holds ``SCHEMA`` (a :class:`~ehr_release.privacy.closed_world.ReleaseSchema`):
the exact files, fields and value types a release of that format may hold, with the
closed-world review of every field in ``fields_doc`` ("could an attacker who knows the
model's background knowledge use this to narrow a patient?"). They live on the verifier's
side of the wall: the algorithms never import them, so a format change in an algorithm is
caught here instead of being silently accepted.
"""
