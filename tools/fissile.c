/*
 * fissile.c — the command-line tool.  Uses the public API (fissile.h) and
 * src/core's dtype helpers (element load/store, f16/bf16 conversion).  The
 * bench subcommand is in bench.c, its --json writer in bench_json.c; report
 * in report.c (page: report_html.c, html.c; --json: report_json.c).
 *
 *   fissile run MODEL [options]       run (reference interpreter or a backend)
 *   fissile compile MODEL [options]   build a strategy's plan, print its summary
 *   fissile explain MODEL [options]   Graphviz DOT of a plan's kernels
 *   fissile bench MODEL [options]     every strategy: kernels, predicted and measured time
 *   fissile report MODEL -o F.html    the same and more, as one HTML page
 *   fissile inspect MODEL [options]   opsets, inputs/outputs, op histograms
 *   fissile dot MODEL [options]       Graphviz DOT of the graph
 *   fissile print MODEL [options]     text form of the graph
 *
 * Exit codes: 0 ok, 1 bad usage, 2 model load/parse/invalid/IO error,
 * 3 unsupported, 4 shape/binding error, 5 runtime error.
 * See docs/cli.md.
 */
#include "fissile.h"
#include "core/core.h"
#include "bench.h"
#include "report.h"
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *k_exit_codes =
    "Exit codes:\n"
    "  0  success\n"
    "  1  bad usage (unknown option, missing argument)\n"
    "  2  the model or a tensor file could not be read, parsed, or is invalid\n"
    "  3  the model uses an op, opset or dtype fissile does not support\n"
    "  4  shape or binding error (unbound dim_param, shape mismatch, unknown input)\n"
    "  5  runtime error (or out of memory)\n";

static const char *k_bind_help =
    "  --shape NAME=DIMS     bind the shape of input NAME, e.g. input_ids=1x128\n"
    "                        (an empty DIMS means a scalar)\n"
    "  --dim PARAM=N         bind the symbolic dimension (dim_param) PARAM to N\n"
    "  --const NAME=FILE     freeze input NAME to the tensor in a .npy or TensorProto .pb\n"
    "                        file: it becomes a constant (for shapes that depend on values)\n";

static void usage_main(FILE *f) {
  fprintf(f,
          "usage: fissile COMMAND MODEL [options]\n\n"
          "fissile splits every ONNX operator into primitives (operator fission)\n"
          "and executes the primitive graph.\n\n"
          "Commands:\n"
          "  run       run the model (reference interpreter, or --backend plan-ref|cpu)\n"
          "  compile   build the plan of a fusion strategy and print its summary\n"
          "  explain   write a plan as Graphviz DOT to stdout (kernels as clusters)\n"
          "  bench     every strategy: kernels, predicted and measured latency, memory\n"
          "  report    every strategy measured, as one HTML page (charts, kernels, plan graph)\n"
          "  inspect   show opsets, inputs/outputs and op histograms\n"
          "  dot       write the graph as Graphviz DOT to stdout\n"
          "  print     write the graph as text to stdout\n"
          "  help CMD  help for one command (or: fissile CMD --help)\n\n%s",
          k_exit_codes);
}

static const char *k_plan_help =
    "  --strategy S          unfused, opfuse, greedy or optimal (fusion strategy)\n"
    "  --threads N           threads for generated kernels and oneDNN (default: all)\n"
    "  --profile             measure kernel costs instead of the roofline (kept in the\n"
    "                        profile cache: a second compile measures nothing)\n"
    "  --autotune            optimal: also build the greedy, opfuse and unfused plans,\n"
    "                        run them all end to end and keep the fastest (cached in\n"
    "                        the profile cache; on the default backend unless named)\n"
    "  --rewrite MODE        rules (default): apply the verified rewrite rules to the\n"
    "                        primitive graph before orchestration; search: also the\n"
    "                        sibling merges that the cost model finds faster; off: none\n"
    "  --no-graph            with --backend cuda: launch the kernels one by one on a\n"
    "                        stream instead of as CUDA graphs (FSL_CUDA_GRAPHS=0)\n";

/* "ref, cpu, plan-ref": the backends of this build (fsl_backend_names). */
static const char *backend_list(void) {
  static char list[256];
  if (!list[0]) {
    const char *const *names = fsl_backend_names(NULL);
    for (int i = 0; names[i]; i++) {
      size_t l = strlen(list);
      snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", names[i]);
    }
  }
  return list;
}

