#!/usr/bin/env bash
# Session 24's device call. On an H200 (issue 4's target card): the fused-pair bytes for the shape
# run15 left out, then the whole fp16 benchmark seeded with run15's winners and the H100 slow24
# winners (the later file wins a shape). On any other card: diagnosis that needs no same-card
# figure: the fp16 warp-specialized hang with B K-major (ws_probe), and the GPU suite test of the
# folded warp-specialized fp8 branch, which has compiled on the CPU VM but never run.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "=== card: $gpu"
if [[ "$gpu" == *H200* ]]; then
  bash runners/device/run_all.sh fused_shape_check:20 \
    kernels_bench@s24:${S24_BENCH_S:-400}:--seed-tuned,benchmarks/gemm/h200/run15/tuned_configs.json,benchmarks/gemm/h100/s22/slow24/tuned_configs.json,--compile-share,0.04,--tune-limit,2,--tune-by,graph
else
  # (session 24, call 1: fp16 with B K-major hung too, all three launches reached)
  bash runners/device/run_all.sh \
    ws_probe@fp8o16:85:--dtype,fp8,--b,kmajor,--out-dtype,fp16,--configs,128x128x128_g8_w4_s3_G1_tma_ws%2C128x128x128_g8_w4_s4_G1_tma_ws,--shapes,192x256x4096 \
    ws_probe@fp8o32:85:--dtype,fp8,--b,kmajor,--out-dtype,fp32,--configs,128x128x128_g8_w4_s3_G1_tma_ws%2C128x128x128_g8_w4_s4_G1_tma_ws,--shapes,4096x4096x4096
  # the suite test only where the probe ran its exact case (s3, fp16 out, 192x256x4096) to the end
  grep -q '"config": "128x128x128_g8_w4_s3_G1_tma_ws", "shape": "192x256x4096".*"differ"' /tmp/fixbits_results/ws_probe_fp8o16.log || exit 0
  export PYTHONPATH=$PWD
  timeout 120 python3 -m pytest -p no:cacheprovider -q --arch sm_90 \
    suites/reconstruction/test_kernels_gpu.py -k "warp_specialized" \
    --junitxml="$OUT/ws_suite.xml" > "$OUT/ws_suite.log" 2>&1
  echo "=== ws suite rc=$?"; tail -n 15 "$OUT/ws_suite.log" | cut -c1-220
fi
