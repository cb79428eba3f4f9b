#!/usr/bin/env bash
# End-to-end `genscope lora apply` of a LoRA over every patchable weight of a full-size SDXL
# base (6.9 GB, real key layout and shapes: bench/make_sdxl_base.py), next to `cp` of the same
# base file plus `sync` of the copy (the floor: the same bytes read and written durably;
# `genscope lora apply` fsyncs its output). Each is run $GENSCOPE_E2E_RUNS times (default 2),
# alternating, best wall time kept; the ratio is printed; every file is deleted at the end.
#
#   bench/lora_apply_e2e.sh                       # uses build/tools/genscope/genscope
#   GENSCOPE=path/to/genscope GENSCOPE_BENCH_DIR=/var/tmp bench/lora_apply_e2e.sh
#
# Needs ~21 GB free (base, merged output, copy) in $GENSCOPE_BENCH_DIR (default /var/tmp).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
genscope=${GENSCOPE:-$root/build/tools/genscope/genscope}
runs=${GENSCOPE_E2E_RUNS:-2}
parent=${GENSCOPE_BENCH_DIR:-/var/tmp}
need_kib=$((22 * 1024 * 1024))
avail_kib=$(df -Pk "$parent" | awk 'NR == 2 {print $4}')
if [ "$avail_kib" -lt "$need_kib" ]; then
  echo "lora_apply_e2e: need 22 GiB free in $parent, have $((avail_kib / 1024 / 1024)) GiB" >&2
  exit 1
fi
dir=$(mktemp -d "$parent/genscope_e2e.XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo "generating the SDXL base and LoRA in $dir ..."
/usr/bin/python3 "$root/bench/make_sdxl_base.py" "$dir"
ls -l "$dir"

now() { date +%s.%N; }
best_apply=1e9
best_cp=1e9
best_cp_only=1e9
for i in $(seq "$runs"); do
  t0=$(now)
  "$genscope" lora apply "$dir/sdxl_base.safetensors" "$dir/sdxl_lora.safetensors" --strength 0.8 \
    -o "$dir/merged.safetensors" --json > "$dir/apply.json"
  t1=$(now)
  rm -f "$dir/merged.safetensors"
  t2=$(now)
  cp --reflink=never "$dir/sdxl_base.safetensors" "$dir/copy.safetensors"
  t3=$(now)
  sync "$dir/copy.safetensors"
  t4=$(now)
  rm -f "$dir/copy.safetensors"
  apply=$(echo "$t1 - $t0" | bc -l)
  cp_sync=$(echo "$t4 - $t2" | bc -l)
  cp_only=$(echo "$t3 - $t2" | bc -l)
  printf 'run %d: lora apply %.2f s, cp %.2f s, cp + sync %.2f s (load %s)\n' "$i" "$apply" "$cp_only" "$cp_sync" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
  best_apply=$(echo "if ($apply < $best_apply) $apply else $best_apply" | bc -l)
  best_cp=$(echo "if ($cp_sync < $best_cp) $cp_sync else $best_cp" | bc -l)
  best_cp_only=$(echo "if ($cp_only < $best_cp_only) $cp_only else $best_cp_only" | bc -l)
done
/usr/bin/python3 - "$dir/apply.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print("merged: %d modules, %d tensors patched, %.2f GB written, %.2f GB patched" % (
    j["modules_merged"], j["weights_patched"], j["bytes_written"] / 1e9, j["patched_bytes"] / 1e9))
EOF
printf 'best: lora apply %.2f s, cp + sync %.2f s (cp alone %.2f s); ratio apply / (cp + sync) = %.2f\n' \
  "$best_apply" "$best_cp" "$best_cp_only" "$(echo "$best_apply / $best_cp" | bc -l)"