static void usage_cmd(const char *cmd, FILE *f) {
  if (!strcmp(cmd, "run")) {
    fprintf(f,
            "usage: fissile run MODEL [--shape NAME=DIMS]... [--dim PARAM=N]...\n"
            "                   [--input NAME=FILE.npy|FILE.pb]... [--output-dir DIR]\n"
            "                   [--strategy S] [--backend B] [--threads N] [--profile] [--autotune] [--seed N]\n"
            "                   [--time]\n\n"
            "Loads MODEL, binds shapes, compiles it (fission, CSE, DCE, the plan of\n"
            "--strategy, default optimal) and runs it on the best backend of this\n"
            "build (%s: generated C kernels and oneDNN when built), or on --backend:\n"
            "ref is the whole-graph reference interpreter, plan-ref executes the plan\n"
            "kernel by kernel with the reference interpreter.  The first run of a plan\n"
            "compiles its kernels (a line on stderr says so and how long it took); the\n"
            "kernel cache makes later runs start fast.  Inputs not given with --input are filled with\n"
            "seeded random data (floats uniform in [-1,1); integers uniform in the range\n"
            "the model takes: [0, rows) for an index into a gather, [0, 2) for a mask,\n"
            "else [0,10);\n"
            "bools random); a note on stderr says so.  For every output prints its\n"
            "name, dtype, shape and a checksum (sum, mean |x|, first values).\n\n"
            "Options:\n%s"
            "  --input NAME=FILE     value of input NAME from a .npy or TensorProto .pb file\n"
            "                        (its shape is bound from the file)\n"
            "  --output-dir DIR      write each output to DIR/<name>.npy (DIR is created;\n"
            "                        characters outside [A-Za-z0-9._-] become '_')\n"
            "  --backend B           one of %s (default %s)\n%s"
            "  --seed N              seed of the random inputs (default 0)\n"
            "  --time                print load, compile and run times (seconds) to stderr\n"
            "  -h, --help            this help\n\n%s",
            fsl_backend_default(), k_bind_help, backend_list(), fsl_backend_default(), k_plan_help, k_exit_codes);
  } else if (!strcmp(cmd, "compile")) {
    fprintf(f,
            "usage: fissile compile MODEL [--strategy S] [--backend B] [-o FILE.fsl|PLAN.dot]\n"
            "                       [--shape NAME=DIMS]... [--dim PARAM=N]... [--threads N] [--profile] [--autotune]\n"
            "                       [--time]\n"
            "       fissile compile MODEL --backend cuda --emit-only [-o FILE.cu] [--strategy S] ...\n\n"
            "Compiles MODEL and builds the plan of strategy S (default optimal) on the\n"
            "calibrated device, then prints its summary: kernels by kind, recomputed\n"
            "nodes, predicted time, orchestration time, whether the solver proved\n"
            "optimality, and the planned arena size.  With --backend plan-ref or cpu\n"
            "the plan is also compiled by that backend (and the time it took shown).\n"
            "With -o FILE.fsl it writes a compiled model file: the model, its plan and\n"
            "the backend's compiled kernels (default backend: %s), which `fissile run\n"
            "FILE.fsl` (or fsl_model_load) runs without the ONNX file, without a C\n"
            "compiler and without orchestrating again, on a machine like this one\n"
            "(same CPU model and flags, FSL_CPU_ISA, oneDNN and fissile versions).\n\n"
            "With --backend cuda --emit-only it generates the CUDA C of every kernel of\n"
            "the plan and compiles it with NVRTC for sm_90 and sm_80 (no GPU needed):\n"
            "any NVRTC error or warning fails (exit code 5, with NVRTC's log); kernels\n"
            "the CUDA dialect cannot take yet (f16/bf16, multi-pass reductions, ...)\n"
            "are listed, not errors.  The summary ends with every generated function's\n"
            "registers, spills, stack, shared and constant memory per architecture\n"
            "(ptxas -v).  Without --emit-only, --backend cuda compiles the plan for the\n"
            "machine's NVIDIA GPU (exit code 3 with the reason where there is none).\n\n"
            "Options:\n%s%s"
            "  --backend B           one of %s (default ref: plan only)\n"
            "  --emit-only           with --backend cuda: generate and compile the CUDA C, run\n"
            "                        nothing; -o FILE.cu writes the source (also when NVRTC fails)\n"
            "  -o, --output FILE     FILE.fsl: write the compiled model; FILE.dot: write the\n"
            "                        plan as Graphviz DOT\n"
            "  --time                print load and compile times (seconds) to stderr\n"
            "  -h, --help            this help\n\n%s",
            fsl_backend_default(), k_bind_help, k_plan_help, backend_list(), k_exit_codes);
  } else if (!strcmp(cmd, "explain")) {
    fprintf(f,
            "usage: fissile explain MODEL [--strategy S] [--backend cuda] [--shape NAME=DIMS]...\n"
            "                       [--dim PARAM=N]... [--threads N] [--profile] [--autotune] > plan.dot\n\n"
            "Builds the plan of strategy S (default optimal) and writes it to stdout as\n"
            "Graphviz DOT: every kernel a cluster labelled with its kind and predicted\n"
            "cost.  Render with `dot -Tsvg plan.dot > plan.svg`.  With --backend cuda it\n"
            "also compiles the plan's CUDA C with NVRTC (as compile --backend cuda\n"
            "--emit-only) and prints the resources of every generated kernel (registers,\n"
            "spills, stack, shared and constant memory for sm_90 and sm_80) to stderr.\n\n"
            "Options:\n%s%s"
            "  --backend cuda        the CUDA resource table on stderr\n"
            "  --time                print load and compile times (seconds) to stderr\n"
            "  -h, --help            this help\n\n%s",
            k_bind_help, k_plan_help, k_exit_codes);
  } else if (!strcmp(cmd, "bench")) {
    fprintf(f,
            "usage: fissile bench MODEL [--threads N] [--repeats N] [--warmup N] [--backend B]\n"
            "                     [--strategies a,b,...] [--json FILE] [--seed N] [--profile] [--autotune]\n"
            "                     [--shape NAME=DIMS]... [--dim PARAM=N]... [--input NAME=FILE]...\n\n"
            "For each strategy (default all: unfused, opfuse, greedy, optimal): compiles\n"
            "the plan with backend B (default: the best of this build) in a model of its\n"
            "own, then runs the strategies interleaved: --warmup rounds, then --repeats\n"
            "timed rounds, each round running every strategy once on the same inputs\n"
            "(the --input files, fresh random data for the rest; not timed), starting\n"
            "with a different strategy each round.  Prints one table:\n"
            "kernel count, predicted time, measured median (and min) latency of\n"
            "fsl_model_run, planned arena size, orchestration and backend compile time.\n"
            "A strategy that fails is reported in its row; the exit code is then that\n"
            "of the first failure.\n\n"
            "Options:\n%s"
            "  --threads N           threads for generated kernels and oneDNN (default: all)\n"
            "  --repeats N           timed runs per strategy (default 20, at least 1)\n"
            "  --warmup N            untimed runs first (default 3)\n"
            "  --backend B           one of %s (default: the best of this build)\n"
            "  --strategies LIST     comma-separated strategies to measure\n"
            "  --json FILE           also write the results as JSON to FILE\n"
            "  --seed N              seed of the first random inputs (default 0)\n"
            "  --input NAME=FILE     input NAME from a .npy or .pb file for every run (its shape\n"
            "                        is bound from the file)\n"
            "  --profile             measure kernel costs instead of the roofline (kept in the\n"
            "                        profile cache: a second compile measures nothing); the\n"
            "                        kernel times' source is printed after the table\n"
            "  -h, --help            this help\n\n%s",
            k_bind_help, backend_list(), k_exit_codes);
  } else if (!strcmp(cmd, "report")) {
    report_usage(f, k_bind_help, backend_list(), k_exit_codes);
  } else if (!strcmp(cmd, "inspect")) {
    fprintf(f,
            "usage: fissile inspect MODEL [--shape NAME=DIMS]... [--dim PARAM=N]... [--time]\n\n"
            "Prints the opsets, the inputs and outputs with their types (symbolic\n"
            "dimensions by name), the ONNX op histogram; then compiles the model and\n"
            "prints the primitive histogram after fission (by kind and by op) and the\n"
            "unsupported ops.  When compiling fails the error is printed after what is\n"
            "known, and the exit code tells the error.\n\n"
            "Options:\n%s"
            "  --time                print load and compile times (seconds) to stderr\n"
            "  -h, --help            this help\n\n%s",
            k_bind_help, k_exit_codes);
  } else if (!strcmp(cmd, "dot") || !strcmp(cmd, "print")) {
    fprintf(f,
            "usage: fissile %s MODEL [--after onnx|fission] [--shape NAME=DIMS]... [--dim PARAM=N]...\n\n"
            "Writes the graph %s to stdout: as imported (--after onnx, the default) or\n"
            "the primitive graph after fission (--after fission; compiles the model,\n"
            "so symbolic dimensions must be bound).\n\n"
            "Options:\n"
            "  --after STAGE         onnx (default) or fission\n%s"
            "  --time                print load and compile times (seconds) to stderr\n"
            "  -h, --help            this help\n\n%s",
            cmd, !strcmp(cmd, "dot") ? "in Graphviz DOT" : "as text (one line per node)",
            k_bind_help, k_exit_codes);
  } else {
    usage_main(f);
  }
}

