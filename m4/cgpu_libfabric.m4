# CGPU_CHECK_LIBFABRIC: optional libfabric for the inter-node proxy transport.
# Without it the inter-node proxy is off; an explicit --with-libfabric that is not
# found is an error.
AC_DEFUN([CGPU_CHECK_LIBFABRIC], [
    AC_ARG_WITH([libfabric],
        [AS_HELP_STRING([--with-libfabric], [inter-node transport through libfabric (default: if found)])],
        [], [with_libfabric=check])
    cgpu_ofi_found=no
    cgpu_ofi_summary="no (inter-node proxy off: ranks on different nodes use the fallback)"
    AS_IF([test "x$with_libfabric" != "xno"], [
        PKG_CHECK_MODULES([LIBFABRIC], [libfabric], [cgpu_ofi_found=yes], [cgpu_ofi_found=no])
        AS_IF([test "$cgpu_ofi_found" = "no" && test "x$with_libfabric" != "xcheck"],
              [AC_MSG_ERROR([--with-libfabric was given but libfabric was not found
               (Debian/Ubuntu: apt-get install libfabric-dev)])])
    ])
    AS_IF([test "$cgpu_ofi_found" = "yes"],
          [cgpu_ofi_summary="yes ($LIBFABRIC_LIBS; inter-node proxy built: btl_glue/cgpu_ofi.c, coll_gpu/engine/cgpu_proxy.c)"
           AC_DEFINE([CGPU_HAVE_LIBFABRIC], [1], [libfabric headers and library found])],
          [LIBFABRIC_CFLAGS=""; LIBFABRIC_LIBS=""])
    AM_CONDITIONAL([CGPU_HAVE_LIBFABRIC], [test "$cgpu_ofi_found" = "yes"])
    AC_SUBST([LIBFABRIC_CFLAGS])
    AC_SUBST([LIBFABRIC_LIBS])
])
