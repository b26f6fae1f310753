#!/usr/bin/env bash
# The demo's density (no particles) at several resolutions, to t = 18; one run at a time,
# CPU seconds from /usr/bin/time -v (time.txt beside each run.nc).  Usage:
#   RUNS=/path/to/runs bash run_all.sh NAME [NAME …]     (names below; default: all, in order)
# Base configuration: demo_density.toml = spherepde.experiments.demo.DEMO without particles.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-$HERE/runs}
mkdir -p "$RUNS"
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
POLE='representations.density.pole=[1.0,1.0,1.0]'
amr() {  # amr BASE LEVELS MASS_PER_CELL
  echo --set grid.nlat="$1" --set representations.density.scheme=amr \
       --set representations.density.base_nlat="$1" \
       --set representations.density.max_level="$2" --set representations.density.mass_per_cell="$3" \
       --set "$POLE"
}
args() {
  case "$1" in
    ffsl24) echo --set grid.nlat=24 ;;
    ffsl36) echo --set grid.nlat=36 ;;
    ffsl48) echo --set grid.nlat=48 ;;
    ffsl54) echo --set grid.nlat=54 ;;
    ffsl72) echo --set grid.nlat=72 ;;
    ffsl96) echo --set grid.nlat=96 ;;
    ffsl108) echo --set grid.nlat=108 ;;
    ffsl144) echo --set grid.nlat=144 ;;
    # the hybrid study's amr (base 24, max_level 2, mass_per_cell 0.83) and its --refine 1.5 chain
    amr24l2) amr 24 2 0.83 ;;
    amr36l2) amr 36 2 0.83 ;;
    amr54l2) amr 54 2 0.83 ;;
    amr48l1) amr 48 1 0.83 ;;
    amr72l1) amr 72 1 0.83 ;;
    # levels_for_beta(30, base): 24 -> (3, 3.7351), 36 -> (3, 8.4040), 48 -> (2, 3.7351)
    amr24l3) amr 24 3 3.7351041137911407 ;;
    amr36l3) amr 36 3 3.7351041137911407 ;;   # = --refine 1.5 of amr24l3 (mass_per_cell stays)
    amr54l3) amr 54 3 3.7351041137911407 ;;   # = --refine 1.5 of amr36l3
    amr48l2) amr 48 2 3.7351041137911407 ;;
    amr72l2) amr 72 2 3.7351041137911407 ;;   # = --refine 1.5 of amr48l2
    *) echo "unknown run $1" >&2; exit 2 ;;
  esac
}
NAMES=("$@")
# the order run here (one at a time); ffsl96, ffsl144 are defined but were not run (time)
[ ${#NAMES[@]} -gt 0 ] || NAMES=(ffsl24 ffsl36 amr24l2 ffsl48 amr36l2 amr48l1 ffsl54 ffsl72 amr54l2 amr72l1 amr24l3
                                 ffsl108 demo amr36l3 amr54l3 amr48l2 amr72l2)
for name in "${NAMES[@]}"; do
  out="$RUNS/$name"
  if [ -f "$out/run.nc" ] && [ -f "$out/time.txt" ]; then echo "have $name"; continue; fi
  if [ "$name" = demo ]; then  # today's `spherepde demo` (density + 400 particles + figures), for its cost
    nice -n 10 /usr/bin/time -v -o "$out.time.txt" python3 -m spherepde demo --output "$out" > "$out.summary.out"
    mv "$out.time.txt" "$out/time.txt"; mv "$out.summary.out" "$out/summary.out"
    echo "$(date +%T) done demo: $(grep -E 'User time|System time|Elapsed' "$out/time.txt" | tr -s ' ' | tr '\n' ' ')"
    continue
  fi
  echo "$(date +%T) start $name: $(args "$name")"
  # shellcheck disable=SC2046
  nice -n 10 /usr/bin/time -v -o "$out.time.txt" python3 -m spherepde run "$HERE/demo_density.toml" \
    $(args "$name") --set stepping.t_end=18 --output "$out" --overwrite --quiet --json > "$out.summary.out"
  mv "$out.time.txt" "$out/time.txt"; mv "$out.summary.out" "$out/summary.out"
  echo "$(date +%T) done $name: $(grep -E 'User time|System time|Elapsed' "$out/time.txt" | tr -s ' ' | tr '\n' ' ')"
done
