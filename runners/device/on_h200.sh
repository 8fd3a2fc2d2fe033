# Sourced first by a session's device script. On an H200 (the card issues 3 and 4 set their
# targets on) it runs session 24's H200 plan (fused-pair bytes of 16x4096x4096, then the whole
# fp16 table) and ends the call; on any other card it returns and the script goes on.
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  S24_BENCH_S=${H200_BENCH_S:-400} bash runners/device/s24_plan.sh
  exit 0
fi
