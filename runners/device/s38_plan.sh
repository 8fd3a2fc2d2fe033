#!/usr/bin/env bash
# The next session's device call: session 37's plan (runners/device/s37_plan.sh; on an H200 "a" is
# issue 4's benchmark, "b" issue 7's soundness gate, "c" phase B) with phase B's answer list after
# session 37: n15's cells still uncovered plus the 22 narrow entries marked to probe again (predicted
# before the settling fix with every shape past K 64k). On an H100 it also sweeps 2,000 fp8 fuzz
# shapes against the profile (453 fp8 entries of session 37 have not met a fresh shape yet).
set -u
export S37_TARGETS=${S37_TARGETS:-benchmarks/reconstruction/h100/s37/phaseb_targets_s38.args}
export S37_FP8_CHECK_S=${S37_FP8_CHECK_S:-150}
exec bash runners/device/s37_plan.sh "$@"