int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "fissile: error: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(see 'fissile --help')\n");
  return EXIT_USAGE;
}

/* Splits "KEY=VAL" into kv; false when there is no '=' or KEY is empty. */
static bool split_kv(const char *s, kv *out) {
  const char *eq = strchr(s, '=');
  if (!eq || eq == s) return false;
  size_t n = (size_t)(eq - s);
  char *key = malloc(n + 1);
  if (!key) return false;
  memcpy(key, s, n);
  key[n] = 0;
  out->key = key;
  out->val = eq + 1;
  return true;
}

static void free_options(options *o) {
  for (int i = 0; i < o->n_shapes; i++) free((void *)o->shapes[i].key);
  for (int i = 0; i < o->n_dims; i++) free((void *)o->dims[i].key);
  for (int i = 0; i < o->n_inputs; i++) free((void *)o->inputs[i].key);
  for (int i = 0; i < o->n_consts; i++) free((void *)o->consts[i].key);
}

static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-') return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

/* A count in [lo, 1000000]. */
static bool parse_count(const char *s, int lo, int *out) {
  uint64_t v;
  if (!parse_u64(s, &v) || v < (uint64_t)lo || v > 1000000) return false;
  *out = (int)v;
  return true;
}

/* Returns the value of option `name` at argv[*i] ("--name V" or
 * "--name=V"), advancing *i; NULL when argv[*i] is not that option. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n)) return NULL;
  if (a[n] == '=') return a + n + 1;
  if (a[n] != 0) return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

static int add_kv(kv *arr, int *n, const char *opt, const char *val) {
  if (*n >= MAX_OPTS) return usage_error("too many %s options", opt);
  if (!split_kv(val, &arr[*n])) return usage_error("expected KEY=VALUE, got '%s'", val);
  (*n)++;
  return EXIT_OK;
}

/* Parses one option at argv[*i]; returns an exit code (EXIT_OK if fine). */
static int parse_option(options *o, int argc, char **argv, int *i) {
  const char *a = argv[*i], *v;
  bool missing = false;
  bool is_run = !strcmp(o->cmd, "run");
  bool is_graph = !strcmp(o->cmd, "dot") || !strcmp(o->cmd, "print");
  bool is_report = !strcmp(o->cmd, "report");
  bool is_bench = !strcmp(o->cmd, "bench") || is_report; /* report takes bench's options */
  bool is_plan = is_run || is_bench || !strcmp(o->cmd, "compile") || !strcmp(o->cmd, "explain");
  if (!strcmp(a, "-h") || !strcmp(a, "--help")) { o->help = true; return EXIT_OK; }
  if (!strcmp(a, "--time")) { o->time = true; return EXIT_OK; }
  if (is_plan && !strcmp(a, "--profile")) { o->profile = true; return EXIT_OK; }
  if (is_plan && !strcmp(a, "--autotune")) { o->autotune = true; return EXIT_OK; }
  if (is_plan && !strcmp(a, "--no-graph")) { o->no_graph = true; return EXIT_OK; }
  if ((v = opt_value(argc, argv, i, "--shape", &missing)))
    return add_kv(o->shapes, &o->n_shapes, "--shape", v);
  if ((v = opt_value(argc, argv, i, "--dim", &missing)))
    return add_kv(o->dims, &o->n_dims, "--dim", v);
  if ((v = opt_value(argc, argv, i, "--const", &missing)))
    return add_kv(o->consts, &o->n_consts, "--const", v);
  if ((is_run || is_bench) && (v = opt_value(argc, argv, i, "--input", &missing)))
    return add_kv(o->inputs, &o->n_inputs, "--input", v);
  if (is_run && (v = opt_value(argc, argv, i, "--output-dir", &missing))) {
    o->output_dir = v;
    return EXIT_OK;
  }
  if ((is_plan || is_graph) && (v = opt_value(argc, argv, i, "--rewrite", &missing))) {
    int mode = -1;
    for (int k = 0; k < FSL_REWRITE_MODE_COUNT; k++)
      if (!strcmp(v, fsl_rewrite_mode_name((fsl_rewrite_mode)k))) mode = k;
    if (mode < 0) return usage_error("--rewrite expects off, rules or search, got '%s'", v);
    o->rewrite = mode;
    return EXIT_OK;
  }
  if (is_plan && (v = opt_value(argc, argv, i, "--strategy", &missing))) {
    fsl_strategy s;
    if (fsl_strategy_from_name(v, &s) != FSL_OK)
      return usage_error("--strategy expects unfused, opfuse, greedy or optimal, got '%s'", v);
    o->strategy = (int)s;
    return EXIT_OK;
  }
  if (is_plan && (v = opt_value(argc, argv, i, "--backend", &missing))) {
    bool known = false;
    for (const char *const *n = fsl_backend_names(NULL); *n; n++) known = known || !strcmp(v, *n);
    /* explain, and compile with --emit-only (checked after parsing): the
     * CUDA C and its resources, also in a build without the CUDA backend
     * (which then says why) */
    if (!strcmp(v, "cuda") && (!strcmp(o->cmd, "compile") || !strcmp(o->cmd, "explain"))) {
      o->cuda = true;
      /* Where there is a driver, NVRTC serves a CUBIN it built before from
       * the CUDA compute cache without running ptxas, so without ptxas's -v
       * report that the resource table is made of (seen on an H200, driver
       * 580).  Set here, before the process's first CUDA call; a value the
       * user gave is kept. */
      setenv("CUDA_CACHE_DISABLE", "1", 0);
      if (known && !strcmp(o->cmd, "compile")) o->backend = v;
      return EXIT_OK;
    }
    if (!strcmp(o->cmd, "explain")) return usage_error("explain takes --backend cuda only, got '%s'", v);
    if (!known) {
      fprintf(stderr, "fissile: error: --backend expects one of %s, got '%s'\n(see 'fissile --help')\n",
              backend_list(), v);
      return EXIT_USAGE;
    }
    o->backend = v;
    return EXIT_OK;
  }
  if (!strcmp(o->cmd, "compile") && !strcmp(a, "--emit-only")) {
    o->emit_only = true;
    return EXIT_OK;
  }
  if (is_plan && (v = opt_value(argc, argv, i, "--threads", &missing))) {
    if (!parse_count(v, 1, &o->threads)) return usage_error("--threads expects a positive integer, got '%s'", v);
    return EXIT_OK;
  }
  if ((!strcmp(o->cmd, "compile") || is_report) && ((v = opt_value(argc, argv, i, "-o", &missing)) ||
                                     (v = opt_value(argc, argv, i, "--output", &missing)))) {
    o->plan_out = v;
    return EXIT_OK;
  }
  if (is_bench && (v = opt_value(argc, argv, i, "--repeats", &missing))) {
    if (!parse_count(v, 1, &o->repeats)) return usage_error("--repeats expects a positive integer, got '%s'", v);
    return EXIT_OK;
  }
  if (is_bench && (v = opt_value(argc, argv, i, "--warmup", &missing))) {
    if (!parse_count(v, 0, &o->warmup)) return usage_error("--warmup expects a non-negative integer, got '%s'", v);
    return EXIT_OK;
  }
  if (is_bench && (v = opt_value(argc, argv, i, "--json", &missing))) {
    o->json = v;
    return EXIT_OK;
  }
  if (is_report && (v = opt_value(argc, argv, i, "--peer", &missing))) {
    o->peer = v;
    return EXIT_OK;
  }
  if (is_bench && (v = opt_value(argc, argv, i, "--strategies", &missing))) {
    o->strategies = v;
    return EXIT_OK;
  }
  if ((is_run || is_bench) && (v = opt_value(argc, argv, i, "--seed", &missing))) {
    if (!parse_u64(v, &o->seed)) return usage_error("--seed expects a non-negative integer, got '%s'", v);
    return EXIT_OK;
  }
  if (is_graph && (v = opt_value(argc, argv, i, "--after", &missing))) {
    if (!strcmp(v, "fission")) o->after_fission = true;
    else if (!strcmp(v, "onnx") || !strcmp(v, "import")) o->after_fission = false;
    else return usage_error("--after expects 'onnx' or 'fission', got '%s'", v);
    return EXIT_OK;
  }
  if (missing) return usage_error("option %s needs a value", a);
  return usage_error("unknown option '%s'", a);
}

