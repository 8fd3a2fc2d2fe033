"""Run a Python script with the inner-tree switch installed, no change to its code.

    FIXBITS_INNER_TREE=1 python -m fixbits.enforce train.py --its --args

Installs the launch/compile hooks (fixbits.enforce.switch.install) and runs the script as
__main__. The environment variable is still read at every launch/compile, so the script (or a
``pinned_reductions`` block inside it) can turn pinning on and off while it runs.
"""

from __future__ import annotations

import runpy
import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    from fixbits.enforce.switch import enabled, install

    enabled()  # a malformed FIXBITS_INNER_TREE fails here, naming the variable, before the script runs
    install()
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
