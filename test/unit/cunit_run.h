/*
 * coll/gpu unit tests: the CUnit runner every unit test program shares.
 */
#ifndef CGPU_TEST_CUNIT_RUN_H
#define CGPU_TEST_CUNIT_RUN_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cgpu_unit_case {
    const char *name;
    CU_TestFunc fn;
} cgpu_unit_case_t;

/* Runs @cases as one suite named @prog, verbosely; prints "<prog>: N asserts run, M failed"
 * and returns the process exit status: success only when no assert and no test failed and
 * CUnit itself worked. CGPU_UNIT_ONLY=<text> runs only the cases whose name contains it (by
 * hand, while working on one case; the driver runs them all). */
static inline int cgpu_unit_run(const char *prog, const cgpu_unit_case_t *cases, size_t n)
{
    if (CUE_SUCCESS != CU_initialize_registry()) {
        fprintf(stderr, "%s: cannot initialize the CUnit registry: %s\n", prog, CU_get_error_msg());
        return EXIT_FAILURE;
    }
    CU_pSuite suite = CU_add_suite(prog, NULL, NULL);
    const char *only = getenv("CGPU_UNIT_ONLY");
    for (size_t k = 0; NULL != suite && k < n; ++k) {
        if (NULL != only && NULL == strstr(cases[k].name, only)) {
            continue;
        }
        if (NULL == CU_add_test(suite, cases[k].name, cases[k].fn)) {
            suite = NULL;
        }
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    if (NULL == suite || CUE_SUCCESS != CU_basic_run_tests()) {
        fprintf(stderr, "%s: CUnit setup failed: %s\n", prog, CU_get_error_msg());
        CU_cleanup_registry();
        return EXIT_FAILURE;
    }
    /* read before CU_cleanup_registry(), which clears the run summary */
    const unsigned failed = CU_get_number_of_failures(), tests = CU_get_number_of_tests_failed();
    printf("\n%s: %u asserts run, %u failed (%u tests failed)\n", prog, CU_get_number_of_asserts(),
           failed, tests);
    CU_cleanup_registry();
    return (0 == failed && 0 == tests) ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* CGPU_TEST_CUNIT_RUN_H */