static int parse_args(options *o, int argc, char **argv) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] == '-' && a[1] != 0) {
      int rc = parse_option(o, argc, argv, &i);
      if (rc != EXIT_OK) return rc;
    } else if (!o->model) {
      o->model = a;
    } else {
      return usage_error("unexpected argument '%s' (one MODEL only)", a);
    }
  }
  if (!o->help && !o->model) return usage_error("%s: missing MODEL", o->cmd);
  if (o->emit_only && !o->cuda) return usage_error("%s", "--emit-only needs --backend cuda");
  if (o->no_graph && !(o->backend && !strcmp(o->backend, "cuda")) && !o->cuda)
    return usage_error("%s", "--no-graph needs --backend cuda");
  if (o->no_graph) setenv("FSL_CUDA_GRAPHS", "0", 1); /* the CUDA backend reads it (docs/gpu-backend.md) */
  if (o->cuda && !strcmp(o->cmd, "compile")) {
    if (o->emit_only) {
      o->backend = NULL; /* the plan only: nothing runs, no device is needed */
    } else if (!o->backend) {
      fprintf(stderr, "fissile: error: this build has no CUDA backend (NVRTC or cuda.h was not found when it was "
                      "configured: install the CUDA toolkit under /usr/local/cuda and configure again)\n");
      return EXIT_UNSUPPORTED;
    } else {
      o->cuda = false; /* compile on the CUDA backend, as any other */
    }
  }
  return EXIT_OK;
}

/* ---- errors ---- */
int exit_code(fsl_status s) {
  switch (s) {
  case FSL_OK: return EXIT_OK;
  case FSL_ERR_ARG: return EXIT_USAGE;
  case FSL_ERR_IO:
  case FSL_ERR_PARSE:
  case FSL_ERR_INVALID: return EXIT_MODEL;
  case FSL_ERR_UNSUPPORTED: return EXIT_UNSUPPORTED;
  case FSL_ERR_SHAPE: return EXIT_SHAPE;
  case FSL_ERR_NOMEM:
  case FSL_ERR_RUNTIME:
  default: return EXIT_RUNTIME;
  }
}

int report(fsl_status s) {
  cli_progress_end_line();
  const char *msg = fsl_last_error();
  fprintf(stderr, "fissile: error: %s\n", msg && *msg ? msg : fsl_status_name(s));
  return exit_code(s);
}

/* ---- shapes ---- */
/* Parses "1x128" (also "1,128"); "" or "scalar" is rank 0. */
static bool parse_dims(const char *s, int *rank, int64_t *dims) {
  *rank = 0;
  if (!*s || !strcmp(s, "scalar")) return true;
  while (*s) {
    if (*rank >= FSL_MAX_RANK || *s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s) return false;
    dims[(*rank)++] = v;
    s = end;
    if (*s == 'x' || *s == 'X' || *s == ',') {
      s++;
      if (!*s) return false;
    } else if (*s) {
      return false;
    }
  }
  return true;
}

static char *shape_str(int rank, const int64_t *dims, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < rank && o < len; i++) {
    if (dims[i] < 0) o += (size_t)snprintf(buf + o, len - o, "%s?", i ? "x" : "");
    else o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, i ? "x" : "", dims[i]);
  }
  if (rank == 0) snprintf(buf, len, "scalar");
  return buf;
}

/* ---- tensors in files ---- */
static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

static fsl_status load_tensor_file(const char *name, const char *path, fsl_tensor *t) {
  fsl_status st = ends_with(path, ".pb") ? fsl_tensor_load_pb(path, t) : fsl_tensor_load_npy(path, t);
  if (st != FSL_OK) return st;
  snprintf(t->name, sizeof t->name, "%s", name);
  return FSL_OK;
}

/* ---- the model: load and bind ---- */
int load_model(const options *o, fsl_model **m) {
  double t0 = fsl_now_s();
  fsl_status st = fsl_model_load(o->model, m);
  if (st != FSL_OK) return report(st);
  if (o->time) fprintf(stderr, "time: load %.6f s\n", fsl_now_s() - t0);
  return EXIT_OK;
}

