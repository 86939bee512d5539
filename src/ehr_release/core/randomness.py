"""The one place randomness comes from.

Production runs draw from the operating system's CSPRNG; a fixed seed is for tests and
reproducible examples only. Differentially private noise never uses these generators: it
goes through OpenDP (see ``privacy``-path code in ``algorithms/diffgen``), and a seed for DP
noise is refused unless :func:`test_mode` is on.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: parameter checks import this module, not numpy
    import numpy as np

TEST_MODE_ENV = "EHR_RELEASE_TEST_MODE"


def test_mode() -> bool:
    """True when the process runs under the test suite (``EHR_RELEASE_TEST_MODE=1``)."""
    return os.environ.get(TEST_MODE_ENV, "") == "1"


def check_random_state(seed: None | int | np.random.Generator) -> np.random.Generator:
    """Turn ``None | int | Generator`` into a numpy Generator.

    ``None`` seeds from :mod:`secrets` (OS entropy), so two production runs never share a
    stream; an ``int`` gives a reproducible stream; a Generator is returned as is.
    """
    import numpy as np

    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng(secrets.randbits(128))
    return np.random.default_rng(int(seed))
