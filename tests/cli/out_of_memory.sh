#!/usr/bin/env bash
# Out of memory is a named error, never an abort (docs/reliability.md, issue 25): a large run
# document (made here, about 70 MB, 1,000,000 samples) is read, rendered and exported under
# address-space limits (`ulimit -v`) from too small to read it up to unlimited. Each command
# either succeeds with complete output or exits 2 with `[OutOfMemory]` or
# `[RunDocumentTooLarge]` and leaves no output file (nor temporary file) behind — never
# SIGABRT, never "terminate called". Every command is bounded by `timeout`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
g="$GENSCOPE"
py=/usr/bin/python3
cd "$tmp"

$py "$here/make_export_run.py" big.json --samples 1000000
size_mib=$(( $(stat -c %s big.json) >> 20 ))
echo "run document: $size_mib MiB"

# complete OUTPUT: the output is whole (the end of each format, every sample in series.csv).
complete() {
  case "$1" in
    out/r.html) tail -c 20 "$1" | grep -q "</html>" ;;
    out/t.json) $py -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" ;;
    out/csv) [ -s out/csv/steps.csv ] && [ "$(wc -l < out/csv/series.csv)" -gt 1000000 ] ;;
    out/m.prom) grep -q "^genscope_run_duration_seconds" "$1" ;;
    stdout) grep -q "SUMMARY" out.stdout ;;
    stdout-any) [ -s out.stdout ] ;;
    db:*) [ "$(timeout 60 "$g" history --db "${1#db:}" list | grep -c 00000000)" = 1 ] ;;
    *) false ;;
  esac
}

# check LIMIT_KIB NAME OUTPUTS... -- genscope ARGS: runs genscope under the limit ("unlimited"
# for none); OUTPUTS are the files (or folders, db:FILE a history) the command writes.
declare -A outcomes
check() {
  local limit=$1 name=$2
  shift 2
  local outputs=()
  while [ "$1" != "--" ]; do outputs+=("$1"); shift; done
  shift
  rm -rf out && mkdir out
  set +e
  (ulimit -v "$limit"; exec timeout 300 "$g" "$@") > out.stdout 2> out.stderr
  local rc=$?
  set -e
  local err
  err=$(head -c 2000 out.stderr)
  [ $rc -ne 124 ] || fail "$name under ulimit -v $limit: no end within 300 s: $err"
  [ $rc -ne 134 ] && [ $rc -lt 128 ] || fail "$name under ulimit -v $limit: killed by a signal (rc=$rc): $err"
  ! grep -q "terminate called" out.stderr || fail "$name under ulimit -v $limit: $err"
  if [ $rc -eq 0 ]; then
    ! grep -q "error" out.stderr || fail "$name under ulimit -v $limit: rc 0 with $err"
    for o in "${outputs[@]}"; do complete "$o" || fail "$name under ulimit -v $limit: $o incomplete"; done
    outcomes[$name]+=" $limit:ok"
  else
    [ $rc -eq 2 ] || fail "$name under ulimit -v $limit: rc=$rc: $err"
    grep -Eq "error \[(OutOfMemory|RunDocumentTooLarge)\]" out.stderr ||
      fail "$name under ulimit -v $limit: rc=$rc without a named error: $err"
    # Nothing half-written: each output is complete (exports are written each on its own) or
    # absent, the ones the error names are absent, and no temporary file is left; the console
    # report is all or nothing; a history database may have been opened, but holds no run.
    for o in "${outputs[@]}"; do
      case "$o" in
        stdout) ! grep -q "SUMMARY" out.stdout || fail "$name under ulimit -v $limit: a report and an error" ;;
        db:*) if [ -e "${o#db:}" ]; then
                [ -z "$(timeout 60 "$g" history --db "${o#db:}" list --json | grep abc)" ] ||
                  fail "$name under ulimit -v $limit: the failed run is in the history"
                rm -f "${o#db:}" "${o#db:}"-wal "${o#db:}"-shm
              fi ;;
        out/*) if grep -q " $o: \[" out.stderr; then
                 [ ! -e "$o" ] || fail "$name under ulimit -v $limit: $o named as not written, but there"
               elif [ -e "$o" ]; then
                 complete "$o" || fail "$name under ulimit -v $limit: $o incomplete ($err)"
               fi ;;
      esac
    done
    local left
    left=$(find out -name "*.tmp.*" | head -5)
    [ -z "$left" ] || fail "$name under ulimit -v $limit: temporary files left: $left ($err)"
    outcomes[$name]+=" $limit:$(grep -Eo "\[(OutOfMemory|RunDocumentTooLarge)\]" out.stderr | head -1)"
  fi
}

# genscope's own address space at start (KiB): libraries, and OpenBLAS's buffer of 128 MiB per
# OpenMP thread, set aside when it loads; under a smaller limit genscope cannot start (OpenBLAS
# retries for ever: docs/reliability.md), so the limits here are above it. Measured on a
# genscope that waits for its run document on a pipe.
base=$($py - "$g" <<'PY'
import subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "report", "/dev/stdin"], stdin=subprocess.PIPE,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1)
status = open("/proc/%d/status" % p.pid).read()
p.kill()
print([int(l.split()[1]) for l in status.splitlines() if l.startswith("VmSize:")][0])
PY
)
echo "genscope at start: $((base >> 10)) MiB of address space"
limits=""
for extra in 40 200 400; do limits+=" $((base + extra * 1024))"; done
limits+=" unlimited"
for limit in $limits; do
  check "$limit" console stdout -- report big.json --plain
  check "$limit" exports out/r.html out/t.json out/csv -- report big.json --html out/r.html \
    --trace out/t.json --csv out/csv
  check "$limit" metrics out/m.prom -- report big.json --metrics out/m.prom
  check "$limit" compare stdout-any -- compare big.json big.json
  check "$limit" history db:out/h.db -- history --db out/h.db add big.json
done
# Finer steps where reading gives way to rendering: every point in between fails by name or works.
for extra in 120 280 600; do
  limit=$((base + extra * 1024))
  check "$limit" exports out/r.html out/t.json out/csv -- report big.json --html out/r.html \
    --trace out/t.json --csv out/csv
done
for name in console exports metrics compare history; do echo "$name:${outcomes[$name]}"; done
# Both outcomes were seen: the limits reach from refusing to working.
all="${outcomes[*]}"
grep -q ":ok" <<<"$all" || fail "nothing succeeded, even unlimited"
grep -Eq ":\[(OutOfMemory|RunDocumentTooLarge)\]" <<<"$all" || fail "no limit was tight enough"
for name in console exports metrics compare history; do
  grep -q "unlimited:ok" <<<"${outcomes[$name]}" || fail "$name fails without a limit"
done
echo "out of memory: ok"
