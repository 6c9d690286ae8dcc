#!/bin/bash
# First call on 4 x H200: validate all_gather_gemm without the end-of-step barrier (and one_shot) on GPUs at W = 4
# and W = 2, the reduce family's communication alone at W = 4 and W = 2, then the W = 4 cells that sit nearest 1
# (every algorithm in auto beside every equal-output peer; the reduce family and all_gather_gemm in their modes).
# Usage: STREAMK_PGAS_COMMIT=<sha> bash results/logs/h200x4/run_call1.sh
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
    | tee -a $WORK/b2b.txt | grep -vE "^\s*$" | tail -n 4
}
b2b 4 --steps 200 --algorithms all_gather_gemm,one_shot --rotate
b2b 4 --steps 200 --algorithms all_gather_gemm,one_shot --graph
b2b 4 --steps 200 --algorithms all_gather_gemm --rotate --poison_between --m 512 --n 1024 --k 2048
b2b 2 --steps 200 --algorithms all_gather_gemm --rotate --graph
NP=4 COMM_TIMEOUT=120 SHOW=8 comm_bench comm_w4 --sizes 65536,262144,1048576,4194304,16777216 --programs 16,64,128
NP=2 COMM_TIMEOUT=80 SHOW=6 comm_bench comm_w2 --sizes 65536,1048576,16777216 --programs 16,64,128
for s in 512x8192x28672 512x8192x8192 128x8192x8192 1024x8192x8192; do
  NP=4 TAG=w4 ALGORITHMS=all_reduce,one_shot,all_scatter,all_gather_gemm,gemm_reduce_scatter MODES=auto ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s
  [ "${s%%x*}" = 512 ] && NP=4 TAG=w4m ALGORITHMS=all_reduce,one_shot MODES=fused,two_streams,fused_sequential ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s
  NP=4 COLLECTIVE=all REF_TAG=reference_w4 REF_TIMEOUT=120 ITERS=20 WARMUP=5 reference $s
done
NP=4 TAG=w4ag ALGORITHMS=all_gather_gemm MODES=bulk_sync,copy_engine,two_streams ITERS=20 WARMUP=5 \
  OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=6 overlap 512x8192x28672
finish > /dev/null
tail -n 70 $WORK/summary.txt
cp $WORK/*.txt $OUT/ 2>/dev/null; true
