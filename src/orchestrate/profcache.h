/*
 * profcache.h — the profile cache: measured kernel times in an SQLite
 * database, keyed by a device fingerprint and a kernel's canonical hash
 * (fsl_kernel.hash), so that a second compile of a model measures nothing
 * (docs/orchestration.md, "Measured costs").
 *
 * The database is <folder>/profile.sqlite, the folder being $FSL_CACHE_DIR,
 * else $XDG_CACHE_HOME/fissile, else $HOME/.cache/fissile.  Schema:
 *
 *   device(fingerprint TEXT PRIMARY KEY, description TEXT)
 *   kernel_time(device TEXT, kernel TEXT, seconds REAL CHECK(seconds IS NULL
 *               OR seconds > 0), measured_at INTEGER, PRIMARY KEY(device, kernel))
 *   plan_time(device TEXT, choice TEXT, slot INTEGER, seconds REAL CHECK(
 *             seconds > 0), measured_at INTEGER, PRIMARY KEY(device, choice,
 *             slot))
 *
 * fingerprints and hashes as 16 lower-case hex digits; seconds NULL records
 * a kernel that could not be measured (so it is not retried).  plan_time
 * holds the end-to-end medians of a measured plan choice (api_tune.c): one
 * row per candidate plan (slot: its strategy) of one choice (a hash of the
 * model and of the candidate plans).  Writes go
 * through one transaction per batch (rollback journal, 5 s busy timeout):
 * a failure or an interruption leaves no partial batch and every earlier
 * batch intact.
 */
#ifndef FSL_PROFCACHE_H
#define FSL_PROFCACHE_H

#include "core/core.h"

typedef struct fsl_profcache fsl_profcache;

/**
 * Writes the default database path (see above) into buf, creating the
 * folder if needed.  Errors: FSL_ERR_IO (no HOME and no cache variable, a
 * path that does not fit, a folder that cannot be created).
 */
fsl_status fsl_profcache_default_path(char *buf, size_t len);

/**
 * Opens (creating if missing) the database at `path` (NULL: the default
 * path) and its tables.  Errors: FSL_ERR_IO when the file cannot be opened
 * or created (read-only or missing folder), is not an SQLite database
 * (corrupt), or its tables cannot be created or read; FSL_ERR_NOMEM.  The
 * message names the file and SQLite's reason.  Never modifies a file that
 * is not a database.
 */
fsl_status fsl_profcache_open(const char *path, fsl_profcache **out);
void fsl_profcache_close(fsl_profcache *pc);
/** The database file's path. */
const char *fsl_profcache_file(const fsl_profcache *pc);

/**
 * Looks up kernel `kernel` on device `device`.  *found is false on a miss;
 * on a hit *seconds is the measured time, or NaN when the kernel was
 * recorded as not measurable.  Errors: FSL_ERR_IO (the read failed, e.g. a
 * database corrupted after opening).
 */
fsl_status fsl_profcache_get(fsl_profcache *pc, uint64_t device, uint64_t kernel, bool *found, double *seconds);

/**
 * Stores n measurements of `device` in one transaction, with the device's
 * description (may be NULL): seconds[i] > 0 is a time, NaN records a kernel
 * that could not be measured; an existing entry is replaced.  Any other
 * value (zero, negative, infinite) violates the table's CHECK: then, as on
 * any failure (disk or database full, read-only file, lock timeout), the
 * transaction is rolled back and nothing of the batch is stored.
 * Errors: FSL_ERR_IO (message names the file and SQLite's reason).
 */
fsl_status fsl_profcache_put(fsl_profcache *pc, uint64_t device, const char *description, int n,
                             const uint64_t *kernels, const double *seconds);

/**
 * Looks up the plan times of choice `choice` on `device`: seconds[slot]
 * receives the stored median of each slot in [0, n), NaN where none is
 * stored; *found is true when at least one slot is.  Rows outside [0, n)
 * or with a time that is not positive and finite are ignored.
 * Errors: FSL_ERR_IO (the read failed).
 */
fsl_status fsl_profcache_get_plans(fsl_profcache *pc, uint64_t device, uint64_t choice, int n, double *seconds,
                                   bool *found);

/**
 * Replaces the plan times of choice `choice` on `device` by seconds[0..n)
 * (NaN: a slot with no plan, not stored), in one transaction with the
 * device's description (may be NULL).  A time that is not NaN must be
 * positive and finite (the table's CHECK); any failure rolls the whole
 * transaction back, leaving the earlier rows as they were.
 * Errors: FSL_ERR_IO (message names the file and SQLite's reason).
 */
fsl_status fsl_profcache_put_plans(fsl_profcache *pc, uint64_t device, const char *description, uint64_t choice,
                                   int n, const double *seconds);

/** Number of entries stored for `device` (-1 on error, with an error set). */
int64_t fsl_profcache_count(fsl_profcache *pc, uint64_t device);

#endif
