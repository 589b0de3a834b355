# CGPU_CHECK_CUNIT: CUnit for the unit tests (`make check`). Without it the unit tests
# are not built and configure says so; the MPI integration tests still run.
AC_DEFUN([CGPU_CHECK_CUNIT], [
    cgpu_cunit_found=no
    AC_CHECK_HEADER([CUnit/Basic.h],
        [AC_CHECK_LIB([cunit], [CU_initialize_registry], [cgpu_cunit_found=yes])])
    AS_IF([test "$cgpu_cunit_found" = "yes"],
          [cgpu_cunit_summary="yes"; CUNIT_LIBS="-lcunit"],
          [cgpu_cunit_summary="no (unit tests not built: apt-get install libcunit1-dev)"; CUNIT_LIBS=""])
    AM_CONDITIONAL([CGPU_HAVE_CUNIT], [test "$cgpu_cunit_found" = "yes"])
    AC_SUBST([CUNIT_LIBS])
])
