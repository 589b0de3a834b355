# CGPU_CHECK_OMPI: find Open MPI's internal ("devel") headers and check its coll ABI.
#
# Sets OMPI_CPPFLAGS (as -isystem, so Open MPI's own headers do not trip our -Wextra),
# OMPI_LIBS, OMPI_PKGLIBDIR (where Open MPI looks for its components) and
# ompiplugindir (where `make install` puts mca_coll_gpu.so).
AC_DEFUN([CGPU_CHECK_OMPI], [
    AC_ARG_WITH([ompi],
        [AS_HELP_STRING([--with-ompi=DIR],
            [Open MPI install prefix (default: found through mpicc in PATH)])])
    AC_ARG_WITH([plugin-dir],
        [AS_HELP_STRING([--with-plugin-dir=DIR],
            [where to install mca_coll_gpu.so (default: LIBDIR/openmpi; Open MPI also
             searches \$HOME/.openmpi/components and its own plugin dir)])])

    cgpu_mpicc=mpicc
    cgpu_ompi_info=ompi_info
    AS_IF([test -n "$with_ompi" && test "x$with_ompi" != "xyes"],
          [cgpu_mpicc="$with_ompi/bin/mpicc"; cgpu_ompi_info="$with_ompi/bin/ompi_info"])
    AC_MSG_CHECKING([for Open MPI compile flags ($cgpu_mpicc --showme:compile)])
    cgpu_ompi_inc=`$cgpu_mpicc --showme:incdirs 2>/dev/null`
    AS_IF([test -z "$cgpu_ompi_inc"],
          [AC_MSG_RESULT([not found])
           AC_MSG_ERROR([mpicc not found or not Open MPI: install Open MPI with its devel
           headers (Debian/Ubuntu: apt-get install libopenmpi-dev openmpi-bin) or pass
           --with-ompi=PREFIX])])
    OMPI_CPPFLAGS=""
    for d in $cgpu_ompi_inc; do
        OMPI_CPPFLAGS="$OMPI_CPPFLAGS -isystem $d"
    done
    dnl the internal headers live one level down on some installs (Debian: include/openmpi)
    for d in $cgpu_ompi_inc; do
        AS_IF([test -d "$d/openmpi" && test ! -f "$d/ompi_config.h"],
              [case " $cgpu_ompi_inc " in
                   *" $d/openmpi "*) ;;
                   *) OMPI_CPPFLAGS="$OMPI_CPPFLAGS -isystem $d/openmpi" ;;
               esac])
    done
    AC_MSG_RESULT([$OMPI_CPPFLAGS])
    cgpu_ompi_libdirs=`$cgpu_mpicc --showme:libdirs 2>/dev/null`
    OMPI_LIBS=""
    for d in $cgpu_ompi_libdirs; do OMPI_LIBS="$OMPI_LIBS -L$d"; done
    OMPI_LIBS="$OMPI_LIBS -lmpi -lopen-pal"

    cgpu_save_CPPFLAGS="$CPPFLAGS"
    CPPFLAGS="$CPPFLAGS $OMPI_CPPFLAGS"
    AC_MSG_CHECKING([for Open MPI's internal coll header (ompi/mca/coll/coll.h)])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#include "ompi_config.h"
#include "ompi/mca/coll/coll.h"
]], [[ mca_coll_base_component_2_0_0_t c; mca_coll_base_module_2_3_0_t m;
      (void) c; (void) m;
      mca_base_component_t v = { MCA_COLL_BASE_VERSION_2_0_0 }; (void) v; ]])],
        [AC_MSG_RESULT([yes, component 2_0_0 and module 2_3_0 (the 4.1 series ABI)])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([Open MPI's devel headers are missing or its coll ABI is not the 4.1
         series (component 2_0_0, module 2_3_0). coll/gpu supports Open MPI 4.1.x.])])
    AC_MSG_CHECKING([Open MPI version])
    AC_COMPUTE_INT([cgpu_ompi_major], [OMPI_MAJOR_VERSION], [#include "ompi_config.h"], [cgpu_ompi_major=0])
    AC_COMPUTE_INT([cgpu_ompi_minor], [OMPI_MINOR_VERSION], [#include "ompi_config.h"], [cgpu_ompi_minor=0])
    AC_COMPUTE_INT([cgpu_ompi_release], [OMPI_RELEASE_VERSION], [#include "ompi_config.h"], [cgpu_ompi_release=0])
    AC_MSG_RESULT([$cgpu_ompi_major.$cgpu_ompi_minor.$cgpu_ompi_release])
    AS_IF([test "$cgpu_ompi_major" != "4" || test "$cgpu_ompi_minor" != "1"],
          [AC_MSG_WARN([Open MPI $cgpu_ompi_major.$cgpu_ompi_minor is not the 4.1 series this
           component is tested with; the coll ABI check passed, continuing])])
    CPPFLAGS="$cgpu_save_CPPFLAGS"

    OMPI_PKGLIBDIR=`$cgpu_ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p'`
    AS_IF([test -n "$with_plugin_dir" && test "x$with_plugin_dir" != "xyes"],
          [ompiplugindir="$with_plugin_dir"],
          [ompiplugindir='${libdir}/openmpi'])
    cgpu_ompi_summary="$cgpu_ompi_major.$cgpu_ompi_minor.$cgpu_ompi_release ($cgpu_mpicc; components in $OMPI_PKGLIBDIR)"
    AC_SUBST([OMPI_CPPFLAGS])
    AC_SUBST([OMPI_LIBS])
    AC_SUBST([OMPI_PKGLIBDIR])
    AC_SUBST([ompiplugindir])
    AC_SUBST([MPICC], [$cgpu_mpicc])
])
