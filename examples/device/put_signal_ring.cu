// The CUDA build of put_signal_ring.hip (the same source: nvcc -x cu).
#include "put_signal_ring.hip"
