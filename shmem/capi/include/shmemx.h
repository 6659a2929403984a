/* gda extensions of OpenSHMEM. */
#ifndef GDA_SHMEMX_H
#define GDA_SHMEMX_H
#include <shmem.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This PE's SHMEM device context: pass it to a kernel (or CPU threads) that uses the device API
 * of <gda/shmem.hpp> as `const gda::shmem::Ctx*` (check it there with gda::shmem::check). Valid
 * until shmem_finalize; NULL, with the reason on stderr, if it cannot be built. */
const void *shmemx_device_context(void);

#ifdef __cplusplus
}
#endif
#endif
