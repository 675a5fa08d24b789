/* _fissile.c — the CPython extension module fissile._fissile: a thin C11
 * layer over libfissile (include/fissile.h) for the Python package
 * (python/fissile/__init__.py builds the onnxruntime-shaped API on it).
 *
 *   Model     one fsl_model: load, bind, compile, describe, run
 *   Tensor    one output fsl_tensor, owned, exported through the buffer
 *             protocol (np.asarray(t) wraps it without a copy)
 *   FissileError and one subclass per fsl_status, carrying the C message
 *
 * Inputs are taken through the buffer protocol (no NumPy C API): a
 * C-contiguous buffer is passed to fsl_model_run as is; the Python layer
 * converts anything else first.  Threads: the GIL is released while a
 * model loads, compiles and runs.  Each Model has its own lock (one run at
 * a time per model; runs of different models overlap).  Compiles take one
 * process-wide lock: they set the process-wide thread count
 * (fsl_set_num_threads) and fill the kernel cache, calibration and
 * profile caches, which are not safe to share between concurrent compiles.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fissile.h"

/* ---- exceptions: one class per fsl_status ---- */

static PyObject *g_err[FSL_STATUS_COUNT]; /* [FSL_OK] is the base FissileError */

static PyObject *raise_status(fsl_status st) {
  const char *msg = fsl_last_error();
  PyObject *cls = (unsigned)st < FSL_STATUS_COUNT && st != FSL_OK ? g_err[st] : g_err[FSL_OK];
  PyErr_SetString(cls, msg && *msg ? msg : fsl_status_name(st));
  return NULL;
}

/* The process-wide compile lock (see the top of the file). */
static PyThread_type_lock g_compile_lock;

/* ---- Tensor: an owned output ---- */

typedef struct {
  PyObject_HEAD
  fsl_tensor t;
  Py_ssize_t shape[FSL_MAX_RANK];
  Py_ssize_t strides[FSL_MAX_RANK];
} TensorObject;

/* struct-module format of a dtype (NULL: not representable); bfloat16 has
 * no format of its own and is exported as its 16-bit pattern ("H"). */
static const char *dtype_format(fsl_dtype dt) {
  switch (dt) {
  case FSL_DT_F32: return "f";
  case FSL_DT_F64: return "d";
  case FSL_DT_F16: return "e";
  case FSL_DT_BF16: return "H";
  case FSL_DT_I8: return "b";
  case FSL_DT_U8: return "B";
  case FSL_DT_I16: return "h";
  case FSL_DT_U16: return "H";
  case FSL_DT_I32: return "i";
  case FSL_DT_U32: return "I";
  case FSL_DT_I64: return "q";
  case FSL_DT_U64: return "Q";
  case FSL_DT_BOOL: return "?";
  default: return NULL;
  }
}

/* dtype of a buffer format in native byte order; FSL_DT_UNDEFINED if none. */
static fsl_dtype format_dtype(const char *fmt, Py_ssize_t itemsize) {
  if (!fmt) fmt = "B";
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++;
  if (!fmt[0] || fmt[1]) return FSL_DT_UNDEFINED; /* '>', '!', structs, multi-char */
  switch (fmt[0]) {
  case 'f': return FSL_DT_F32;
  case 'd': return FSL_DT_F64;
  case 'e': return FSL_DT_F16;
  case 'b': return FSL_DT_I8;
  case 'B': return FSL_DT_U8;
  case 'h': return FSL_DT_I16;
  case 'H': return FSL_DT_U16;
  case '?': return FSL_DT_BOOL;
  case 'i': case 'l': case 'q':
    return itemsize == 4 ? FSL_DT_I32 : itemsize == 8 ? FSL_DT_I64 : FSL_DT_UNDEFINED;
  case 'I': case 'L': case 'Q':
    return itemsize == 4 ? FSL_DT_U32 : itemsize == 8 ? FSL_DT_U64 : FSL_DT_UNDEFINED;
  default: return FSL_DT_UNDEFINED;
  }
}

