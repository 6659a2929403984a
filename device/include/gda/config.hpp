// gda device API: compilation target and function qualifiers.
//
// One source compiles as HIP (hipcc), as CUDA (nvcc) and as plain host C++ (g++, clang++).
// Nothing here needs relocatable device code (-fgpu-rdc / -rdc) and nothing defines a global
// device variable: a kernel gets every handle as an argument or through a pointer.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if defined(__HIP__) || defined(__HIPCC__)
#define GDA_TARGET_HIP 1
#elif defined(__CUDACC__)
#define GDA_TARGET_CUDA 1
#else
#define GDA_TARGET_HOST 1
#endif

// Code that runs on the device and, for tests and CPU stand-ins, on the host.
#if defined(GDA_TARGET_HIP) || defined(GDA_TARGET_CUDA)
#define GDA_FN __host__ __device__ inline __attribute__((always_inline))
#else
#define GDA_FN inline __attribute__((always_inline))
#endif

// A function kept out of line on GPUs: large or cold paths (CQ polling, bounded waits, quiet,
// staging, compare-swap loops) that many routines call. Forcing them inline everywhere
// multiplies a kernel's size (and ptxas time) by the number of call sites x providers. Calls
// stay within the translation unit: no relocatable device code is needed.
#if defined(GDA_TARGET_HIP) || defined(GDA_TARGET_CUDA)
#define GDA_FN_OUTLINE __host__ __device__ inline __attribute__((noinline))
#else
#define GDA_FN_OUTLINE inline
#endif

// Whether this pass of the compiler generates device code (HIP and CUDA compile a source twice).
#if (defined(GDA_TARGET_HIP) && defined(__HIP_DEVICE_COMPILE__)) || \
    (defined(GDA_TARGET_CUDA) && defined(__CUDA_ARCH__))
#define GDA_DEVICE_PASS 1
#endif

// The encoders build big-endian wire fields in 64-bit words stored in memory order: every host
// and GPU gda supports is little-endian.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gda's device API assumes a little-endian target"
#endif
