#!/bin/bash
# One device call (16 CPU cores + one GPU): the particle reference (GPU attention) and the AMR
# ladders (GPU attention, one CPU thread each), every process under `timeout $LIMIT` so that
# partial JSON (written at each output time) comes back.  Usage: bash device_batch.sh LIMIT
LIMIT=${1:-540}
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
export PYTHONPATH=$ROOT OUT_DIR=$OUT/data
cd "$(dirname "$0")"
mkdir -p $OUT/data $OUT/logs
(lscpu | head -20; nvidia-smi) > $OUT/logs/machine.txt 2>&1
T="timeout $LIMIT"
$T python3 particle_ref_gpu.py 100 20000 0.05 24 0.5 0 1 2 3 > $OUT/logs/p100.log 2>&1 &
$T python3 particle_ref_gpu.py 1000 60000 0.025 24 0.5 10 > $OUT/logs/p1000_s10.log 2>&1 &
$T python3 particle_ref_gpu.py 1000 60000 0.025 24 0.5 11 > $OUT/logs/p1000_s11.log 2>&1 &
$T python3 particle_ref_gpu.py 1000 120000 0.025 24 0.5 12 > $OUT/logs/p1000_s12.log 2>&1 &
for c in "16 2" "24 2" "32 2" "48 2" "64 2" "16 3"; do
  set -- $c
  $T python3 run_amr.py 100 $1 $2 0.83 24 torch > $OUT/logs/amr100_$1_$2.log 2>&1 &
done
for c in "16 3" "24 3" "32 3" "48 3" "64 3"; do
  set -- $c
  $T python3 run_amr.py 1000 $1 $2 0.83 24 torch > $OUT/logs/amr1000_$1_$2.log 2>&1 &
done
wait
tail -n 3 $OUT/logs/*.log
