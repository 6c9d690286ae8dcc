#!/bin/bash
# 4 x H200: the GPU tests of both sequence-parallel algorithms (every mode right after steps back to back, rotating
# user tensors with C read between steps, graph replays: all_gather_gemm's own A in slot 0 with a caller's A),
# issue 34's stall probe at W = 4 (PROBE_PHASES), then W = 2 on two pairs of the GPUs at once (0,1: W2_A; 2,3: W2_B):
# every algorithm in auto beside every peer, each pair its own calls. Pairs stop starting shapes after W2_BUDGET_S.
# Usage: STREAMK_PGAS_COMMIT=<sha> W2_A="4864x4096x8256 512x8192x8192" W2_B="8192x8192x8192 1024x8192x8192" \
#        bash results/logs/h200x4/run_call6.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
TESTS_TIMEOUT=${TESTS_TIMEOUT:-200} gpu_tests tests/test_new_algorithms.py -k "rotating or every_mode_right_after"
stamp "stall probe: ${PROBE_PHASES:-external reference back_to_back graph}"
OUT=$WORK/probe NP=4 TIMEOUT_S=5 PHASES="${PROBE_PHASES:-external reference back_to_back graph}" \
  timeout ${PROBE_TIMEOUT:-200} bash scripts/probe_stall.sh > $WORK/probe.txt 2>&1
cat $WORK/probe/probe_stall/summary.txt
cp $WORK/probe/probe_stall/summary.txt $WORK/probe_summary.txt 2>/dev/null
w2() {  # w2 GPUS NAME SHAPES: W = 2 on those GPUs, logs under $WORK/NAME
  local gpus=$1 name=$2 shapes=$3 t0
  t0=$(date +%s)
  export CUDA_VISIBLE_DEVICES=$gpus WORK=$WORK/$name
  mkdir -p $WORK
  for s in $shapes; do
    if (( $(date +%s) - t0 > ${W2_BUDGET_S:-200} )); then stamp "budget spent: $s not run"; continue; fi
    NP=2 TAG=w2 ALGORITHMS=all_reduce,one_shot,all_scatter,all_gather_gemm,gemm_reduce_scatter MODES=auto ITERS=20 \
      WARMUP=5 OVERLAP_TIMEOUT=110 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s > /dev/null
    NP=2 COLLECTIVE=all REF_TAG=reference_w2 REF_TIMEOUT=120 ITERS=20 WARMUP=5 reference $s > /dev/null
  done
}
stamp "W = 2 pairs"
(w2 0,1 w2_gpu01 "${W2_A:-}") &
(w2 2,3 w2_gpu23 "${W2_B:-}") &
wait
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
for d in w2_gpu01 w2_gpu23; do cp $WORK/$d/steps.txt $OUT/steps_$d.txt 2>/dev/null; done
grep -h "budget\|rror" $WORK/w2_*/steps.txt $WORK/w2_*/overlap.txt 2>/dev/null | tail -n 5
tail -n 40 $WORK/summary.txt
