#!/usr/bin/env bash
# End-to-end `genscope lora apply` of a LoRA over every patchable weight of a full-size SDXL
# base (6.9 GB, real key layout and shapes: bench/make_sdxl_base.py), next to `cp` of the same
# base file plus `sync` of the copy (the floor: the same bytes read and written durably;
# `genscope lora apply` fsyncs its output). Each is run $GENSCOPE_E2E_RUNS times (default 2),
# alternating, best wall time kept (with its CPU time); the ratio is printed; every file is
# deleted at the end.
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
"$genscope" lora inspect "$dir/sdxl_lora.safetensors" --base "$dir/sdxl_base.safetensors" --json > "$dir/fit.json" || true
/usr/bin/python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["fit"]
print("fit: %s (%d modules matched, %d base weights patched)" % (f["verdict"], f["matched_count"], f["base_weights_patched"]))
' "$dir/fit.json"

# One timed command: prints "<wall seconds> <user+sys CPU seconds>".
timed() {
  /usr/bin/time -f '%e %U %S' -o "$dir/time.txt" "$@" > /dev/null
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$dir/time.txt"
}
smaller() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
best_apply=1e9 best_cp=1e9 apply_cpu=0 cp_cpu=0
for i in $(seq "$runs"); do
  read -r apply acpu < <(timed "$genscope" lora apply "$dir/sdxl_base.safetensors" "$dir/sdxl_lora.safetensors" \
    --strength 0.8 -o "$dir/merged.safetensors")
  rm -f "$dir/merged.safetensors"
  read -r cp_sync ccpu < <(timed sh -c "cp --reflink=never '$dir/sdxl_base.safetensors' '$dir/copy.safetensors' && sync '$dir/copy.safetensors'")
  rm -f "$dir/copy.safetensors"
  printf 'run %d: lora apply %.2f s (CPU %.2f s), cp + sync %.2f s (CPU %.2f s); load %s\n' "$i" "$apply" "$acpu" \
    "$cp_sync" "$ccpu" "$(cut -d' ' -f1-3 /proc/loadavg)"
  if smaller "$apply" "$best_apply"; then best_apply=$apply apply_cpu=$acpu; fi
  if smaller "$cp_sync" "$best_cp"; then best_cp=$cp_sync cp_cpu=$ccpu; fi
done
printf 'best: lora apply %.2f s (CPU %.2f s), cp + sync %.2f s (CPU %.2f s); ratio apply / (cp + sync) = %.2f\n' \
  "$best_apply" "$apply_cpu" "$best_cp" "$cp_cpu" "$(awk -v a="$best_apply" -v b="$best_cp" 'BEGIN { print a / b }')"
