#include "../shmem.h"
