#!/usr/bin/env bash
# The next session's device call, chosen by card. On an H200: "a" is issue 4's benchmark (session
# 31's H200 plan, H200_BENCH_S), "b" issue 7's soundness gate on the H200 (session 32's plan), "c"
# issue 3's phase B on the H200 itself for the answers of n15's still uncovered fuzz cells. On an
# H100: that phase B, with n15's fuzz shapes asked of the heuristic too (--narrow-sweep all makes
# them priority shapes): session 36's H100 scan reached only 64 / 68 of the 223 target answers.
# S37_TARGETS names the answer list (default: the answers of n15's cells still uncovered or wrong after
# session 37's first call). S37_FP8_S > 0 adds, on the H100, fp8_e4m3 -> fp32 reconstruction for that many
# seconds: 316 of its answers failed in session 9 because every shape reaching them was over 150M
# elements, a cap the device no longer has (it is bounded by memory only). S37_FP8_SWEEP is the share of
# that budget kept for the sweep of S37_FP8_FUZZ fuzz shapes against the profile; S37_PHASEB_S=0 skips
# phase B. S37_FP8_CHECK_S > 0 sweeps 2,000 fp8 fuzz shapes (and the realistic ones) against the committed
# profile alone, no probing: the cells it cannot check in time are checked on the CPU afterwards
# (reconstruct.py --check DIR --only-unchecked).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu (part ${1:-a})"
phaseb() {
  local b=${S37_PHASEB_S:-150} targets=${S37_TARGETS:-benchmarks/reconstruction/h100/s37/phaseb_targets_n15_s37.args}
  bash runners/device/run_all.sh \
    reconstruct@phaseb12:$b:--pairs,fp16:fp16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,all,--sweep-share,0.03,--per-answer-s,100,@$targets \
    reconstruct@phaseb13:$b:--pairs,bf16:bf16,--seed-profiles,matrices/profiles,--fuzz,2000,--narrow-sweep,all,--sweep-share,0.03,--per-answer-s,100,@$targets
}
if [[ "$gpu" == *H200* ]]; then
  case "${1:-a}" in
    a) H200_BENCH_S=${H200_BENCH_S:-300} bash runners/device/s31b_plan.sh ;;
    b) bash runners/device/s32_plan.sh ;;
    c) phaseb ;;
  esac
else
  [[ ${S37_PHASEB_S:-150} -gt 0 ]] && phaseb
  if [[ ${S37_FP8_S:-0} -gt 0 ]]; then
    bash runners/device/run_all.sh \
      reconstruct@fp8a:$S37_FP8_S:--pairs,fp8_e4m3:fp32,--seed-profiles,matrices/profiles,--fuzz,${S37_FP8_FUZZ:-500},--sweep-share,${S37_FP8_SWEEP:-0.05},--per-answer-s,90
  fi
  if [[ ${S37_FP8_CHECK_S:-0} -gt 0 ]]; then
    bash runners/device/run_all.sh \
      reconstruct@fp8s:$S37_FP8_CHECK_S:--pairs,fp8_e4m3:fp32,--profiles,matrices/profiles,--fuzz,2000
  fi
fi