static void Tensor_dealloc(TensorObject *self) {
  fsl_tensor_free(&self->t);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static char k_empty_data[16]; /* the buffer of an empty tensor (data may be NULL) */

static int Tensor_getbuffer(TensorObject *self, Py_buffer *view, int flags) {
  const char *fmt = dtype_format(self->t.dtype);
  if (!fmt) {
    PyErr_Format(g_err[FSL_ERR_UNSUPPORTED], "output '%s' has dtype %s, which has no buffer format",
                 self->t.name, fsl_dtype_name(self->t.dtype));
    view->obj = NULL;
    return -1;
  }
  Py_ssize_t item = (Py_ssize_t)fsl_dtype_size(self->t.dtype);
  Py_ssize_t n = (Py_ssize_t)fsl_tensor_numel(&self->t);
  view->buf = self->t.data ? self->t.data : (void *)k_empty_data;
  view->obj = Py_NewRef((PyObject *)self);
  view->len = n * item;
  view->itemsize = item;
  view->readonly = 0;
  view->ndim = self->t.rank;
  view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? self->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static PyBufferProcs Tensor_as_buffer = {.bf_getbuffer = (getbufferproc)Tensor_getbuffer};

static PyObject *Tensor_get_name(TensorObject *self, void *c) { return PyUnicode_FromString(self->t.name); }
static PyObject *Tensor_get_dtype(TensorObject *self, void *c) {
  return PyUnicode_FromString(fsl_dtype_name(self->t.dtype));
}
static PyObject *Tensor_get_shape(TensorObject *self, void *c) {
  PyObject *s = PyTuple_New(self->t.rank);
  for (int d = 0; s && d < self->t.rank; d++) PyTuple_SET_ITEM(s, d, PyLong_FromLongLong(self->t.dims[d]));
  return s;
}

static PyGetSetDef Tensor_getset[] = {
  {"name", (getter)Tensor_get_name, NULL, "graph output name", NULL},
  {"dtype", (getter)Tensor_get_dtype, NULL, "ONNX element type name ('float', 'int64', ...)", NULL},
  {"shape", (getter)Tensor_get_shape, NULL, "dimensions (tuple of int)", NULL},
  {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TensorType = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "fissile._fissile.Tensor",
  .tp_basicsize = sizeof(TensorObject),
  .tp_dealloc = (destructor)Tensor_dealloc,
  .tp_as_buffer = &Tensor_as_buffer,
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "An output tensor owned by fissile, exported through the buffer protocol "
            "(np.asarray(t) views it without copying).",
  .tp_getset = Tensor_getset,
};

/* Takes ownership of *t (cleared). */
static PyObject *tensor_wrap(fsl_tensor *t) {
  TensorObject *o = PyObject_New(TensorObject, &TensorType);
  if (!o) {
    fsl_tensor_free(t);
    return NULL;
  }
  o->t = *t;
  memset(t, 0, sizeof *t);
  Py_ssize_t stride = (Py_ssize_t)fsl_dtype_size(o->t.dtype);
  for (int d = o->t.rank - 1; d >= 0; d--) {
    o->shape[d] = (Py_ssize_t)o->t.dims[d];
    o->strides[d] = stride;
    stride *= o->t.dims[d] > 0 ? (Py_ssize_t)o->t.dims[d] : 1;
  }
  return (PyObject *)o;
}

/* ---- Model ---- */

typedef struct {
  PyObject_HEAD
  fsl_model *m;
  PyThread_type_lock lock; /* one call into m at a time */
  int threads;             /* OpenMP threads for compile and run (0: default) */
} ModelObject;

/* Acquires the model's lock with the GIL released (another thread may hold
 * it while running).  Fails if the model is closed. */
static int model_enter(ModelObject *self) {
  if (!self->m) {
    PyErr_SetString(g_err[FSL_ERR_ARG], "the session is closed");
    return -1;
  }
  if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
  }
  if (!self->m) { /* closed while we waited */
    PyThread_release_lock(self->lock);
    PyErr_SetString(g_err[FSL_ERR_ARG], "the session is closed");
    return -1;
  }
  return 0;
}

static void model_leave(ModelObject *self) { PyThread_release_lock(self->lock); }

static int Model_init(ModelObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"path", NULL};
  PyObject *path = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&", kwlist, PyUnicode_FSConverter, &path)) return -1;
  if (self->m) {
    PyErr_SetString(PyExc_RuntimeError, "Model.__init__ called twice");
    Py_DECREF(path);
    return -1;
  }
  if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
    Py_DECREF(path);
    PyErr_NoMemory();
    return -1;
  }
  const char *p = PyBytes_AS_STRING(path);
  fsl_model *m = NULL;
  fsl_status st;
  Py_BEGIN_ALLOW_THREADS
  st = fsl_model_load(p, &m);
  Py_END_ALLOW_THREADS
  Py_DECREF(path);
  if (st != FSL_OK) {
    raise_status(st);
    return -1;
  }
  self->m = m;
  return 0;
}

