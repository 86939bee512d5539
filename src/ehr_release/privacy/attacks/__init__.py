"""Attack audits: each privacy model's adversary, run on the published bytes.

The verifiers (``privacy/``) check that a release satisfies its formal model; an attack
checks what the model is *for*. Written without the algorithms' code and without the model
checks' code (no imports from ``ehr_release.algorithms`` or from the verifier modules), each
module here reads only the release files plus the original extract, plays the adversary the
model assumes — with every published field, not only those the model talks about — and
reports the smallest candidate set any patient was narrowed to (:class:`AttackReport`).

Exhaustive over patients × knowledge sets where that is feasible; otherwise a seeded sample of
at least :data:`MIN_SAMPLED` knowledge sets plus every set built from rare codes.
"""

from __future__ import annotations

#: The fewest knowledge sets a sampled (non-exhaustive) attack tries.
MIN_SAMPLED = 100_000
#: Beyond this many knowledge sets an attack samples instead of enumerating.
EXHAUSTIVE_LIMIT = 2_000_000
