#!/bin/bash
# 4 x H200: all_reduce without the end-of-step barrier (each owner program counts its pieces on the peers). Validation at
# W = 4 and W = 2, its communication alone beside the previous tree's (scratch/old, A/B in this call) and the peers,
# then the reduce family's cells (W4_SHAPES, W2_SHAPES) beside the family's peers.
# Usage: STREAMK_PGAS_COMMIT=<sha> W4_SHAPES="..." W2_SHAPES="..." OLD_W4_SHAPES="..." bash results/logs/h200x4/run_call3.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
b2b() {  # b2b NP FLAGS...: tests/mpi/op_back_to_back.py
  local np=$1; shift
  stamp "back to back np=$np $*"
  timeout 120 mpirun --allow-run-as-root -np $np --bind-to none python3 tests/mpi/op_back_to_back.py "$@" 2>&1 \
    | tee -a $WORK/b2b.txt | grep -E "OP_B2B|rror|FAIL" | tail -n 6
}
b2b 4 --steps 200 --algorithms all_reduce --rotate --poison_between
b2b 4 --steps 200 --algorithms all_reduce --graph
b2b 4 --steps 200 --algorithms all_reduce --user_tensors --m 512 --n 1024 --k 2048
b2b 2 --steps 200 --algorithms all_reduce --rotate
SIZES=${COMM_SIZES:-65536,262144,1048576,4194304,16777216,67108864}
NP=4 COMM_TIMEOUT=120 SHOW=9 comm_bench comm_w4 --sizes $SIZES --programs 16,64,128
if [ -d scratch/old ]; then
  stamp "comm bench, the previous tree (W = 4)"
  (cd scratch/old && timeout 90 mpirun --allow-run-as-root -np 4 --bind-to none env PYTHONPATH=$PWD python3 -m tools.comm_bench \
    --sizes $SIZES --programs 16,64,128 --algorithms all_reduce --references nccl --csv $WORK/comm_w4_old.csv \
    2>&1 | tee -a $WORK/comm_w4_old.txt | tail -n 8)
fi
NP=2 COMM_TIMEOUT=80 SHOW=6 comm_bench comm_w2 --sizes 65536,1048576,16777216 --programs 16,64,128
cell() {  # cell NP SHAPE
  NP=$1 TAG=w$1 ALGORITHMS=all_reduce,one_shot MODES=auto,fused,fused_sequential ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $2
  NP=$1 COLLECTIVE=one_shot REF_TAG=reference_w$1 REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference $2
}
for s in ${W4_SHAPES:-}; do cell 4 $s; done
for s in ${W2_SHAPES:-}; do cell 2 $s; done
for s in ${OLD_W4_SHAPES:-}; do  # the previous tree's all_reduce at the same cells (A/B in this call)
  (cd scratch/old && NP=4 TAG=w4_old ALGORITHMS=all_reduce MODES=auto,fused,fused_sequential ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=4 overlap $s)
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
tail -n 60 $WORK/summary.txt