static void Model_dealloc(ModelObject *self) {
  fsl_model_free(self->m); /* no other reference exists: no run in flight */
  if (self->lock) PyThread_free_lock(self->lock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Model_close(ModelObject *self, PyObject *unused) {
  if (!self->m) Py_RETURN_NONE;
  if (model_enter(self) < 0) return NULL;
  fsl_model_free(self->m);
  self->m = NULL;
  model_leave(self);
  Py_RETURN_NONE;
}

/* Runs call(self->m, ...) under the model's lock; a status becomes an exception. */
#define MODEL_CALL(self, expr)                                                                                  \
  do {                                                                                                         \
    if (model_enter(self) < 0) return NULL;                                                                    \
    fsl_status st_ = (expr);                                                                                   \
    model_leave(self);                                                                                         \
    if (st_ != FSL_OK) return raise_status(st_);                                                               \
  } while (0)

static PyObject *Model_bind_dim(ModelObject *self, PyObject *args) {
  const char *name;
  long long size;
  if (!PyArg_ParseTuple(args, "sL", &name, &size)) return NULL;
  MODEL_CALL(self, fsl_model_bind_dim(self->m, name, (int64_t)size));
  Py_RETURN_NONE;
}

static PyObject *Model_bind_shape(ModelObject *self, PyObject *args) {
  const char *name;
  PyObject *dims_obj;
  if (!PyArg_ParseTuple(args, "sO", &name, &dims_obj)) return NULL;
  PyObject *seq = PySequence_Fast(dims_obj, "shape must be a sequence of ints");
  if (!seq) return NULL;
  Py_ssize_t rank = PySequence_Fast_GET_SIZE(seq);
  if (rank > FSL_MAX_RANK) {
    Py_DECREF(seq);
    return PyErr_Format(g_err[FSL_ERR_SHAPE], "input '%s': rank %zd is more than %d", name, rank, FSL_MAX_RANK);
  }
  int64_t dims[FSL_MAX_RANK];
  for (Py_ssize_t i = 0; i < rank; i++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return NULL;
    }
    dims[i] = (int64_t)v;
  }
  Py_DECREF(seq);
  MODEL_CALL(self, fsl_model_bind_shape(self->m, name, (int)rank, dims));
  Py_RETURN_NONE;
}

static PyObject *Model_set_strategy(ModelObject *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  if (!name) return NULL;
  fsl_strategy s;
  fsl_status st = fsl_strategy_from_name(name, &s);
  if (st != FSL_OK) return raise_status(st);
  MODEL_CALL(self, fsl_model_set_strategy(self->m, s));
  Py_RETURN_NONE;
}

static PyObject *Model_set_rewrite(ModelObject *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  if (!name) return NULL;
  for (int k = 0; k < FSL_REWRITE_MODE_COUNT; k++)
    if (!strcmp(name, fsl_rewrite_mode_name((fsl_rewrite_mode)k))) {
      MODEL_CALL(self, fsl_model_set_rewrite(self->m, (fsl_rewrite_mode)k));
      Py_RETURN_NONE;
    }
  return PyErr_Format(g_err[FSL_ERR_ARG], "unknown rewrite mode '%s' (expected off, rules or search)", name);
}

static PyObject *Model_set_backend(ModelObject *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  if (!name) return NULL;
  MODEL_CALL(self, fsl_model_set_backend(self->m, name));
  Py_RETURN_NONE;
}

static PyObject *Model_set_profile(ModelObject *self, PyObject *arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return NULL;
  MODEL_CALL(self, fsl_model_set_profile(self->m, on != 0));
  Py_RETURN_NONE;
}

static PyObject *Model_set_autotune(ModelObject *self, PyObject *arg) {
  int on = PyObject_IsTrue(arg);
  if (on < 0) return NULL;
  MODEL_CALL(self, fsl_model_set_autotune(self->m, on != 0));
  Py_RETURN_NONE;
}

static PyObject *Model_set_threads(ModelObject *self, PyObject *arg) {
  long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (n < 0 || n > 4096) return PyErr_Format(g_err[FSL_ERR_ARG], "threads must be in [0, 4096], got %ld", n);
  self->threads = (int)n;
  Py_RETURN_NONE;
}

static PyObject *Model_is_compiled(ModelObject *self, PyObject *unused) {
  if (model_enter(self) < 0) return NULL;
  bool c = fsl_model_is_compiled(self->m);
  model_leave(self);
  return PyBool_FromLong(c);
}

static PyObject *Model_compile(ModelObject *self, PyObject *unused) {
  if (model_enter(self) < 0) return NULL;
  fsl_status st;
  Py_BEGIN_ALLOW_THREADS
  PyThread_acquire_lock(g_compile_lock, WAIT_LOCK);
  fsl_set_num_threads(self->threads);
  st = fsl_model_compile(self->m);
  PyThread_release_lock(g_compile_lock);
  Py_END_ALLOW_THREADS
  model_leave(self);
  if (st != FSL_OK) return raise_status(st);
  Py_RETURN_NONE;
}

/* (name, dtype name, dims with -1 for unknown, dim_params with None); dims
 * and dim_params are None where the rank is unknown (outputs before compile) */
static PyObject *describe(ModelObject *self, bool inputs) {
  if (model_enter(self) < 0) return NULL;
  int n = inputs ? fsl_model_num_inputs(self->m) : fsl_model_num_outputs(self->m);
  PyObject *list = PyList_New(n);
  for (int i = 0; list && i < n; i++) {
    fsl_tensor info;
    fsl_status st = inputs ? fsl_model_input_info(self->m, i, &info) : fsl_model_output_info(self->m, i, &info);
    if (st != FSL_OK) {
      Py_CLEAR(list);
      raise_status(st);
      break;
    }
    if (info.rank < 0) { /* not known before compile */
      PyObject *item = Py_BuildValue("(ssOO)", info.name, fsl_dtype_name(info.dtype), Py_None, Py_None);
      if (!item) {
        Py_CLEAR(list);
        break;
      }
      PyList_SET_ITEM(list, i, item);
      continue;
    }
    PyObject *dims = PyTuple_New(info.rank), *params = PyTuple_New(info.rank);
    for (int d = 0; dims && params && d < info.rank; d++) {
      PyTuple_SET_ITEM(dims, d, PyLong_FromLongLong(info.dims[d]));
      const char *p = inputs ? fsl_model_input_dim_param(self->m, i, d) : NULL;
      PyTuple_SET_ITEM(params, d, p ? PyUnicode_FromString(p) : Py_NewRef(Py_None));
    }
    PyObject *item = dims && params ? Py_BuildValue("(ssOO)", info.name, fsl_dtype_name(info.dtype), dims, params)
                                    : NULL;
    Py_XDECREF(dims);
    Py_XDECREF(params);
    if (!item) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, i, item);
  }
  model_leave(self);
  return list;
}

