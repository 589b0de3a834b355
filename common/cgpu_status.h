/*
 * coll/gpu engine: the one status type (DESIGN decision 7).
 *
 * OK is 0, "still running" is positive, errors are negative. Foreign error codes
 * (errno, CUDA, libfabric) are converted to these at the boundary where they appear;
 * MPI error classes exist only in the MPI entry files of coll_gpu/.
 */
#ifndef CGPU_STATUS_H
#define CGPU_STATUS_H

typedef enum cgpu_status {
    CGPU_OK = 0,
    CGPU_IN_PROGRESS = 1,
    CGPU_DECLINED = 2,           /* a path does not take this call: the next one does */
    CGPU_ERR_NO_MEMORY = -1,     /* malloc/mmap/shm sizing failed */
    CGPU_ERR_INVALID_ARG = -2,   /* caller passed something the engine cannot use */
    CGPU_ERR_NOT_SUPPORTED = -3, /* valid, but this engine/backend does not do it */
    CGPU_ERR_NO_RESOURCE = -4,   /* a bounded resource (cap) is exhausted */
    CGPU_ERR_SYSTEM = -5,        /* an OS call failed (see the log for errno) */
    CGPU_ERR_BOOTSTRAP = -6,     /* the out-of-band exchange through MPI failed */
    CGPU_ERR_STATE = -7,         /* misuse: object destroyed, not ready, in use */
    CGPU_ERR_TIMEOUT = -8,       /* a peer made no progress within the timeout */
    CGPU_ERR_PEER = -9,          /* another rank reported a failure in a collective step */
    CGPU_ERR_DEVICE = -10,       /* CUDA driver/runtime error */
    CGPU_ERR_PEER_DEAD = -11,    /* a peer process of the communicator died */
    CGPU_ERR_MISMATCH = -12,     /* the ranks called a collective with arguments that differ */
} cgpu_status_t;

/**
 * Human-readable name of a status, for log messages.
 *
 * @param st  any value, including ones not in the enum
 * @return    a static string, never NULL
 */
const char *cgpu_status_string(cgpu_status_t st);

#endif /* CGPU_STATUS_H */
