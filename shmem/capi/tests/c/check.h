/* The checks of the C test programs: each counts in `checks`; a failed one names its line and
 * ends the PE with status 3. */
#ifndef GDA_TEST_CHECK_H
#define GDA_TEST_CHECK_H

#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

static int checks;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "PE %d: check failed at line %d: %s\n", shmem_my_pe(),     \
                    __LINE__, #cond);                                                  \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

#endif
