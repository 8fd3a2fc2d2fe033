"""Root conftest: load the fixbits plugin when its pytest11 entry point did not.

On the GPU runners fixbits runs from PYTHONPATH=<repo> without being installed, so no entry
point exists; where it is installed the entry point has already imported and registered
``fixbits.plugin``, and listing it again would register the same module twice.
"""

from __future__ import annotations

import sys

pytest_plugins = [] if "fixbits.plugin" in sys.modules else ["fixbits.plugin"]
