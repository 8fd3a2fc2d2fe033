"""Root conftest: load the fixbits plugin when its pytest11 entry point did not, and make
hypothesis deterministic in CI.

On the GPU runners fixbits runs from PYTHONPATH=<repo> without being installed, so no entry
point exists; where it is installed the entry point has already imported and registered
``fixbits.plugin``, and listing it again would register the same module twice.

In CI (``CI`` set, as .ci/run and GitHub Actions do) hypothesis draws from a fixed seed per
test and keeps no example database: a gate must give the same verdict on the same commit, and a
failure prints the reproducing blob. Local runs keep hypothesis's random exploration.
"""

from __future__ import annotations

import os
import sys

pytest_plugins = [] if "fixbits.plugin" in sys.modules else ["fixbits.plugin"]

if os.environ.get("CI"):
    from hypothesis import settings

    settings.register_profile("fixbits-ci", derandomize=True, database=None, print_blob=True)
    settings.load_profile("fixbits-ci")