/* A binding error (unknown input or dim, bad shape) exits with EXIT_SHAPE. */
static int bind_error(fsl_status st) {
  int rc = report(st);
  return rc == EXIT_USAGE ? EXIT_SHAPE : rc;
}

int bind_options(const options *o, fsl_model *m) {
  for (int i = 0; i < o->n_dims; i++) {
    uint64_t v;
    if (!parse_u64(o->dims[i].val, &v) || v > INT64_MAX)
      return usage_error("--dim expects PARAM=N with N a non-negative integer, got '%s'", o->dims[i].val);
    fsl_status st = fsl_model_bind_dim(m, o->dims[i].key, (int64_t)v);
    if (st != FSL_OK) return bind_error(st);
  }
  for (int i = 0; i < o->n_shapes; i++) {
    int rank;
    int64_t dims[FSL_MAX_RANK];
    if (!parse_dims(o->shapes[i].val, &rank, dims))
      return usage_error("--shape expects NAME=DxDx..., got '%s'", o->shapes[i].val);
    fsl_status st = fsl_model_bind_shape(m, o->shapes[i].key, rank, dims);
    if (st != FSL_OK) return bind_error(st);
  }
  for (int i = 0; i < o->n_consts; i++) {
    fsl_tensor t;
    memset(&t, 0, sizeof t);
    fsl_status st = load_tensor_file(o->consts[i].key, o->consts[i].val, &t);
    if (st != FSL_OK) return report(st);
    st = fsl_model_freeze_input(m, &t);
    fsl_tensor_free(&t);
    if (st != FSL_OK) return bind_error(st);
  }
  return EXIT_OK;
}

/* --strategy, --backend, --threads: before compiling. */
static int plan_options(const options *o, fsl_model *m, const char *default_backend) {
  if (o->threads > 0) fsl_set_num_threads(o->threads);
  fsl_status st = FSL_OK;
  if (o->strategy >= 0) st = fsl_model_set_strategy(m, (fsl_strategy)o->strategy);
  if (st == FSL_OK && o->profile) st = fsl_model_set_profile(m, true);
  if (st == FSL_OK && o->autotune) st = fsl_model_set_autotune(m, true);
  if (st == FSL_OK && o->rewrite >= 0) st = fsl_model_set_rewrite(m, (fsl_rewrite_mode)o->rewrite);
  /* the measured choice runs the plans: on the default backend unless named */
  if (o->autotune && !default_backend) default_backend = fsl_backend_default();
  const char *be = o->backend ? o->backend : default_backend;
  if (st == FSL_OK && be) st = fsl_model_set_backend(m, be);
  return st == FSL_OK ? EXIT_OK : report(st);
}

static int compile_model(const options *o, fsl_model *m) {
  double t0 = fsl_now_s();
  fsl_status st = fsl_model_compile(m);
  if (st != FSL_OK) return report(st);
  if (o->time) fprintf(stderr, "time: compile %.6f s\n", fsl_now_s() - t0);
  return EXIT_OK;
}

/* ---- run ---- */
typedef struct run_state {
  fsl_tensor *given;   /* from --input, o->n_inputs of them */
  fsl_tensor *inputs;  /* all inputs, in model order */
  fsl_tensor *outputs;
  int n_in, n_out;
} run_state;

static void free_run_state(run_state *r, int n_given) {
  for (int i = 0; r->given && i < n_given; i++) fsl_tensor_free(&r->given[i]);
  for (int i = 0; r->inputs && i < r->n_in; i++) fsl_tensor_free(&r->inputs[i]);
  for (int i = 0; r->outputs && i < r->n_out; i++) fsl_tensor_free(&r->outputs[i]);
  free(r->given);
  free(r->inputs);
  free(r->outputs);
}

int load_input_files(const options *o, fsl_model *m, fsl_tensor **given) {
  *given = calloc((size_t)o->n_inputs + 1, sizeof **given);
  if (!*given) return report(FSL_ERR_NOMEM);
  for (int i = 0; i < o->n_inputs; i++) {
    fsl_status st = load_tensor_file(o->inputs[i].key, o->inputs[i].val, &(*given)[i]);
    if (st != FSL_OK) return report(st);
    st = fsl_model_bind_shape(m, (*given)[i].name, (*given)[i].rank, (*given)[i].dims);
    if (st != FSL_OK) return bind_error(st);
  }
  return EXIT_OK;
}

static int load_given_inputs(const options *o, fsl_model *m, run_state *r) {
  return load_input_files(o, m, &r->given);
}

/* Moves the given tensor for `name` into *dst; false if none was given. */
static bool take_given(const options *o, run_state *r, const char *name, fsl_tensor *dst) {
  for (int i = 0; i < o->n_inputs; i++)
    if (r->given[i].data && !strcmp(r->given[i].name, name)) {
      *dst = r->given[i];
      r->given[i].data = NULL;
      return true;
    }
  return false;
}

static int prepare_inputs(const options *o, fsl_model *m, run_state *r) {
  r->n_in = fsl_model_num_inputs(m);
  r->inputs = calloc((size_t)r->n_in + 1, sizeof *r->inputs);
  if (!r->inputs) return report(FSL_ERR_NOMEM);
  for (int i = 0; i < r->n_in; i++) {
    fsl_tensor info;
    fsl_status st = fsl_model_input_info(m, i, &info);
    if (st != FSL_OK) return report(st);
    if (take_given(o, r, info.name, &r->inputs[i])) continue;
    if (fsl_model_random_input(m, i, o->seed, &r->inputs[i]) != FSL_OK) {
      fprintf(stderr, "fissile: error: cannot make random data for input '%s' of type %s\n", info.name,
              fsl_dtype_name(info.dtype));
      return fsl_dtype_size(info.dtype) ? EXIT_RUNTIME : EXIT_UNSUPPORTED;
    }
    char sh[256], range[96] = "";
    int64_t lo, hi;
    const char *kind = NULL;
    if (fsl_dtype_is_int(info.dtype) && fsl_model_input_int_range(m, i, &lo, &hi, &kind) == FSL_OK)
      snprintf(range, sizeof range, " in [%lld, %lld) (%s)", (long long)lo, (long long)hi,
               !strcmp(kind, "index") ? "it indexes a gather" : !strcmp(kind, "mask") ? "a mask" : "default");
    fprintf(stderr, "fissile: note: input '%s' not given: using random %s[%s]%s (seed %" PRIu64 ")\n", info.name,
            fsl_dtype_name(info.dtype), shape_str(info.rank, info.dims, sh, sizeof sh), range, o->seed);
  }
  return EXIT_OK;
}

