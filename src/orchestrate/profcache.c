/*
 * profcache.c — the profile cache in SQLite (profcache.h).  Uses the
 * SQLite C API (sqlite3_open_v2, prepared statements, sqlite3_busy_timeout;
 * https://www.sqlite.org/cintro.html).
 */
#include "orchestrate/profcache.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>

#define BUSY_TIMEOUT_MS 5000

struct fsl_profcache {
  sqlite3 *db;
  sqlite3_stmt *get;
  char path[4096];
};

static const char k_schema[] =
    "CREATE TABLE IF NOT EXISTS device("
    "  fingerprint TEXT PRIMARY KEY NOT NULL,"
    "  description TEXT);"
    "CREATE TABLE IF NOT EXISTS kernel_time("
    "  device TEXT NOT NULL,"
    "  kernel TEXT NOT NULL,"
    "  seconds REAL CHECK(seconds IS NULL OR seconds > 0),"
    "  measured_at INTEGER,"
    "  PRIMARY KEY(device, kernel)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS plan_time("
    "  device TEXT NOT NULL,"
    "  choice TEXT NOT NULL,"
    "  slot INTEGER NOT NULL,"
    "  seconds REAL CHECK(seconds > 0),"
    "  measured_at INTEGER,"
    "  PRIMARY KEY(device, choice, slot)) WITHOUT ROWID;";

static void hex16(char out[17], uint64_t x) { snprintf(out, 17, "%016llx", (unsigned long long)x); }

fsl_status fsl_profcache_default_path(char *buf, size_t len) {
  char dir[4096];
  fsl_status st = fsl_cache_folder(NULL, dir, sizeof dir);
  if (st != FSL_OK) return fsl_error_context(FSL_ERR_IO, "profile cache");
  int n = snprintf(buf, len, "%s/profile.sqlite", dir);
  if (n < 0 || (size_t)n >= len) return fsl_errorf(FSL_ERR_IO, "profile cache: path too long");
  return FSL_OK;
}

static fsl_status db_error(const fsl_profcache *pc, const char *what) {
  return fsl_errorf(FSL_ERR_IO, "profile cache '%s': %s: %s", pc->path, what, sqlite3_errmsg(pc->db));
}

fsl_status fsl_profcache_open(const char *path, fsl_profcache **out) {
  if (!out) return fsl_errorf(FSL_ERR_ARG, "fsl_profcache_open: NULL argument");
  *out = NULL;
  fsl_profcache *pc = calloc(1, sizeof *pc);
  if (!pc) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  fsl_status st = FSL_OK;
  if (path) {
    if ((size_t)snprintf(pc->path, sizeof pc->path, "%s", path) >= sizeof pc->path)
      st = fsl_errorf(FSL_ERR_IO, "profile cache: path too long");
  } else {
    st = fsl_profcache_default_path(pc->path, sizeof pc->path);
  }
  if (st != FSL_OK) {
    free(pc);
    return st;
  }
  int rc = sqlite3_open_v2(pc->path, &pc->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc != SQLITE_OK) {
    st = pc->db ? db_error(pc, "cannot open")
                : fsl_errorf(FSL_ERR_NOMEM, "profile cache '%s': out of memory", pc->path);
    fsl_profcache_close(pc);
    return st;
  }
  sqlite3_busy_timeout(pc->db, BUSY_TIMEOUT_MS);
  /* A read-only database (or folder) still serves lookups: the tables are
   * only created when missing (plan_time is newer than the other two: a
   * database of an earlier version gets it on its first writable open). */
  int have = 0, have_kernels = 0;
  sqlite3_stmt *q = NULL;
  rc = sqlite3_prepare_v2(pc->db,
                          "SELECT count(*), sum(name <> 'plan_time') FROM sqlite_master "
                          "WHERE name IN ('device','kernel_time','plan_time')",
                          -1, &q, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    have = sqlite3_column_int(q, 0);
    have_kernels = sqlite3_column_int(q, 1);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_ROW) st = db_error(pc, "not a readable profile database");
  /* a read-only database of an earlier version (no plan_time) still serves
   * kernel times; its plan lookups fail (and a plan choice is measured) */
  if (st == FSL_OK && have < 3 && sqlite3_exec(pc->db, k_schema, NULL, NULL, NULL) != SQLITE_OK && have_kernels < 2)
    st = db_error(pc, "cannot create tables");
  if (st == FSL_OK &&
      sqlite3_prepare_v2(pc->db, "SELECT seconds FROM kernel_time WHERE device = ?1 AND kernel = ?2", -1, &pc->get,
                         NULL) != SQLITE_OK)
    st = db_error(pc, "cannot prepare lookup");
  if (st != FSL_OK) {
    fsl_profcache_close(pc);
    return st;
  }
  *out = pc;
  return FSL_OK;
}

