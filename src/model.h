/* model.h — the state behind the public fsl_model handle (include/fissile.h),
 * shared by the files that implement the public API (api.c and its
 * siblings, pipeline.c); nothing else includes it. */
#ifndef FSL_MODEL_H
#define FSL_MODEL_H

#include "fissile.h"
#include "backend/backend.h"
#include "orchestrate/orchestrate.h"
#include "rewrite/rewrite.h"
#include "runtime/memplan.h"

typedef struct dim_binding { char *name; int64_t size; } dim_binding;

/* What the measured plan choice did (api_tune.c; fsl_plan_info's tune fields). */
typedef struct fsl_tune_result {
  bool tuned, cached;
  int n_candidates, rounds;
  double seconds;
  double median_s[FSL_STRATEGY_COUNT];
  int same_as[FSL_STRATEGY_COUNT];
} fsl_tune_result;

struct fsl_model {
  fsl_graph *onnx;   /* as imported (frozen inputs become constants) */
  fsl_graph *prim;   /* after compile, NULL before */
  dim_binding *dims;
  int n_dims;
  int strategy;      /* fsl_strategy, -1: not set */
  char backend[16];  /* "ref" (default), "plan-ref", "cpu" */
  bool profile;      /* measured kernel costs (fsl_model_set_profile) */
  bool autotune;     /* measured plan choice (fsl_model_set_autotune, api_tune.c) */
  int rewrite;       /* fsl_rewrite_mode */
  /* what the rewrite of prim applied (per rule of the built-in set) */
  int n_rewrites;
  int n_lut_tables;  /* fsl_pass_lut8's tables in prim */
  int n_qdq_lifted;  /* fsl_pass_qdq_lift's quantizations computed on integers */
  int *rewrite_fired;
  double rewrite_s;
  /* --rewrite search: the budget and alpha of the next fission's search
   * (zero: the defaults; a compiled model file sets them to replay its
   * search, api_aot.c), and what the last search used */
  fsl_rewrite_search_opts search;
  int search_evals;
  int search_regions_solved, search_regions_cached; /* the last search's region costs */
  double search_alpha;
  /* built by compile when a strategy or a plan backend is set (for a
   * backend that needs no plan, plan holds the graph alone otherwise): */
  bool has_plan;
  fsl_plan plan;     /* over prim */
  fsl_memplan mem;   /* plan's memory plan with the backend's options, handed to its compile */
  fsl_device dev;
  fsl_backend_caps caps;  /* the backend's, read once per plan (fsl_model_caps) */
  bool has_caps;
  const fsl_backend *be;  /* the backend that runs the model (NULL: not compiled) */
  void *exe;              /* be's executable of plan (a backend that needs no plan: of prim) */
  double backend_s;
  fsl_tune_result tune;   /* what the measured plan choice did (tuned false: none) */
  /* compile's result is current: prim (and plan, exe) match the settings
   * and the thread count (a second compile then does nothing) */
  bool compiled;
  int compiled_threads;
  bool from_file;    /* the plan and executable came from a compiled model file: the
                        thread count no longer decides them (only the runs' threads) */
  /* what fsl_model_save needs to write the model again (api_aot.c): the
   * ONNX bytes (a copy; or the file, re-read and checked against the hash),
   * and the inputs frozen to constants, in the order they were frozen */
  unsigned char *src;
  size_t src_len;
  char *src_path;
  uint64_t src_hash;
  fsl_value **frozen;
  int n_frozen;
};

/* ---- entry points of the public API's files (the pipeline they share:
 * pipeline.h) ---- */

/* api_threads.c */
/** The threads set with fsl_set_num_threads (0: the default). */
int fsl_model_threads(void);

/* api_tune.c */
/** With the optimal plan of m built and compiled (m->plan, m->mem, m->exe):
 *  the measured plan choice of fsl_model_set_autotune, which may replace
 *  them by a baseline's; popt as the optimal plan was built with. */
fsl_status fsl_model_autotune(fsl_model *m, const fsl_plan_options *popt);

/* api_aot.c */
/** Whether buf starts like a compiled model file (.fsl). */
bool fsl_aot_is_file(const void *buf, size_t len);
/** Loads a compiled model file (fsl_model_load and fsl_model_load_bytes
 *  call it when fsl_aot_is_file). */
fsl_status fsl_aot_load(const void *buf, size_t len, fsl_model **out);

#endif