static void print_summary(const fsl_tensor *t) {
  char sh[256];
  int64_t n = fsl_tensor_numel(t);
  double sum = 0, sabs = 0;
  bool numeric = fsl_dtype_size(t->dtype) > 0 && t->data;
  for (int64_t i = 0; numeric && i < n; i++) {
    double v = fsl_load_f64(t->dtype, t->data, i);
    sum += v;
    sabs += fabs(v);
  }
  printf("%s: %s[%s] sum=%.9g mean_abs=%.9g first=[", t->name, fsl_dtype_name(t->dtype),
         shape_str(t->rank, t->dims, sh, sizeof sh), sum, n > 0 ? sabs / (double)n : 0.0);
  for (int64_t i = 0; numeric && i < n && i < 5; i++)
    printf("%s%.6g", i ? ", " : "", fsl_load_f64(t->dtype, t->data, i));
  printf("%s]\n", n > 5 ? ", ..." : "");
}

/* mkdir -p */
static bool make_dirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char c = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return false;
    buf[i] = c;
  }
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int write_outputs(const char *dir, const run_state *r) {
  if (!make_dirs(dir)) {
    fprintf(stderr, "fissile: error: cannot create output folder '%s': %s\n", dir, strerror(errno));
    return EXIT_MODEL;
  }
  for (int i = 0; i < r->n_out; i++) {
    char name[160], path[4400];
    snprintf(name, sizeof name, "%s", r->outputs[i].name[0] ? r->outputs[i].name : "output");
    for (char *p = name; *p; p++) {
      bool ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                *p == '.' || *p == '_' || *p == '-';
      if (!ok) *p = '_';
    }
    if (!strcmp(name, ".") || !strcmp(name, "..")) snprintf(name, sizeof name, "output_%d", i);
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    fsl_status st = fsl_tensor_save_npy(path, &r->outputs[i]);
    if (st != FSL_OK) return report(st);
  }
  return EXIT_OK;
}

static int run_model(const options *o, fsl_model *m, run_state *r) {
  int rc = bind_options(o, m);
  if (rc == EXIT_OK) rc = load_given_inputs(o, m, r);
  /* a compiled model file keeps its backend unless one is named */
  if (rc == EXIT_OK) rc = plan_options(o, m, fsl_model_is_compiled(m) ? NULL : fsl_backend_default());
  if (rc == EXIT_OK) rc = compile_model(o, m);
  if (rc == EXIT_OK) rc = prepare_inputs(o, m, r);
  if (rc != EXIT_OK) return rc;
  r->n_out = fsl_model_num_outputs(m);
  r->outputs = calloc((size_t)r->n_out + 1, sizeof *r->outputs);
  if (!r->outputs) return report(FSL_ERR_NOMEM);
  double t0 = fsl_now_s();
  fsl_status st = fsl_model_run(m, r->inputs, r->n_in, r->outputs, r->n_out);
  if (st != FSL_OK) {
    rc = report(st);
    return rc == EXIT_USAGE ? EXIT_RUNTIME : rc;
  }
  if (o->time) fprintf(stderr, "time: run %.6f s\n", fsl_now_s() - t0);
  for (int i = 0; i < r->n_out; i++) print_summary(&r->outputs[i]);
  return o->output_dir ? write_outputs(o->output_dir, r) : EXIT_OK;
}

static int cmd_run(const options *o) {
  fsl_model *m = NULL;
  run_state r;
  memset(&r, 0, sizeof r);
  int rc = load_model(o, &m);
  if (rc == EXIT_OK) rc = run_model(o, m, &r);
  free_run_state(&r, o->n_inputs);
  fsl_model_free(m);
  return rc;
}

/* ---- inspect ---- */
/* "int64[batch x 128]": an input's type with symbolic dims by name. */
static char *input_type_text(const fsl_model *m, int i, const fsl_tensor *t, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "%s[", fsl_dtype_name(t->dtype));
  for (int d = 0; d < t->rank && o < len; d++) {
    const char *p = fsl_model_input_dim_param(m, i, d);
    const char *sep = d ? " x " : "";
    int w = p && t->dims[d] < 0 ? snprintf(buf + o, len - o, "%s%s", sep, p)
            : t->dims[d] < 0 ? snprintf(buf + o, len - o, "%s?", sep)
                             : snprintf(buf + o, len - o, "%s%" PRId64, sep, t->dims[d]);
    if (w > 0) o += (size_t)w;
  }
  if (o < len) snprintf(buf + o, len - o, "]");
  return buf;
}

static void print_io(const fsl_model *m, bool outputs) {
  int n = outputs ? fsl_model_num_outputs(m) : fsl_model_num_inputs(m);
  printf("%s (%d):\n", outputs ? "outputs" : "inputs", n);
  for (int i = 0; i < n; i++) {
    fsl_tensor t;
    fsl_status st = outputs ? fsl_model_output_info(m, i, &t) : fsl_model_input_info(m, i, &t);
    if (st != FSL_OK) continue;
    char ty[512], sh[256];
    if (outputs || t.rank < 0) snprintf(ty, sizeof ty, "%s[%s]", fsl_dtype_name(t.dtype), t.rank < 0 ? "?" : shape_str(t.rank, t.dims, sh, sizeof sh));
    else input_type_text(m, i, &t, ty, sizeof ty);
    printf("  %-32s %s\n", t.name, ty);
  }
}

typedef struct hist {
  int total, n_ops;
  int by_kind_n;
  const char *kinds[16];
  int kind_count[16];
} hist;

static void hist_print_op(void *ctx, const char *op, const char *kind, int count) {
  hist *h = ctx;
  h->total += count;
  h->n_ops++;
  int k = 0;
  while (k < h->by_kind_n && strcmp(h->kinds[k], kind)) k++;
  if (k == h->by_kind_n && k < 16) h->kinds[h->by_kind_n++] = kind;
  if (k < 16) h->kind_count[k] += count;
  printf("  %-28s %-12s %6d\n", op, kind, count);
}

static void print_histogram(const fsl_model *m, fsl_stage stage) {
  hist h;
  memset(&h, 0, sizeof h);
  printf("%s ops:\n", stage == FSL_STAGE_ONNX ? "ONNX" : "primitive");
  if (fsl_model_op_histogram(m, stage, hist_print_op, &h) != FSL_OK) return;
  printf("  %-28s %-12s %6d  (%d distinct ops)\n", "total", "", h.total, h.n_ops);
  if (stage == FSL_STAGE_ONNX) return;
  printf("primitives by kind:\n");
  for (int k = 0; k < h.by_kind_n; k++) printf("  %-12s %6d\n", h.kinds[k], h.kind_count[k]);
}

