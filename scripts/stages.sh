#!/usr/bin/env bash
# stages.sh TIER STAGE... — runs `make stage-STAGE` for each STAGE in order,
# printing the wall time of each as it ends and, at the end (or at the first
# failure), a table of every stage's time.  `make test` and `make test-full`
# call it (Makefile); MAKE and MAKEFLAGS come from make.
#
# Exit status: 0 when every stage passed, else the failing stage's status
# (the stages after it are not run).
set -uo pipefail
tier=$1; shift
make=${MAKE:-make}
summary=()
total_start=$(date +%s)

print_summary() {
  local status=$1
  echo
  echo "== make $tier: stage times (wall clock, $(nproc) cores)"
  for line in "${summary[@]}"; do echo "   $line"; done
  printf '   %-16s %6d s\n' "total" "$(( $(date +%s) - total_start ))"
  echo "== make $tier: $status"
}

for stage in "$@"; do
  start=$(date +%s)
  echo "== stage $stage: started $(date -u +%H:%M:%S) UTC"
  "$make" --no-print-directory "stage-$stage"
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ]; then
    echo "== stage $stage: passed in $secs s"
    summary+=("$(printf '%-16s %6d s' "$stage" "$secs")")
  else
    echo "== stage $stage: FAILED (exit $rc) after $secs s"
    summary+=("$(printf '%-16s %6d s  FAILED' "$stage" "$secs")")
    print_summary "FAILED in stage $stage"
    exit "$rc"
  fi
done
print_summary "all passed"
