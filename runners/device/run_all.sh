#!/usr/bin/env bash
# One device call runs several device scripts in turn, each under its own time budget, and
# packs each script's results into $OUT/<name>.tgz, split into parts below 15 MB when larger
# (the device tool returns at most 8 files, none of 16 MB or more).
# usage: bash runners/device/run_all.sh name:budget_s[:extra,args] [...]   (OUT must be set)
#   name@tag runs name.py with its results under name_tag (one script twice in one call)
#   e.g. kernels_bench:330:--per-cell,3,--compile-share,0.2  (commas become spaces; write a comma
#   that belongs inside one argument as %2C: matmul_check:300:--pairs,bf16:fp32%2Cfp16:fp32)
set -u
if ls .whl/*.whl >/dev/null 2>&1; then
  # one wheel at a time: .whl may hold builds for several Pythons (cp311, cp312), and pip refuses
  # the whole list when one of them does not fit this interpreter
  for w in .whl/*.whl; do
    got=$(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$w" 2>&1) \
      || echo "=== wheel skipped ($(python3 -V)): $w: $(printf '%s\n' "$got" | tail -n 1)"
  done
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
R=/tmp/fixbits_results; mkdir -p "$R"
start=$(date +%s)
for spec in "$@"; do
  script=${spec%%:*}; rest=${spec#*:}; budget=${rest%%:*}; extra=""
  name=${script//@/_}  # results, log and archive as name_tag: the device call returns plain names only
  [ "$rest" != "$budget" ] && extra=${rest#*:}
  IFS=',' read -r -a args <<< "$extra"
  for i in "${!args[@]}"; do args[i]=${args[i]//%2C/,}; done
  t0=$(date +%s)
  timeout $((budget + 90)) python3 "runners/device/${script%%@*}.py" --out "$R/$name" --budget-s "$budget" "${args[@]}" > "$R/$name.log" 2>&1
  rc=$?
  echo "=== $name rc=$rc wall=$(( $(date +%s) - t0 ))s"
  tail -n 30 "$R/$name.log" | cut -c1-220
  # one archive per script, split below 15 MB (the device call drops files of 16 MB and more)
  tar czf "$R.$name.tgz" -C "$R" "$name" "$name.log" 2>/dev/null
  rm -f "$OUT/$name.tgz" "$OUT/$name.tgz.part-"*
  if [ "$(stat -c %s "$R.$name.tgz")" -ge 15000000 ]; then
    split -b 15000000 -d -a 1 "$R.$name.tgz" "$OUT/$name.tgz.part-"
    echo "=== $name: archive split into $(ls "$OUT/$name.tgz.part-"* | wc -l) parts (cat $name.tgz.part-* > $name.tgz)"
  else
    cp "$R.$name.tgz" "$OUT/$name.tgz"
  fi
done
echo "total wall $(( $(date +%s) - start ))s"