static PyObject *Model_inputs(ModelObject *self, PyObject *unused) { return describe(self, true); }
static PyObject *Model_outputs(ModelObject *self, PyObject *unused) { return describe(self, false); }

static PyObject *Model_input_int_range(ModelObject *self, PyObject *arg) {
  long li = PyLong_AsLong(arg);
  if (li == -1 && PyErr_Occurred()) return NULL;
  int i = li < INT_MIN || li > INT_MAX ? -1 : (int)li;
  int64_t lo = 0, hi = 0;
  const char *kind = NULL;
  MODEL_CALL(self, fsl_model_input_int_range(self->m, i, &lo, &hi, &kind));
  return Py_BuildValue("(LLs)", (long long)lo, (long long)hi, kind ? kind : "other");
}

/* The measured plan choice (fsl_plan_info's tune fields) as a dict, or
 * None when the plan was not chosen by measurement. */
static PyObject *autotune_dict(const fsl_plan_info *pi) {
  if (!pi->tuned) Py_RETURN_NONE;
  PyObject *med = PyDict_New(), *same = PyDict_New();
  for (int k = 0; med && same && k < FSL_STRATEGY_COUNT; k++) {
    const char *name = fsl_strategy_name((fsl_strategy)k);
    PyObject *v = isnan(pi->tune_median_s[k]) ? Py_NewRef(Py_None) : PyFloat_FromDouble(pi->tune_median_s[k]);
    int bad = !v || PyDict_SetItemString(med, name, v) < 0;
    Py_XDECREF(v);
    if (!bad && pi->tune_same_as[k] >= 0) {
      PyObject *o = PyUnicode_FromString(fsl_strategy_name((fsl_strategy)pi->tune_same_as[k]));
      bad = !o || PyDict_SetItemString(same, name, o) < 0;
      Py_XDECREF(o);
    }
    if (bad) Py_CLEAR(med);
  }
  if (!med || !same) {
    Py_XDECREF(med);
    Py_XDECREF(same);
    return NULL;
  }
  return Py_BuildValue("{s:s,s:O,s:i,s:i,s:d,s:N,s:N}", "kept", fsl_strategy_name(pi->strategy), "cached",
                       pi->tune_cached ? Py_True : Py_False, "candidates", pi->tune_candidates, "rounds",
                       pi->tune_rounds, "seconds", pi->tune_s, "median_s", med, "same_as", same);
}

