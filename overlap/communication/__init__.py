"""The communication tile kernels that follow the GEMM: the loop every communication program runs
(comm_loop) and one module per algorithm with its tile mover and its epilogue push (all_reduce,
all_scatter, one_shot). They are written against iris_ops's device API and stream_k's tile order."""
