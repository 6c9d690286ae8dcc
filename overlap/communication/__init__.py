"""The communication machinery every algorithm shares: the loop every communication program runs (comm_loop: take
a tile, wait until it is ready, move it with the algorithm's tile mover, log it; tile ownership; the rank-order
sum of the reduce family) and the copy engines' schedules (copy_engine). Each algorithm's own tile mover and
epilogues live in its module of overlap.algorithms."""
