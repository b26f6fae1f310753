#!/bin/bash
# Issue 20: decompose the `--refine 1.5` change of the amr density at β = 1000, pole [1,1,1]
# (README.md).  Runs one at a time, one thread, nice; a run whose run.nc exists is skipped.
#   bash run_all.sh [NAME ...]      (default: all, in the order below)
cd "$(dirname "$0")/../../../.."   # repository root
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1
D=docs/prototypes/issue20/decompose
R=$D/runs
S="run examples/metastability.toml --set representations.density.scheme=amr --set grid.nlat=32 \
--set dynamics.attention.beta=1000 --set representations.density.max_level=5 \
--set representations.density.mass_per_cell=105.6 --set stepping.t_end=24 \
--set representations.density.pole=[1.0,1.0,1.0]"
OPT="python3 $D/run_amr_opts.py"   # OPT AMR_COURANT TOL: amr's sub-step factor (default 0.5), attention tol (1e-8)
declare -A CMD=(
  # R0, R1: the pair of w2_change/README.md (pole_b1000)
  [R0]="python3 -m spherepde $S"
  [R1]="python3 -m spherepde $S --refine 1.5"
  # T: R0, both time-step knobs ÷1.5: amr's sub-step factor 0.5 → 1/3, the outer step (stepping.courant) 0.8 → 0.8/1.5
  [T]="$OPT 0.3333333333 1e-8 $S --set stepping.courant=0.5333333333"
  # S: R1's space (grid 48, base 48) with R0's steps: amr factor 0.5 → 0.75, stepping.courant 0.8 → 1.2
  [S]="$OPT 0.75 1e-8 $S --refine 1.5 --set stepping.courant=1.2"
  # B: base cells 48 (finest h = R1's π/1536) with R0's split mass m_split = 105.6·(π/1024)² (mass_per_cell ×2.25);
  #    output grid 32 (so R0's outer step and Π#ρ0 weight)
  [B]="python3 -m spherepde $S --set representations.density.base_nlat=48 --set representations.density.mass_per_cell=237.6"
  # M: R0 with R1's split mass (mass_per_cell ÷2.25 = 46.9333: more leaves, same base, same finest h)
  [M]="python3 -m spherepde $S --set representations.density.mass_per_cell=46.93333333"
  # G: R0 with the output grid 48 (outer step and Π#ρ0 weight a as R1), the mesh as R0 (base_nlat 32)
  [G]="python3 -m spherepde $S --set grid.nlat=48 --set representations.density.base_nlat=32"
  # L: R0 with one more level (finest h/2) and the same split mass (mass_per_cell ×4)
  [L]="python3 -m spherepde $S --set representations.density.max_level=6 --set representations.density.mass_per_cell=422.4"
  # B64: base cells 64 with max_level 4: finest h = π/1024 and m_split exactly R0's, only the base cells finer (×2)
  [B64]="python3 -m spherepde $S --set representations.density.base_nlat=64 --set representations.density.max_level=4"
  # B48l4: base 48, max_level 4 (finest h = π/768, 4/3 of R0's), m_split R0's (mass_per_cell 105.6·(768/1024)² = 59.4)
  [B48l4]="python3 -m spherepde $S --set representations.density.base_nlat=48 --set representations.density.max_level=4 --set representations.density.mass_per_cell=59.4"
  # To, Ti: T's two knobs one at a time (outer step only; amr's sub-step factor only)
  [To]="python3 -m spherepde $S --set stepping.courant=0.5333333333"
  [Ti]="$OPT 0.3333333333 1e-8 $S"
  # the candidates' own refined runs (base_nlat ×1.5 with --refine): B → base 72, B64 → base 96
  [Bref]="python3 -m spherepde $S --set representations.density.base_nlat=48 --set representations.density.mass_per_cell=237.6 --refine 1.5"
  [B64ref]="python3 -m spherepde $S --set representations.density.base_nlat=64 --set representations.density.max_level=4 --refine 1.5"
  [B48l4ref]="python3 -m spherepde $S --set representations.density.base_nlat=48 --set representations.density.max_level=4 --set representations.density.mass_per_cell=59.4 --refine 1.5"
  # tol: R0 with the attention sums' tolerance 1e-8 → 1e-9
  [tol]="$OPT 0.5 1e-9 $S"
)
ORDER=(R0 R1 T S B M G tol L B64 B48l4 To Ti Bref B64ref B48l4ref)
[ $# -gt 0 ] && ORDER=("$@")
for n in "${ORDER[@]}"; do
  [ -f "$R/$n/run.nc" ] && { echo "skip $n"; continue; }
  echo "$(date +%T) start $n: ${CMD[$n]}"
  nice -n 5 /usr/bin/time -v ${CMD[$n]} --output "$R/$n" > "$R/$n.log" 2>&1
  echo "$(date +%T) end $n rc=$?"
done
