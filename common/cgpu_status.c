/*
 * coll/gpu engine: status strings.
 */
#include "cgpu_status.h"

const char *cgpu_status_string(cgpu_status_t st)
{
    switch (st) {
    case CGPU_OK:
        return "success";
    case CGPU_IN_PROGRESS:
        return "in progress";
    case CGPU_DECLINED:
        return "declined (another path takes it)";
    case CGPU_ERR_NO_MEMORY:
        return "out of memory";
    case CGPU_ERR_INVALID_ARG:
        return "invalid argument";
    case CGPU_ERR_NOT_SUPPORTED:
        return "not supported";
    case CGPU_ERR_NO_RESOURCE:
        return "resource limit reached";
    case CGPU_ERR_SYSTEM:
        return "operating system error";
    case CGPU_ERR_BOOTSTRAP:
        return "bootstrap exchange failed";
    case CGPU_ERR_STATE:
        return "object in the wrong state (misuse)";
    case CGPU_ERR_TIMEOUT:
        return "timed out waiting for a peer";
    case CGPU_ERR_PEER:
        return "a peer rank failed";
    case CGPU_ERR_DEVICE:
        return "device (CUDA) error";
    case CGPU_ERR_PEER_DEAD:
        return "a peer process died";
    case CGPU_ERR_MISMATCH:
        return "the ranks' calls do not match";
    }
    return "unknown status";
}
