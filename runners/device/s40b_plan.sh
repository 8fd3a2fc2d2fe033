#!/usr/bin/env bash
# Session 40's plan for the next session's device call: session 39's second plan
# (runners/device/s39b_plan.sh; on an H200 issue 4's benchmark "a" first, no H200 has started since
# session 31) with the H100 part moved on: fp8_e4m3 -> fp32 phase B from matrices/profiles (1,227
# entries; 396 answers of the seed-1 steering set left at session 40's deadline), then a sweep of
# seed-0 fuzz shapes 11000..12999, which no run has drawn.
set -u
export S39B_RUN=${S39B_RUN:-fp8k} S39B_SWEEP_RUN=${S39B_SWEEP_RUN:-fp8l} S39B_FROM=${S39B_FROM:-11000}
export S39B_FP8_S=${S40B_FP8_S:-250} S39B_CHECK_S=${S40B_CHECK_S:-120}
exec bash runners/device/s39b_plan.sh "$@"
