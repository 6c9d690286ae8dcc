#!/bin/bash
# 4 x H200 (the next call): all_gather_gemm's push at an unaligned K and its own A in slot 0 measured (AG_SHAPES in
# AG_MODES beside the family's peers; OLD_AG_SHAPES: the tree before both, scratch/old, in OLD_AG_MODES, in the same
# call), then the W = 4 grid's cells not yet run on this kind (W4_SHAPES: every algorithm in auto beside every
# peer); cells stop starting after BUDGET_S seconds. First (VALIDATE=1, the default) the changes are validated on
# the GPUs: 200 steps on the op's own A with C poisoned between steps (K = 2500: the padded push), rotating user
# tensors, graph replays.
# Usage: STREAMK_PGAS_COMMIT=<sha> AG_SHAPES="1000x3000x2500 16384x8192x8192" \
#        OLD_AG_SHAPES="1000x3000x2500 16384x8192x8192" \
#        W4_SHAPES="4096x8192x28672 2048x4096x14336 8192x8192x8192" BUDGET_S=450 bash results/logs/h200x4/run_call5.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
spent() { (( $(date +%s) - T0 > ${BUDGET_S:-450} )); }
b2b() {  # b2b NP FLAGS...: tests/mpi/op_back_to_back.py (validation first: the changes have not run on GPUs)
  local np=$1; shift
  stamp "back to back np=$np $*"
  timeout 120 mpirun --allow-run-as-root -np $np --bind-to none python3 tests/mpi/op_back_to_back.py "$@" 2>&1 \
    | tee -a $WORK/b2b.txt | grep -E "OP_B2B|rror" | tail -n 6
}
if [ "${VALIDATE:-1}" = 1 ]; then
  b2b 4 --steps 200 --algorithms all_gather_gemm,gemm_reduce_scatter --poison_between --m 512 --n 1024 --k 2500
  b2b 4 --steps 200 --algorithms all_gather_gemm --rotate --m 512 --n 1024 --k 8192
  b2b 4 --steps 200 --algorithms all_gather_gemm --graph
  b2b 2 --steps 200 --algorithms all_gather_gemm --poison_between --m 256 --n 512 --k 2072
fi
for s in ${AG_SHAPES:-}; do
  if spent; then stamp "budget spent: $s not run"; continue; fi
  NP=4 TAG=w4ag ALGORITHMS=all_gather_gemm MODES=${AG_MODES:-auto,bulk_sync,two_streams,fused,copy_engine} ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $s
  NP=4 COLLECTIVE=all_gather_gemm REF_TAG=reference_w4 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $s
done
for s in ${OLD_AG_SHAPES:-}; do
  if spent || [ ! -d scratch/old ]; then stamp "old tree: $s not run"; continue; fi
  (cd scratch/old && NP=4 TAG=w4ag_old ALGORITHMS=all_gather_gemm MODES=${OLD_AG_MODES:-bulk_sync,copy_engine} \
    ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=4 overlap $s)
done
for s in ${W4_SHAPES:-}; do
  if spent; then stamp "budget spent: $s not run"; continue; fi
  NP=4 TAG=w4 ALGORITHMS=all_reduce,one_shot,all_scatter,all_gather_gemm,gemm_reduce_scatter MODES=auto ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=110 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s
  NP=4 COLLECTIVE=all REF_TAG=reference_w4 REF_TIMEOUT=120 ITERS=20 WARMUP=5 reference $s
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
tail -n 50 $WORK/summary.txt
