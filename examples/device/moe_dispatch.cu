// The CUDA build of moe_dispatch.hip (the same source: nvcc -x cu).
#include "moe_dispatch.hip"