static void print_unsupported_one(void *ctx, const char *op, const char *domain, int64_t opset, const char *node) {
  (void)ctx;
  printf("  %s%s%s (opset %" PRId64 ") node '%s'\n", domain && *domain ? domain : "", domain && *domain ? "::" : "",
         op, opset, node ? node : "");
}

static void print_opsets(const fsl_model *m) {
  printf("opsets:");
  for (int i = 0; i < fsl_model_num_opsets(m); i++) {
    const char *d;
    int64_t v;
    fsl_model_opset(m, i, &d, &v);
    printf("%s %s %" PRId64, i ? "," : "", d && *d ? d : "ai.onnx", v);
  }
  printf("\n");
}

static int inspect_model(const options *o, fsl_model *m) {
  printf("model: %s\n", o->model);
  print_opsets(m);
  print_io(m, false);
  print_io(m, true);
  print_histogram(m, FSL_STAGE_ONNX);
  int n_unsup = fsl_model_unsupported(m, NULL, NULL);
  printf("unsupported ops (%d):\n", n_unsup);
  fsl_model_unsupported(m, print_unsupported_one, NULL);
  fflush(stdout);
  int rc = bind_options(o, m);
  if (rc == EXIT_OK) rc = compile_model(o, m);
  if (rc != EXIT_OK) return rc;
  printf("after fission:\n");
  print_io(m, false);
  print_io(m, true);
  print_histogram(m, FSL_STAGE_FISSION);
  return EXIT_OK;
}

static int cmd_inspect(const options *o) {
  fsl_model *m = NULL;
  int rc = load_model(o, &m);
  if (rc == EXIT_OK) rc = inspect_model(o, m);
  fsl_model_free(m);
  return rc;
}

/* ---- dot / print ---- */
static int cmd_graph(const options *o, bool dot) {
  fsl_model *m = NULL;
  int rc = load_model(o, &m);
  if (rc == EXIT_OK && o->after_fission) {
    rc = bind_options(o, m);
    fsl_status st = o->rewrite >= 0 ? fsl_model_set_rewrite(m, (fsl_rewrite_mode)o->rewrite) : FSL_OK;
    if (rc == EXIT_OK && st != FSL_OK) rc = report(st);
    if (rc == EXIT_OK) rc = compile_model(o, m);
  }
  if (rc == EXIT_OK) {
    fsl_status st = fsl_model_write_graph(m, o->after_fission ? FSL_STAGE_FISSION : FSL_STAGE_ONNX, dot, stdout);
    if (st != FSL_OK) rc = report(st);
  }
  fsl_model_free(m);
  return rc;
}

/* ---- compile / explain ---- */
const char *const k_kind_names[FSL_PLAN_KINDS] = {"loop", "reduce", "linear", "opaque"};

/* Where the kernel costs came from: "roofline", or the profile counts. */
void cost_source(const fsl_plan_info *pi, char *buf, size_t len) {
  if (!pi->profiled) {
    snprintf(buf, len, "analytic (roofline)");
    return;
  }
  int n = snprintf(buf, len, "measured: %d kernel times from the profile cache, %d measured now (%.1f s), %d analytic; "
                   "%d of %d plan kernels measured", pi->n_cost_cached, pi->n_cost_measured, pi->profile_s,
                   pi->n_cost_analytic, pi->n_plan_measured, pi->n_kernels);
  if (pi->n_cost_measured == 0 && n > 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, " (nothing profiled: all from the cache)");
}

/* "3 (conv-scale-into-weights x2, matmul-siblings x1)" */
static void print_rewrites(const fsl_model *m, const fsl_plan_info *pi) {
  printf("rewrites: %s", fsl_rewrite_mode_name(pi->rewrite));
  if (pi->rewrite != FSL_REWRITE_OFF) {
    printf(", %d applied", pi->n_rewrites);
    const char *rule;
    int n;
    for (int i = 0; (n = fsl_model_rewrite_fired(m, i, &rule)) > 0; i++) printf("%s%s x%d", i ? ", " : " (", rule, n);
    if (pi->n_rewrites) printf(")");
    printf(" in %.3f s", pi->rewrite_s);
    if (pi->rewrite == FSL_REWRITE_SEARCH)
      printf("; %d graphs costed by their optimal plans: %d region BLPs solved, %d region costs reused",
             pi->search_graphs, pi->search_regions_solved, pi->search_regions_cached);
  }
  printf("\n");
}

void print_autotune(const fsl_plan_info *pi) {
  if (!pi->tuned) return;
  if (pi->tune_candidates < 2) {
    printf("autotune: every strategy made the same plan (nothing to run)\n");
    return;
  }
  printf("autotune: kept %s's plan; median", fsl_strategy_name(pi->strategy));
  static const fsl_strategy order[] = {FSL_STRATEGY_OPTIMAL, FSL_STRATEGY_GREEDY, FSL_STRATEGY_OPFUSE,
                                       FSL_STRATEGY_UNFUSED};
  for (int i = 0; i < 4; i++) {
    fsl_strategy s = order[i];
    printf("%s %s ", i ? "," : "", fsl_strategy_name(s));
    if (pi->tune_same_as[s] >= 0) printf("= %s", fsl_strategy_name((fsl_strategy)pi->tune_same_as[s]));
    else if (isnan(pi->tune_median_s[s])) printf("failed to build");
    else printf("%.6f ms", pi->tune_median_s[s] * 1e3);
  }
  if (pi->tune_cached) printf(" (from the profile cache, %.3f s)\n", pi->tune_s);
  else printf(" (%d rounds, %.3f s)\n", pi->tune_rounds, pi->tune_s);
}

