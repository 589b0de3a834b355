# CGPU_CHECK_HWLOC: hwloc is required (device/NIC locality). Sets HWLOC_CFLAGS, HWLOC_LIBS.
AC_DEFUN([CGPU_CHECK_HWLOC], [
    PKG_CHECK_MODULES([HWLOC], [hwloc], [cgpu_hwloc_found=yes], [cgpu_hwloc_found=no])
    AS_IF([test "$cgpu_hwloc_found" = "no"], [
        AC_CHECK_HEADER([hwloc.h], [
            AC_CHECK_LIB([hwloc], [hwloc_topology_init],
                [cgpu_hwloc_found=yes; HWLOC_CFLAGS=""; HWLOC_LIBS="-lhwloc"])])])
    AS_IF([test "$cgpu_hwloc_found" != "yes"],
          [AC_MSG_ERROR([hwloc (headers and library) is required:
           Debian/Ubuntu: apt-get install libhwloc-dev])])
    cgpu_hwloc_summary="yes ($HWLOC_LIBS)"
    AC_SUBST([HWLOC_CFLAGS])
    AC_SUBST([HWLOC_LIBS])
])
