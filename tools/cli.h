/* cli.h — what the fissile tool's files share: exit codes, the parsed
 * command-line options, and helpers defined in fissile.c. */
#ifndef FSL_TOOLS_CLI_H
#define FSL_TOOLS_CLI_H

#include "fissile.h"

enum {
  EXIT_OK = 0,
  EXIT_USAGE = 1,
  EXIT_MODEL = 2,
  EXIT_UNSUPPORTED = 3,
  EXIT_SHAPE = 4,
  EXIT_RUNTIME = 5,
};

#define MAX_OPTS 256

/* ---- command-line options ---- */
typedef struct kv { const char *key, *val; } kv;

typedef struct options {
  const char *cmd;
  const char *model;
  kv shapes[MAX_OPTS]; int n_shapes;
  kv dims[MAX_OPTS]; int n_dims;
  kv inputs[MAX_OPTS]; int n_inputs;
  kv consts[MAX_OPTS]; int n_consts;  /* --const NAME=FILE: inputs frozen to constants */
  const char *output_dir;
  uint64_t seed;
  bool time;
  bool after_fission;
  bool help;
  int strategy;             /* -1: not given */
  const char *backend;      /* NULL: not given */
  int threads;              /* 0: default */
  int repeats, warmup;      /* bench */
  const char *json;         /* bench/report --json FILE */
  const char *plan_out;     /* compile -o FILE (the plan's DOT); report -o FILE (the page) */
  const char *peer;         /* report --peer FILE.json */
  const char *strategies;   /* bench --strategies a,b */
  bool profile;             /* --profile: measured kernel costs */
  bool autotune;            /* --autotune: measured plan choice */
  bool no_graph;            /* --no-graph: the CUDA backend launches step by step */
  int rewrite;              /* --rewrite: fsl_rewrite_mode, -1: not given */
  bool cuda;                /* compile/explain --backend cuda: the CUDA C of the plan (no runtime yet) */
  bool emit_only;           /* compile --emit-only: generate and compile the CUDA C, run nothing */
} options;

/* ---- helpers (fissile.c) ---- */
/** Prints "fissile: error: " fmt (with arg) and a hint; returns EXIT_USAGE. */
int usage_error(const char *fmt, const char *arg);
/** The exit code for a library status. */
int exit_code(fsl_status s);
/** Prints the library's last error (or s's name) as "fissile: error: ..."
 *  and returns exit_code(s). */
/** Prints "autotune: kept opfuse's plan; median optimal 1.790 ms, greedy =
 *  optimal, ..." for a plan chosen by measurement (pi->tuned); nothing
 *  otherwise. */
void print_autotune(const fsl_plan_info *pi);
int report(fsl_status s);
/** Loads o->model (printing the time with --time); an exit code. */
int load_model(const options *o, fsl_model **m);
/** Loads the --input files into *given (o->n_inputs tensors, malloc'd; the
 *  caller frees each and the array, also on error) and binds m's input
 *  shapes from them; an exit code (the error printed). */
int load_input_files(const options *o, fsl_model *m, fsl_tensor **given);
/** Applies --dim and --shape; an exit code. */
int bind_options(const options *o, fsl_model *m);
/** Where a plan's kernel costs came from, as one line. */
void cost_source(const fsl_plan_info *pi, char *buf, size_t len);

/* ---- CUDA C (cuda_emit.c) ---- */
/** The CUDA C of m's plan compiled by NVRTC for sm_90 and sm_80
 *  (fsl_model_emit, dialect "cuda"): writes the source to o->plan_out when given
 *  (also when NVRTC fails), prints the summary and the per-function
 *  resource table to f; an exit code (errors printed). */
int cuda_emit(const options *o, const fsl_model *m, FILE *f);

/* ---- progress (progress.c) ---- */
/** Routes the library's progress events (fsl_set_progress) to stderr. */
void cli_progress_install(void);
/** Draws one progress event of `task` (the tool's own or the library's):
 *  a redrawn line on a terminal, plain lines otherwise. */
void cli_progress(const char *task, const char *detail, int done, int total, double elapsed_s, bool finished);
/** Ends a redrawn line that is still open (before other stderr output). */
void cli_progress_end_line(void);

/** Names of the plan kinds (fsl_plan_info.n_by_kind). */
extern const char *const k_kind_names[FSL_PLAN_KINDS];

static inline double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

#endif