void fsl_profcache_close(fsl_profcache *pc) {
  if (!pc) return;
  sqlite3_finalize(pc->get);
  sqlite3_close(pc->db);
  free(pc);
}

const char *fsl_profcache_file(const fsl_profcache *pc) { return pc ? pc->path : ""; }

fsl_status fsl_profcache_get(fsl_profcache *pc, uint64_t device, uint64_t kernel, bool *found, double *seconds) {
  if (!pc || !found || !seconds) return fsl_errorf(FSL_ERR_ARG, "fsl_profcache_get: NULL argument");
  *found = false;
  char dev[17], ker[17];
  hex16(dev, device);
  hex16(ker, kernel);
  sqlite3_reset(pc->get);
  sqlite3_bind_text(pc->get, 1, dev, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(pc->get, 2, ker, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(pc->get);
  fsl_status st = FSL_OK;
  if (rc == SQLITE_ROW) {
    *found = true;
    *seconds = sqlite3_column_type(pc->get, 0) == SQLITE_NULL ? NAN : sqlite3_column_double(pc->get, 0);
    if (!isnan(*seconds) && !(*seconds > 0 && isfinite(*seconds))) *found = false; /* not ours: ignore */
  } else if (rc != SQLITE_DONE) {
    st = db_error(pc, "lookup failed");
  }
  sqlite3_reset(pc->get);
  return st;
}

fsl_status fsl_profcache_put(fsl_profcache *pc, uint64_t device, const char *description, int n,
                             const uint64_t *kernels, const double *seconds) {
  if (!pc || n < 0 || (n > 0 && (!kernels || !seconds)))
    return fsl_errorf(FSL_ERR_ARG, "fsl_profcache_put: NULL argument");
  if (n == 0) return FSL_OK;
  char dev[17], ker[17];
  hex16(dev, device);
  if (sqlite3_exec(pc->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return db_error(pc, "cannot start a write transaction");
  fsl_status st = FSL_OK;
  sqlite3_stmt *d = NULL, *k = NULL;
  if (sqlite3_prepare_v2(pc->db, "INSERT OR REPLACE INTO device(fingerprint, description) VALUES(?1, ?2)", -1, &d,
                         NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(pc->db,
                         "INSERT OR REPLACE INTO kernel_time(device, kernel, seconds, measured_at) VALUES(?1, ?2, ?3, ?4)",
                         -1, &k, NULL) != SQLITE_OK) {
    st = db_error(pc, "cannot prepare insert");
  }
  if (st == FSL_OK) {
    sqlite3_bind_text(d, 1, dev, -1, SQLITE_TRANSIENT);
    if (description) sqlite3_bind_text(d, 2, description, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(d, 2);
    if (sqlite3_step(d) != SQLITE_DONE) st = db_error(pc, "cannot store the device");
  }
  sqlite3_int64 now = (sqlite3_int64)time(NULL);
  for (int i = 0; i < n && st == FSL_OK; i++) {
    hex16(ker, kernels[i]);
    sqlite3_reset(k);
    sqlite3_bind_text(k, 1, dev, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(k, 2, ker, -1, SQLITE_TRANSIENT);
    if (isnan(seconds[i])) sqlite3_bind_null(k, 3);
    else sqlite3_bind_double(k, 3, seconds[i]);
    sqlite3_bind_int64(k, 4, now);
    if (sqlite3_step(k) != SQLITE_DONE) st = db_error(pc, "cannot store a measurement");
  }
  sqlite3_finalize(d);
  sqlite3_finalize(k);
  if (st == FSL_OK && sqlite3_exec(pc->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) st = db_error(pc, "commit failed");
  if (st != FSL_OK) sqlite3_exec(pc->db, "ROLLBACK", NULL, NULL, NULL);
  return st;
}

fsl_status fsl_profcache_get_plans(fsl_profcache *pc, uint64_t device, uint64_t choice, int n, double *seconds,
                                   bool *found) {
  if (!pc || !found || n < 0 || (n > 0 && !seconds)) return fsl_errorf(FSL_ERR_ARG, "fsl_profcache_get_plans: NULL argument");
  *found = false;
  for (int i = 0; i < n; i++) seconds[i] = NAN;
  char dev[17], ch[17];
  hex16(dev, device);
  hex16(ch, choice);
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(pc->db, "SELECT slot, seconds FROM plan_time WHERE device = ?1 AND choice = ?2", -1, &q,
                         NULL) != SQLITE_OK)
    return db_error(pc, "cannot prepare the plan lookup");
  sqlite3_bind_text(q, 1, dev, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 2, ch, -1, SQLITE_TRANSIENT);
  int rc, rows = 0;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t slot = sqlite3_column_int64(q, 0);
    double v = sqlite3_column_double(q, 1);
    if (slot < 0 || slot >= n || !(v > 0 && isfinite(v))) continue; /* not ours: ignore */
    seconds[slot] = v;
    rows++;
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) return db_error(pc, "plan lookup failed");
  *found = rows > 0;
  return FSL_OK;
}

fsl_status fsl_profcache_put_plans(fsl_profcache *pc, uint64_t device, const char *description, uint64_t choice,
                                   int n, const double *seconds) {
  if (!pc || n < 0 || (n > 0 && !seconds)) return fsl_errorf(FSL_ERR_ARG, "fsl_profcache_put_plans: NULL argument");
  char dev[17], ch[17];
  hex16(dev, device);
  hex16(ch, choice);
  if (sqlite3_exec(pc->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return db_error(pc, "cannot start a write transaction");
  fsl_status st = FSL_OK;
  sqlite3_stmt *d = NULL, *del = NULL, *k = NULL;
  if (sqlite3_prepare_v2(pc->db, "INSERT OR REPLACE INTO device(fingerprint, description) VALUES(?1, ?2)", -1, &d,
                         NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(pc->db, "DELETE FROM plan_time WHERE device = ?1 AND choice = ?2", -1, &del, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v2(pc->db,
                         "INSERT INTO plan_time(device, choice, slot, seconds, measured_at) VALUES(?1, ?2, ?3, ?4, ?5)",
                         -1, &k, NULL) != SQLITE_OK)
    st = db_error(pc, "cannot prepare insert");
  if (st == FSL_OK) {
    sqlite3_bind_text(d, 1, dev, -1, SQLITE_TRANSIENT);
    if (description) sqlite3_bind_text(d, 2, description, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(d, 2);
    if (sqlite3_step(d) != SQLITE_DONE) st = db_error(pc, "cannot store the device");
  }
  if (st == FSL_OK) {
    sqlite3_bind_text(del, 1, dev, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(del, 2, ch, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(del) != SQLITE_DONE) st = db_error(pc, "cannot replace a plan choice");
  }
  sqlite3_int64 now = (sqlite3_int64)time(NULL);
  for (int i = 0; i < n && st == FSL_OK; i++) {
    if (isnan(seconds[i])) continue; /* a slot with no plan */
    sqlite3_reset(k);
    sqlite3_bind_text(k, 1, dev, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(k, 2, ch, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(k, 3, i);
    sqlite3_bind_double(k, 4, seconds[i]);
    sqlite3_bind_int64(k, 5, now);
    if (sqlite3_step(k) != SQLITE_DONE) st = db_error(pc, "cannot store a plan time");
  }
  sqlite3_finalize(d);
  sqlite3_finalize(del);
  sqlite3_finalize(k);
  if (st == FSL_OK && sqlite3_exec(pc->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) st = db_error(pc, "commit failed");
  if (st != FSL_OK) sqlite3_exec(pc->db, "ROLLBACK", NULL, NULL, NULL);
  return st;
}

int64_t fsl_profcache_count(fsl_profcache *pc, uint64_t device) {
  if (!pc) {
    fsl_errorf(FSL_ERR_ARG, "fsl_profcache_count: NULL cache");
    return -1;
  }
  char dev[17];
  hex16(dev, device);
  sqlite3_stmt *q = NULL;
  int64_t n = -1;
  if (sqlite3_prepare_v2(pc->db, "SELECT count(*) FROM kernel_time WHERE device = ?1", -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, dev, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(q) == SQLITE_ROW) n = sqlite3_column_int64(q, 0);
  }
  if (n < 0) db_error(pc, "count failed");
  sqlite3_finalize(q);
  return n;
}
