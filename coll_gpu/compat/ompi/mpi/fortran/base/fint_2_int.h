/*
 * coll/gpu build shim: Debian's and Ubuntu's Open MPI devel headers include this file from
 * ompi/op/op.h but do not ship it. coll/gpu reads op.h only for the op tables (which
 * datatype an intrinsic op is defined on); the Fortran conversion below is used by an
 * inline function of op.h that coll/gpu never calls. Searched after Open MPI's own include
 * directories (-idirafter), so a real copy wins where it exists.
 */
#ifndef CGPU_COMPAT_FINT_2_INT_H
#define CGPU_COMPAT_FINT_2_INT_H
#define OMPI_INT_2_FINT(a) ((MPI_Fint) (a))
#endif
