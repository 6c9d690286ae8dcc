set -u
export STREAMK_PGAS_COMMIT=$1
COMM=0 SHAPES="512x8192x8192 1000x3000x2500" timeout 150 bash results/logs/h100x4/run_w4_reduce.sh > /tmp/c4a.log 2>&1
cp /tmp/work/summary.txt /tmp/summary_w4.txt; mkdir -p $OUT/w4; cp /tmp/work/summary.txt $OUT/w4/; tar czf $OUT/w4/runs.tgz -C /tmp/work .
rm -rf /tmp/work
COMM=0 NP_GRID=2 SHAPES="128x8192x8192 1024x8192x8192 512x8192x28672 4864x4096x8256 8192x8192x8192 16384x8192x8192" timeout 400 bash results/logs/h100x4/run_w4_reduce.sh > /tmp/c4b.log 2>&1
cp /tmp/c4a.log /tmp/c4b.log $OUT/
tail -n 3 /tmp/c4a.log /tmp/c4b.log
