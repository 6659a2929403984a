/* gda extensions of OpenSHMEM (none yet beyond shmem.h). */
#ifndef GDA_SHMEMX_H
#define GDA_SHMEMX_H
#include <shmem.h>
#endif