static void print_plan_summary(const char *model, const fsl_model *m, const fsl_plan_info *pi) {
  printf("model: %s\n", model);
  printf("strategy: %s%s\n", fsl_strategy_name(pi->strategy),
         pi->strategy == FSL_STRATEGY_OPTIMAL ? (pi->optimal ? " (proved optimal)" : " (not proven optimal: best found)") : "");
  printf("device: %s\n", pi->device);
  printf("primitives: %d", pi->n_primitives);
  if (pi->n_lut_tables) printf(" (%d elementwise functions of 8-bit tensors as 256-entry tables)", pi->n_lut_tables);
  if (pi->n_qdq_lifted) printf(" (%d QuantizeLinear of moved or pooled 8-bit values on the integers)", pi->n_qdq_lifted);
  printf("\n");
  print_rewrites(m, pi);
  printf("kernels: %d (", pi->n_kernels);
  for (int k = 0; k < FSL_PLAN_KINDS; k++) printf("%s%s %d", k ? ", " : "", k_kind_names[k], pi->n_by_kind[k]);
  printf("), recomputed node executions: %d\n", pi->n_recomputed);
  printf("predicted: %.6f ms\n", pi->predicted_s * 1e3);
  char costs[320];
  cost_source(pi, costs, sizeof costs);
  printf("costs: %s\n", costs);
  printf("orchestration: %.3f s\n", pi->orchestrate_s);
  print_autotune(pi);
  if (pi->runs_plan) {
    printf("backend: %s (compile %.3f s): %d kernels native, %d through the reference fallback, %d opaque (host); "
           "%d linear ops through its library (%d int8, %d of them requantizing)\n",
           pi->backend, pi->backend_s, pi->n_native, pi->n_fallback, pi->n_opaque, pi->n_library, pi->n_library_int8,
           pi->n_library_requant);
    if (pi->n_fallback) printf("first fallback: %s\n", pi->fallback_why);
  } else {
    printf("backend: ref (whole-graph reference interpreter; plan not compiled)\n");
  }
  printf("memory: %.3f MiB arena for kernel outputs (%.3f MiB without reuse)\n", mib(pi->peak_bytes), mib(pi->total_bytes));
}

static int plan_model(options *o, fsl_model *m) {
  options po = *o;
  if (po.strategy < 0 && !fsl_model_is_compiled(m)) po.strategy = FSL_STRATEGY_OPTIMAL;
  int rc = bind_options(&po, m);
  /* a compiled model file (-o FILE.fsl) holds the best backend's kernels */
  bool aot = o->plan_out && ends_with(o->plan_out, ".fsl") && !o->cuda;
  if (rc == EXIT_OK) rc = plan_options(&po, m, aot && !fsl_model_is_compiled(m) ? fsl_backend_default() : NULL);
  if (rc == EXIT_OK) rc = compile_model(&po, m);
  return rc;
}

static int write_plan_file(const char *path, const fsl_model *m) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "fissile: error: cannot write '%s': %s\n", path, strerror(errno));
    return EXIT_MODEL;
  }
  fsl_status st = fsl_model_write_plan_dot(m, f);
  if (fclose(f) != 0 && st == FSL_OK) {
    fprintf(stderr, "fissile: error: cannot write '%s': %s\n", path, strerror(errno));
    return EXIT_MODEL;
  }
  return st == FSL_OK ? EXIT_OK : report(st);
}

static int cmd_compile(options *o, bool explain) {
  fsl_model *m = NULL;
  int rc = load_model(o, &m);
  if (rc == EXIT_OK) rc = plan_model(o, m);
  if (rc == EXIT_OK && explain) {
    fsl_status st = fsl_model_write_plan_dot(m, stdout);
    if (st != FSL_OK) rc = report(st);
    fflush(stdout);
    /* stdout is the DOT: the CUDA resource table goes to the terminal */
    if (rc == EXIT_OK && o->cuda) rc = cuda_emit(o, m, stderr);
  } else if (rc == EXIT_OK) {
    fsl_plan_info pi;
    fsl_status st = fsl_model_plan_info(m, &pi);
    if (st != FSL_OK) rc = report(st);
    else print_plan_summary(o->model, m, &pi);
    fflush(stdout);
    if (rc == EXIT_OK && o->cuda) {
      rc = cuda_emit(o, m, stdout);
    } else if (rc == EXIT_OK && o->plan_out && ends_with(o->plan_out, ".fsl")) {
      fsl_status st = fsl_model_save(m, o->plan_out);
      if (st != FSL_OK) rc = report(st);
      else fprintf(stderr, "fissile: wrote %s (compiled model: runs without the ONNX file or a C compiler on "
                   "a machine like this one)\n", o->plan_out);
    } else if (rc == EXIT_OK && o->plan_out) {
      rc = write_plan_file(o->plan_out, m);
    }
  }
  fsl_model_free(m);
  return rc;
}

/* ---- main ---- */
static bool known_cmd(const char *c) {
  return !strcmp(c, "run") || !strcmp(c, "inspect") || !strcmp(c, "dot") || !strcmp(c, "print") ||
         !strcmp(c, "compile") || !strcmp(c, "explain") || !strcmp(c, "bench") ||
         !strcmp(c, "report");
}

/** Entry point: dispatches to a subcommand; returns an exit code. */
int main(int argc, char **argv) {
  /* Output tensors are malloc'd per run (fsl_model_run).  glibc serves
   * blocks above 128 KiB with a fresh mmap and unmaps them on free, so every
   * run would page-fault its outputs in again (softmax 8x32000: 0.35 ms of
   * which 0.25 ms are page faults).  Like ONNX Runtime's arena, keep such
   * blocks in the heap and do not trim it: this process's allocator
   * choice, not the library's. */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  if (argc < 2) {
    usage_main(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
    usage_main(stdout);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "help")) {
    usage_cmd(argc > 2 ? argv[2] : "", stdout);
    return argc > 2 && !known_cmd(argv[2]) ? EXIT_USAGE : EXIT_OK;
  }
  if (!known_cmd(cmd)) return usage_error("unknown command '%s'", cmd);
  options o;
  memset(&o, 0, sizeof o);
  o.cmd = cmd;
  o.strategy = -1;
  o.rewrite = -1;
  o.repeats = 20;
  o.warmup = 3;
  int rc = parse_args(&o, argc, argv);
  cli_progress_install();
  if (rc == EXIT_OK && o.help) usage_cmd(cmd, stdout);
  else if (rc == EXIT_OK && !strcmp(cmd, "run")) rc = cmd_run(&o);
  else if (rc == EXIT_OK && !strcmp(cmd, "inspect")) rc = cmd_inspect(&o);
  else if (rc == EXIT_OK && !strcmp(cmd, "compile")) rc = cmd_compile(&o, false);
  else if (rc == EXIT_OK && !strcmp(cmd, "explain")) rc = cmd_compile(&o, true);
  else if (rc == EXIT_OK && !strcmp(cmd, "bench")) rc = cmd_bench(&o);
  else if (rc == EXIT_OK && !strcmp(cmd, "report")) rc = cmd_report(&o);
  else if (rc == EXIT_OK) rc = cmd_graph(&o, !strcmp(cmd, "dot"));
  fflush(stdout);
  free_options(&o);
  return rc;
}
