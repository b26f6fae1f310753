#!/bin/bash
# device command: bash docs/prototypes/issue20/lagrangian/gpu_cmd.sh PLAN
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD OMP_NUM_THREADS=4
cd docs/prototypes/issue20/lagrangian || exit 3
nvidia-smi -L; python -c "import torch, triton; print(torch.__version__, triton.__version__)"
python gpu_runs.py "$1" 2>&1 | tee $OUT/gpu_log.txt