static PyObject *Model_plan_info(ModelObject *self, PyObject *unused) {
  fsl_plan_info pi;
  MODEL_CALL(self, fsl_model_plan_info(self->m, &pi));
  PyObject *tune = autotune_dict(&pi);
  if (!tune) return NULL;
  return Py_BuildValue(
      "{s:s,s:s,s:s,s:i,s:s,s:i,s:i,s:i,s:i,s:{s:i,s:i,s:i,s:i},s:i,s:d,s:d,s:d,s:O,s:L,s:L,s:O,s:i,s:i,s:i,s:i,s:d,s:i,s:i,s:i,"
      "s:i,s:i,s:i,s:s,s:K,s:N}",
      "strategy", fsl_strategy_name(pi.strategy), "backend", pi.backend, "device", pi.device,
      "n_primitives", pi.n_primitives, "rewrite", fsl_rewrite_mode_name(pi.rewrite), "n_rewrites", pi.n_rewrites, "n_lut_tables", pi.n_lut_tables,
      "n_qdq_lifted", pi.n_qdq_lifted,
      "n_kernels", pi.n_kernels,
      "kernels_by_kind", "loop", pi.n_by_kind[0], "reduce", pi.n_by_kind[1], "linear", pi.n_by_kind[2],
      "opaque", pi.n_by_kind[3],
      "n_recomputed", pi.n_recomputed, "predicted_s", pi.predicted_s, "orchestrate_s", pi.orchestrate_s,
      "backend_s", pi.backend_s, "optimal", pi.optimal ? Py_True : Py_False,
      "arena_bytes", (long long)pi.peak_bytes, "total_bytes", (long long)pi.total_bytes,
      "profiled", pi.profiled ? Py_True : Py_False, "n_cost_cached", pi.n_cost_cached,
      "n_cost_measured", pi.n_cost_measured, "n_cost_analytic", pi.n_cost_analytic,
      "n_plan_measured", pi.n_plan_measured, "profile_s", pi.profile_s, "n_native", pi.n_native,
      "n_fallback", pi.n_fallback, "n_opaque", pi.n_opaque, "n_library", pi.n_library, "n_library_int8", pi.n_library_int8, "n_library_requant", pi.n_library_requant, "fallback_why", pi.fallback_why,
      "plan_hash", (unsigned long long)pi.plan_hash, "autotune", tune);
}

