/*
 * test/mpi/config_probe.c: the MPI program check_config.sh runs under each setting it checks
 * (built there with mpicc, so it needs nothing of the build tree).
 *
 *   config_probe        one MPI_Allreduce on host buffers; rank 0 prints
 *                       "probe: engine_calls N", N being what coll_gpu_engine_calls counted on
 *                       MPI_COMM_WORLD (whether coll/gpu served the job), -1 without that pvar
 *   config_probe texts  every coll_gpu_* control and performance variable, one line each
 *                       ("cvar NAME", "pvar NAME CLASS BIND": CLASS as docs/pvars.md names
 *                       it, BIND "comm" or "none"), a line "pvar-enum NAME VALUE ITEM" for each
 *                       value of a pvar's enumerator, and a "BAD ..." line for each value of an
 *                       enumerator of ours that the variable's description does not name,
 *                       then "enumerators checked: N"; exit status 1 after a BAD line
 *
 * Its own lines never contain "coll/gpu:", which the script counts as the component's.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define TEXT 16384

static int find_pvar(const char *want, int *is_ull)
{
    int n = 0;
    MPI_T_pvar_get_num(&n);
    for (int i = 0; i < n; ++i) {
        char name[256], desc[TEXT];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_SUCCESS == MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en, desc, &dlen,
                                               &bind, &ro, &cont, &atomic) &&
            0 == strcmp(name, want)) {
            *is_ull = MPI_UNSIGNED_LONG_LONG == dt;
            return i;
        }
    }
    return -1;
}

/* engine_calls of MPI_COMM_WORLD around one allreduce; -1 without the pvar */
static long long probe(void)
{
    int ull = 0;
    const int idx = find_pvar("coll_gpu_engine_calls", &ull);
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    int count = 0;
    MPI_Comm comm = MPI_COMM_WORLD;
    const int have = idx >= 0 && ull && MPI_SUCCESS == MPI_T_pvar_session_create(&s) &&
                     MPI_SUCCESS == MPI_T_pvar_handle_alloc(s, idx, &comm, &h, &count);
    if (have) {
        (void) MPI_T_pvar_start(s, h); /* continuous pvars may refuse: they count anyway */
    }
    int in = 1, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    unsigned long long v = 0;
    if (!have || MPI_SUCCESS != MPI_T_pvar_read(s, h, &v)) {
        return -1;
    }
    MPI_T_pvar_handle_free(s, &h);
    MPI_T_pvar_session_free(&s);
    return (long long) v;
}

static int enums_checked;

/* whether @p desc lists @p item (of number @p value) as an entry of its "Values: " list:
 * "Values: item (", ", item,", ", 3 item." and so on, not merely the word somewhere */
static int lists(const char *desc, const char *item, int value)
{
    const char *list = strstr(desc, "Values: ");
    static const char *const pre[] = {"Values: ", ", "}, *const post[] = {" (", ",", "."};
    for (int a = 0; NULL != list && a < 2; ++a) {
        for (int numbered = 0; numbered < 2; ++numbered) {
            for (int b = 0; b < 3; ++b) {
                char want[320];
                if (numbered) {
                    snprintf(want, sizeof(want), "%s%d %s%s", pre[a], value, item, post[b]);
                } else {
                    snprintf(want, sizeof(want), "%s%s%s", pre[a], item, post[b]);
                }
                if (NULL != strstr(list, want)) {
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* the values of enumerator @p en missing from @p desc, as BAD lines; how many */
static int check_enum(const char *kind, const char *name, MPI_T_enum en, const char *desc)
{
    char ename[256];
    int num = 0, elen = sizeof(ename), bad = 0;
    if (MPI_T_ENUM_NULL == en || MPI_SUCCESS != MPI_T_enum_get_info(en, &num, ename, &elen) ||
        0 != strncmp(ename, "coll_gpu_", 9)) {
        return 0; /* not one of ours (the booleans' is Open MPI's) */
    }
    ++enums_checked;
    for (int k = 0; k < num; ++k) {
        char item[256];
        int value, ilen = sizeof(item);
        if (MPI_SUCCESS != MPI_T_enum_get_item(en, k, &value, item, &ilen)) {
            printf("BAD %s %s: value %d of its enumerator unreadable\n", kind, name, k);
            ++bad;
        } else if (!lists(desc, item, value)) {
            printf("BAD %s %s: its description does not name the value \"%s\" (%d)\n", kind, name,
                   item, value);
            ++bad;
        }
    }
    return bad;
}

/* the class as docs/pvars.md names it */
static const char *class_name(int cls)
{
    switch (cls) {
    case MPI_T_PVAR_CLASS_STATE:
        return "state";
    case MPI_T_PVAR_CLASS_LEVEL:
        return "level";
    case MPI_T_PVAR_CLASS_COUNTER:
        return "counter";
    case MPI_T_PVAR_CLASS_SIZE:
        return "size";
    case MPI_T_PVAR_CLASS_PERCENTAGE:
        return "percentage";
    case MPI_T_PVAR_CLASS_HIGHWATERMARK:
        return "highwatermark";
    case MPI_T_PVAR_CLASS_LOWWATERMARK:
        return "lowwatermark";
    case MPI_T_PVAR_CLASS_AGGREGATE:
        return "aggregate";
    case MPI_T_PVAR_CLASS_TIMER:
        return "timer";
    default:
        return "generic";
    }
}

/* "pvar-enum NAME VALUE ITEM" for each value of @p en */
static void print_enum_items(const char *name, MPI_T_enum en)
{
    char ename[256];
    int num = 0, elen = sizeof(ename);
    if (MPI_T_ENUM_NULL == en || MPI_SUCCESS != MPI_T_enum_get_info(en, &num, ename, &elen)) {
        return;
    }
    for (int k = 0; k < num; ++k) {
        char item[256];
        int value, ilen = sizeof(item);
        if (MPI_SUCCESS == MPI_T_enum_get_item(en, k, &value, item, &ilen)) {
            printf("pvar-enum %s %d %s\n", name, value, item);
        }
    }
}

static int texts(void)
{
    int n = 0, bad = 0;
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n; ++i) {
        char name[256], desc[TEXT];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_SUCCESS !=
                MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, desc, &dlen, &bind, &scope) ||
            0 != strncmp(name, "coll_gpu_", 9)) {
            continue;
        }
        printf("cvar %s\n", name);
        bad += check_enum("cvar", name, en, desc);
    }
    MPI_T_pvar_get_num(&n);
    for (int i = 0; i < n; ++i) {
        char name[256], desc[TEXT];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_SUCCESS != MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en, desc, &dlen,
                                               &bind, &ro, &cont, &atomic) ||
            0 != strncmp(name, "coll_gpu_", 9)) {
            continue;
        }
        printf("pvar %s %s %s\n", name, class_name(cls),
               MPI_T_BIND_MPI_COMM == bind    ? "comm"
               : MPI_T_BIND_NO_OBJECT == bind ? "none"
                                              : "other");
        print_enum_items(name, en);
        bad += check_enum("pvar", name, en, desc);
    }
    printf("enumerators checked: %d\n", enums_checked);
    return bad;
}

int main(int argc, char **argv)
{
    int provided, rank, rc = 0;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1 && 0 == strcmp(argv[1], "texts")) {
        rc = 0 == rank && texts() > 0;
    } else {
        const long long calls = probe();
        if (0 == rank) {
            printf("probe: engine_calls %lld\n", calls);
        }
    }
    fflush(stdout);
    /* MPI_T_finalize after MPI_Finalize crashes in Open MPI 4.1: before it */
    MPI_T_finalize();
    MPI_Finalize();
    return rc;
}
