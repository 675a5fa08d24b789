/* test_files.c — atomic whole-file writes in src/core/util.c
 * (fsl_write_file_atomic, fsl_write_bytes_atomic, fsl_temp_beside): the
 * whole new file or the old one, never a part, and no temporary left. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/fsl_test_files_XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

/* Removes the folder's files; returns how many there were. */
static int clear_dir(void) {
  DIR *d = opendir(g_dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char p[400];
    snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
    unlink(p);
    n++;
  }
  closedir(d);
  return n;
}

static int teardown(void **state) {
  (void)state;
  clear_dir();
  return rmdir(g_dir);
}

static void expect_content(const char *path, const char *want) {
  void *buf = NULL;
  size_t len = 0;
  assert_int_equal(fsl_read_file(path, 1 << 20, &buf, &len), FSL_OK);
  assert_int_equal(len, strlen(want));
  assert_memory_equal(buf, want, len);
  free(buf);
}

static int write_text(FILE *f, const void *ctx) {
  fputs(ctx, f);
  return 0;
}

static int write_then_fail(FILE *f, const void *ctx) {
  fputs("half", f);
  return ENOSPC;
}

static void test_write_replace(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/a.txt", g_dir);
  assert_int_equal(fsl_write_bytes_atomic(path, "first", 5), FSL_OK);
  expect_content(path, "first");
  mode_t mask = umask(022);
  assert_int_equal(fsl_write_file_atomic(path, write_text, "second, longer"), FSL_OK);
  umask(mask);
  expect_content(path, "second, longer");
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0644); /* 0666 less the umask, as fopen */
  assert_int_equal(fsl_write_bytes_atomic(path, NULL, 0), FSL_OK);
  expect_content(path, "");
  assert_int_equal(clear_dir(), 1); /* no temporary left */
}

static void test_failure_keeps_old_file(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/b.txt", g_dir);
  assert_int_equal(fsl_write_bytes_atomic(path, "old", 3), FSL_OK);
  assert_int_equal(fsl_write_file_atomic(path, write_then_fail, NULL), FSL_ERR_IO);
  assert_non_null(strstr(fsl_last_error(), "cannot write '"));
  assert_non_null(strstr(fsl_last_error(), strerror(ENOSPC)));
  expect_content(path, "old");
  /* a missing folder, and a folder in the way */
  char missing[160];
  snprintf(missing, sizeof missing, "%s/no/such/c.txt", g_dir);
  assert_int_equal(fsl_write_bytes_atomic(missing, "x", 1), FSL_ERR_IO);
  assert_non_null(strstr(fsl_last_error(), missing));
  char sub[160];
  snprintf(sub, sizeof sub, "%s/sub", g_dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  assert_int_equal(fsl_write_bytes_atomic(sub, "x", 1), FSL_ERR_IO);
  assert_int_equal(rmdir(sub), 0);
  assert_int_equal(fsl_write_file_atomic(NULL, write_text, ""), FSL_ERR_ARG);
  assert_int_equal(clear_dir(), 1); /* only b.txt */
}

static void test_temp_beside(void **state) {
  (void)state;
  char path[128], t1[256], t2[256];
  snprintf(path, sizeof path, "%s/d.bin", g_dir);
  int a = fsl_temp_beside(path, t1, sizeof t1), b = fsl_temp_beside(path, t2, sizeof t2);
  assert_true(a >= 0 && b >= 0);
  assert_string_not_equal(t1, t2);
  assert_memory_equal(t1, path, strlen(path)); /* same folder */
  close(a);
  close(b);
  char small[8];
  errno = 0;
  assert_int_equal(fsl_temp_beside(path, small, sizeof small), -1);
  assert_int_equal(errno, ENAMETOOLONG);
  assert_int_equal(clear_dir(), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_replace),
      cmocka_unit_test(test_failure_keeps_old_file),
      cmocka_unit_test(test_temp_beside),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
