# CGPU_CHECK_LIBFABRIC: optional libfabric for the inter-node proxy transport.
# Without it the inter-node proxy is off; an explicit --with-libfabric that is not
# found is an error.
#
# The plugin compiles against libfabric's headers but does not link the library: loading
# it (and the provider libraries it pulls in) costs a job's every process about 0.2 s, so
# btl_glue/cgpu_ofi.c opens it with dlopen at the first inter-node use. What a normal link
# would have fixed is read here from a program linked the usual way: the library's soname
# (CGPU_OFI_SONAME) and, for each of the few real functions called, the symbol version the
# headers were written for (CGPU_OFI_VER_*; "" when the library has no versions), so that
# dlvsym finds the same ABI a linked program would, not a newer library's default.
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
    AS_IF([test "$cgpu_ofi_found" = "yes"], [_CGPU_LIBFABRIC_LINK_FACTS])
    AS_IF([test "$cgpu_ofi_found" = "yes"],
          [cgpu_ofi_summary="yes ($cgpu_ofi_soname loaded at the first inter-node use; inter-node proxy built: btl_glue/cgpu_ofi.c, coll_gpu/engine/cgpu_proxy.c)"
           AC_DEFINE([CGPU_HAVE_LIBFABRIC], [1], [libfabric headers and library found])],
          [LIBFABRIC_CFLAGS=""; LIBFABRIC_LIBS=""])
    AM_CONDITIONAL([CGPU_HAVE_LIBFABRIC], [test "$cgpu_ofi_found" = "yes"])
    AC_SUBST([LIBFABRIC_CFLAGS])
    AC_SUBST([LIBFABRIC_LIBS])
])

# The soname and symbol versions a program linked against libfabric records (see above).
# A test program that does not link means the library found is unusable: libfabric is off
# (an error under an explicit --with-libfabric).
AC_DEFUN([_CGPU_LIBFABRIC_LINK_FACTS], [
    AC_CHECK_TOOL([READELF], [readelf], [no])
    cgpu_ofi_soname=libfabric.so.1
    cgpu_ofi_ver_getinfo= cgpu_ofi_ver_freeinfo= cgpu_ofi_ver_dupinfo=
    cgpu_ofi_ver_fabric= cgpu_ofi_ver_strerror=
    cgpu_ofi_save_CFLAGS=$CFLAGS
    cgpu_ofi_save_LIBS=$LIBS
    CFLAGS="$CFLAGS $LIBFABRIC_CFLAGS"
    LIBS="$LIBFABRIC_LIBS $LIBS"
    AC_MSG_CHECKING([the libfabric soname and symbol versions a linked program uses])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <rdma/fabric.h>]], [[
        struct fi_info *info = fi_dupinfo(NULL), *list = NULL;
        struct fid_fabric *fab = NULL;
        int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0,
                            info, &list);
        rc += fi_fabric(NULL, &fab, NULL);
        fi_freeinfo(info);
        return rc + (NULL == fi_strerror(rc));]])],
        [AS_IF([test "x$READELF" != "xno"], [
             cgpu_ofi_n=`$READELF -d conftest$EXEEXT 2>/dev/null |
                 sed -n 's/.*Shared library: \@<:@\(libfabric\.so@<:@^@:>@@:>@*\)@:>@.*/\1/p' | head -n 1`
             AS_IF([test -n "$cgpu_ofi_n"], [cgpu_ofi_soname=$cgpu_ofi_n])
             for cgpu_ofi_f in getinfo freeinfo dupinfo fabric strerror; do
                 cgpu_ofi_v=`$READELF -W --dyn-syms conftest$EXEEXT 2>/dev/null |
                     sed -n "s/.* fi_$cgpu_ofi_f@\(@<:@A-Za-z0-9_.@:>@*\).*/\1/p" | head -n 1`
                 eval "cgpu_ofi_ver_$cgpu_ofi_f=\$cgpu_ofi_v"
             done])
         AC_MSG_RESULT([$cgpu_ofi_soname; fi_getinfo@${cgpu_ofi_ver_getinfo:-(none)}, dnl
fi_freeinfo@${cgpu_ofi_ver_freeinfo:-(none)}, fi_dupinfo@${cgpu_ofi_ver_dupinfo:-(none)}, dnl
fi_fabric@${cgpu_ofi_ver_fabric:-(none)}, fi_strerror@${cgpu_ofi_ver_strerror:-(none)}])],
        [AC_MSG_RESULT([a program using libfabric does not link])
         AS_IF([test "x$with_libfabric" != "xcheck"],
               [AC_MSG_ERROR([--with-libfabric was given but a program using it does not link (see config.log)])])
         cgpu_ofi_found=no])
    CFLAGS=$cgpu_ofi_save_CFLAGS
    LIBS=$cgpu_ofi_save_LIBS
    AC_DEFINE_UNQUOTED([CGPU_OFI_SONAME], ["$cgpu_ofi_soname"],
                       [libfabric's soname, opened with dlopen at the first inter-node use])
    AC_DEFINE_UNQUOTED([CGPU_OFI_VER_GETINFO], ["$cgpu_ofi_ver_getinfo"],
                       [symbol version of fi_getinfo the headers match ("" = unversioned)])
    AC_DEFINE_UNQUOTED([CGPU_OFI_VER_FREEINFO], ["$cgpu_ofi_ver_freeinfo"],
                       [symbol version of fi_freeinfo the headers match ("" = unversioned)])
    AC_DEFINE_UNQUOTED([CGPU_OFI_VER_DUPINFO], ["$cgpu_ofi_ver_dupinfo"],
                       [symbol version of fi_dupinfo the headers match ("" = unversioned)])
    AC_DEFINE_UNQUOTED([CGPU_OFI_VER_FABRIC], ["$cgpu_ofi_ver_fabric"],
                       [symbol version of fi_fabric the headers match ("" = unversioned)])
    AC_DEFINE_UNQUOTED([CGPU_OFI_VER_STRERROR], ["$cgpu_ofi_ver_strerror"],
                       [symbol version of fi_strerror the headers match ("" = unversioned)])
])