/* run(feeds) with feeds a sequence of (name, buffer) pairs; returns the
 * outputs as Tensors in graph-output order. */
static PyObject *Model_run(ModelObject *self, PyObject *arg) {
  PyObject *seq = PySequence_Fast(arg, "feeds must be a sequence of (name, buffer) pairs");
  if (!seq) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > INT_MAX / 2) {
    Py_DECREF(seq);
    return PyErr_Format(g_err[FSL_ERR_ARG], "too many inputs (%zd)", n);
  }
  fsl_tensor *in = PyMem_Calloc((size_t)n + 1, sizeof *in);
  Py_buffer *views = PyMem_Calloc((size_t)n + 1, sizeof *views);
  fsl_tensor *out = NULL;
  Py_ssize_t got = 0; /* views acquired */
  PyObject *result = NULL;
  int n_out = 0;
  if (!in || !views) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; i++, got++) {
    PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
    const char *name;
    PyObject *obj;
    if (!PyTuple_Check(pair) || !PyArg_ParseTuple(pair, "sO", &name, &obj)) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "feeds must be (name, buffer) pairs");
      goto done;
    }
    if (strlen(name) >= sizeof in[i].name) {
      PyErr_Format(g_err[FSL_ERR_ARG], "the model has no input '%.64s...' (name longer than %d bytes)", name,
                   (int)sizeof in[i].name - 1);
      goto done;
    }
    if (PyObject_GetBuffer(obj, &views[i], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
      PyErr_Clear();
      PyErr_Format(g_err[FSL_ERR_ARG], "input '%s': a %s is not a C-contiguous buffer", name,
                   Py_TYPE(obj)->tp_name);
      goto done;
    }
    fsl_dtype dt = format_dtype(views[i].format, views[i].itemsize);
    if (dt == FSL_DT_UNDEFINED) {
      PyErr_Format(g_err[FSL_ERR_SHAPE], "input '%s': element format '%s' (%zd bytes) is not a supported dtype",
                   name, views[i].format ? views[i].format : "B", views[i].itemsize);
      got++;
      goto done;
    }
    if (views[i].ndim > FSL_MAX_RANK) {
      PyErr_Format(g_err[FSL_ERR_SHAPE], "input '%s': rank %d is more than %d", name, views[i].ndim, FSL_MAX_RANK);
      got++;
      goto done;
    }
    snprintf(in[i].name, sizeof in[i].name, "%s", name);
    in[i].dtype = dt;
    in[i].rank = views[i].ndim;
    for (int d = 0; d < views[i].ndim; d++) in[i].dims[d] = views[i].shape ? (int64_t)views[i].shape[d] : 0;
    if (views[i].ndim == 1 && !views[i].shape) in[i].dims[0] = views[i].len / views[i].itemsize;
    in[i].data = views[i].buf;
  }
  if (model_enter(self) < 0) goto done;
  n_out = fsl_model_num_outputs(self->m);
  out = PyMem_Calloc((size_t)n_out + 1, sizeof *out);
  if (!out) {
    model_leave(self);
    PyErr_NoMemory();
    goto done;
  }
  fsl_status st;
  int threads = self->threads;
  Py_BEGIN_ALLOW_THREADS
  if (threads > 0) fsl_set_thread_num_threads(threads);
  st = fsl_model_run(self->m, in, (int)n, out, n_out);
  Py_END_ALLOW_THREADS
  model_leave(self);
  if (st != FSL_OK) {
    raise_status(st);
    n_out = 0; /* nothing was written */
    goto done;
  }
  result = PyList_New(n_out);
  for (int i = 0; i < n_out; i++) {
    PyObject *t = result ? tensor_wrap(&out[i]) : NULL;
    if (!t) {
      Py_CLEAR(result);
      continue; /* free the rest */
    }
    PyList_SET_ITEM(result, i, t);
  }
  for (int i = 0; i < n_out; i++) fsl_tensor_free(&out[i]);
done:
  for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
  PyMem_Free(views);
  PyMem_Free(in);
  PyMem_Free(out);
  Py_DECREF(seq);
  return result;
}

