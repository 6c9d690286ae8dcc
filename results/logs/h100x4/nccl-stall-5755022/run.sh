# Issue 34: the reference (NCCL all_reduce) with rank 1 stopped, two torch watchdog settings; 4 x H100, 5755022 (the
# script ran from scripts/ in that call). Neither ended the job: each ran into the 45 s limit of this script; the
# watchdog saw the timeout ~5 s after the stop on ranks 0, 2, 3 but did not end their processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$(pwd) PYTHONUNBUFFERED=1
mkdir -p $OUT/nccl
for v in "TORCH_NCCL_DUMP_ON_TIMEOUT=0 TORCH_NCCL_ASYNC_ERROR_HANDLING=3" "TORCH_NCCL_DUMP_ON_TIMEOUT=0 TORCH_NCCL_ASYNC_ERROR_HANDLING=2"; do
  tag=$(echo $v | tr ' =' '__'); rm -f /tmp/stop_$tag
  t0=$(date +%s.%N)
  env $v timeout --kill-after=5 45 mpirun --allow-run-as-root -np 4 --bind-to none -x PYTHONPATH -x TORCH_NCCL_DUMP_ON_TIMEOUT -x TORCH_NCCL_ASYNC_ERROR_HANDLING \
    -x STALL_PHASE=reference -x STALL_FILE=/tmp/stop_$tag python3 tests/mpi/bench_stall.py --collective all_reduce \
    -m 4096 -n 4096 -k 4096 --datatype bf16 --iters 20 --warmup 2 --timeout_s 5 --quiet > $OUT/nccl/$tag.log 2>&1
  rc=$?; end=$(date +%s.%N); s=$(cat /tmp/stop_$tag 2>/dev/null || echo $t0)
  echo "$v: rc $rc, $(awk -v e=$end -v s=$s 'BEGIN{printf "%.1f", e-s}') s after the stop; $(grep -aE '^python -m reference: rank' $OUT/nccl/$tag.log | head -1)" | tee -a $OUT/nccl/summary.txt
  pkill -KILL -f bench_stall.py; sleep 1
done
