# CGPU_CHECK_NCCL: NCCL, used only by the side-by-side benchmark in bench/.
AC_DEFUN([CGPU_CHECK_NCCL], [
    AC_ARG_WITH([nccl],
        [AS_HELP_STRING([--with-nccl=DIR], [NCCL for bench/ (default: no)])],
        [], [with_nccl=no])
    cgpu_nccl_summary="no (benchmarks compare against nothing)"
    NCCL_CPPFLAGS=""
    NCCL_LIBS=""
    AS_IF([test "x$with_nccl" != "xno"], [
        AS_IF([test -f "$with_nccl/include/nccl.h"],
              [NCCL_CPPFLAGS="-I$with_nccl/include"; NCCL_LIBS="-L$with_nccl/lib -lnccl"
               cgpu_nccl_summary="yes ($with_nccl)"],
              [AC_MSG_ERROR([--with-nccl=$with_nccl: no include/nccl.h there])])])
    AM_CONDITIONAL([CGPU_HAVE_NCCL], [test "x$NCCL_LIBS" != "x"])
    AC_SUBST([NCCL_CPPFLAGS])
    AC_SUBST([NCCL_LIBS])
])