static PyMethodDef Model_methods[] = {
  {"close", (PyCFunction)Model_close, METH_NOARGS, "Frees the model; later calls raise InvalidArgument."},
  {"bind_dim", (PyCFunction)Model_bind_dim, METH_VARARGS, "bind_dim(dim_param, size): fsl_model_bind_dim."},
  {"bind_shape", (PyCFunction)Model_bind_shape, METH_VARARGS, "bind_shape(input, dims): fsl_model_bind_shape."},
  {"set_strategy", (PyCFunction)Model_set_strategy, METH_O, "set_strategy(name): fsl_model_set_strategy."},
  {"set_backend", (PyCFunction)Model_set_backend, METH_O, "set_backend(name): fsl_model_set_backend."},
  {"set_profile", (PyCFunction)Model_set_profile, METH_O, "set_profile(on): fsl_model_set_profile."},
  {"set_autotune", (PyCFunction)Model_set_autotune, METH_O, "set_autotune(on): fsl_model_set_autotune."},
  {"set_rewrite", (PyCFunction)Model_set_rewrite, METH_O, "set_rewrite('off'|'rules'|'search'): fsl_model_set_rewrite."},
  {"set_threads", (PyCFunction)Model_set_threads, METH_O,
   "set_threads(n): OpenMP threads for compile and run (0: the default)."},
  {"compile", (PyCFunction)Model_compile, METH_NOARGS, "fsl_model_compile (GIL released, process-wide lock)."},
  {"is_compiled", (PyCFunction)Model_is_compiled, METH_NOARGS,
   "fsl_model_is_compiled: true for a compiled model file (.fsl) just loaded."},
  {"inputs", (PyCFunction)Model_inputs, METH_NOARGS, "[(name, dtype, dims, dim_params)] of the inputs."},
  {"outputs", (PyCFunction)Model_outputs, METH_NOARGS, "[(name, dtype, dims, dim_params)] of the outputs."},
  {"input_int_range", (PyCFunction)Model_input_int_range, METH_O,
   "input_int_range(i) -> (lo, hi, kind): fsl_model_input_int_range."},
  {"plan_info", (PyCFunction)Model_plan_info, METH_NOARGS, "dict of fsl_model_plan_info."},
  {"run", (PyCFunction)Model_run, METH_O,
   "run([(name, buffer), ...]) -> [Tensor] in graph-output order (GIL released)."},
  {NULL, NULL, 0, NULL},
};

static PyTypeObject ModelType = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "fissile._fissile.Model",
  .tp_basicsize = sizeof(ModelObject),
  .tp_dealloc = (destructor)Model_dealloc,
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "Model(path): one fsl_model loaded with fsl_model_load (see fissile.InferenceSession).",
  .tp_methods = Model_methods,
  .tp_init = (initproc)Model_init,
  .tp_new = PyType_GenericNew,
};

/* ---- module ---- */

static PyObject *mod_backend_names(PyObject *mod, PyObject *unused) {
  const char *const *summary;
  const char *const *names = fsl_backend_names(&summary);
  PyObject *list = PyList_New(0);
  for (int i = 0; list && names[i]; i++) {
    PyObject *item = Py_BuildValue("(ss)", names[i], summary[i] ? summary[i] : "");
    if (!item || PyList_Append(list, item) < 0) Py_CLEAR(list);
    Py_XDECREF(item);
  }
  return list;
}

static PyObject *mod_strategy_names(PyObject *mod, PyObject *unused) {
  PyObject *list = PyList_New(FSL_STRATEGY_COUNT);
  for (int i = 0; list && i < FSL_STRATEGY_COUNT; i++)
    PyList_SET_ITEM(list, i, PyUnicode_FromString(fsl_strategy_name((fsl_strategy)i)));
  return list;
}

static PyMethodDef module_methods[] = {
  {"backend_names", mod_backend_names, METH_NOARGS, "[(name, summary)] of this build's backends (fsl_backend_names)."},
  {"strategy_names", mod_strategy_names, METH_NOARGS, "The strategy names, in fsl_strategy order."},
  {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
  PyModuleDef_HEAD_INIT, "fissile._fissile", "Native layer of the fissile package (libfissile).", -1,
  module_methods, NULL, NULL, NULL, NULL,
};

/* Exception classes: name, extra base (besides FissileError), status. */
static const struct { const char *name; fsl_status st; const char *doc; } k_errors[] = {
  {"InvalidArgument", FSL_ERR_ARG, "A bad argument: an unknown input, output, strategy or backend name, a missing input."},
  {"FileError", FSL_ERR_IO, "A file could not be read or written."},
  {"ParseError", FSL_ERR_PARSE, "The model file is not a valid ONNX protobuf."},
  {"InvalidModel", FSL_ERR_INVALID, "The model is malformed (dangling value, cycle, bad attribute)."},
  {"UnsupportedError", FSL_ERR_UNSUPPORTED, "An op, opset or dtype fissile does not support."},
  {"ShapeError", FSL_ERR_SHAPE, "Shapes or dtypes do not agree, or a dim_param is unbound."},
  {"OutOfMemory", FSL_ERR_NOMEM, "Out of memory, or a size that overflows."},
  {"ExecutionError", FSL_ERR_RUNTIME, "An error while executing (e.g. gather index out of range)."},
};

static PyObject *extra_base(fsl_status st) {
  switch (st) {
  case FSL_ERR_ARG: return PyExc_ValueError;
  case FSL_ERR_IO: return PyExc_OSError;
  case FSL_ERR_SHAPE: return PyExc_ValueError;
  case FSL_ERR_NOMEM: return PyExc_MemoryError;
  case FSL_ERR_RUNTIME: return PyExc_RuntimeError;
  case FSL_ERR_UNSUPPORTED: return PyExc_NotImplementedError;
  default: return NULL;
  }
}

static int add_errors(PyObject *m) {
  g_err[FSL_OK] = PyErr_NewExceptionWithDoc("fissile.FissileError",
                                            "Base class of fissile's errors; the message is libfissile's.",
                                            PyExc_Exception, NULL);
  if (!g_err[FSL_OK] || PyModule_AddObjectRef(m, "FissileError", g_err[FSL_OK]) < 0) return -1;
  if (PyObject_SetAttrString(g_err[FSL_OK], "status", Py_None) < 0) return -1;
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++) {
    char qual[64];
    snprintf(qual, sizeof qual, "fissile.%s", k_errors[i].name);
    PyObject *extra = extra_base(k_errors[i].st);
    PyObject *bases = extra ? PyTuple_Pack(2, g_err[FSL_OK], extra) : PyTuple_Pack(1, g_err[FSL_OK]);
    if (!bases) return -1;
    PyObject *cls = PyErr_NewExceptionWithDoc(qual, k_errors[i].doc, bases, NULL);
    Py_DECREF(bases);
    if (!cls) return -1;
    g_err[k_errors[i].st] = cls;
    PyObject *status = PyUnicode_FromString(fsl_status_name(k_errors[i].st));
    int rc = status ? PyObject_SetAttrString(cls, "status", status) : -1;
    Py_XDECREF(status);
    if (rc < 0 || PyModule_AddObjectRef(m, k_errors[i].name, cls) < 0) return -1;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__fissile(void) {
  /* Python loads extension modules RTLD_LOCAL, so the OpenMP runtime that
   * oneDNN pulls in is outside the global symbol scope where libfissile
   * looks up omp_set_num_threads (src/api.c, src/backend/cpu/onednn.c):
   * make it global, as it is for an executable linked with oneDNN. */
  void *gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
  (void)gomp; /* keeps the reference: libgomp stays loaded for the process */
  if (PyType_Ready(&TensorType) < 0 || PyType_Ready(&ModelType) < 0) return NULL;
  if (!g_compile_lock && !(g_compile_lock = PyThread_allocate_lock())) return PyErr_NoMemory();
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (add_errors(m) < 0 || PyModule_AddObjectRef(m, "Model", (PyObject *)&ModelType) < 0 ||
      PyModule_AddObjectRef(m, "Tensor", (PyObject *)&TensorType) < 0 ||
      PyModule_AddIntConstant(m, "MAX_RANK", FSL_MAX_RANK) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
