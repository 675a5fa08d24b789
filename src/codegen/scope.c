/*
 * scope.c — emitter state: scopes, fresh temporaries, loop-invariant
 * hoisting (loop_begin/loop_end) and the memo of computed elements.
 */
#include "codegen/cg.h"

bool fsl_cg_fail(em *e, fsl_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool fsl_cg_fail(em *e, fsl_status s, const char *fmt, ...) {
  if (e->st == FSL_OK) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    e->st = fsl_errorf(s, "%s codegen: %s", e->d->name, msg);
  }
  return false;
}

void fsl_cg_line(em *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsl_cg_line(em *e, const char *fmt, ...) {
  char tmp[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  for (int i = 0; i < e->indent; i++) fsl_sbuf_puts(e->b, "  ");
  if (n >= (int)sizeof tmp) e->b->oom = true;  /* never happens: expressions are hoisted */
  fsl_sbuf_puts(e->b, tmp);
  fsl_sbuf_puts(e->b, "\n");
}

void fsl_cg_open_scope(em *e) {
  e->depth++;
  e->indent++;
}

void fsl_cg_close_scope(em *e) {
  e->depth--;
  e->indent--;
  int k = 0;
  for (int i = 0; i < e->n_memo; i++) {
    if (e->memo[i].depth > e->depth) free(e->memo[i].key);
    else e->memo[k++] = e->memo[i];
  }
  e->n_memo = k;
  k = 0;
  for (int i = 0; i < e->n_dec; i++)
    if (e->dec[i].depth <= e->depth) e->dec[k++] = e->dec[i];
  e->n_dec = k;
  k = 0;
  for (int i = 0; i < e->n_quot; i++)
    if (e->quot[i].depth <= e->depth) e->quot[k++] = e->quot[i];
  e->n_quot = k;
}

/* A fresh temporary number; remembers whether it is loop-variant. */
int fsl_cg_new_tmp(em *e) {
  int t = e->tmp++;
  if (t >= e->cap_tvar) {
    int cap = e->cap_tvar ? e->cap_tvar * 2 : 256;
    while (cap <= t) cap *= 2;
    bool *p = realloc(e->tvar, sizeof *p * (size_t)cap);
    if (!p) {
      e->b->oom = true;
      return t;
    }
    e->tvar = p;
    e->cap_tvar = cap;
  }
  e->tvar[t] = e->pre && !e->hoisting;
  return t;
}

/* Whether identifier or literal s changes from one iteration of the
 * current innermost loop to the next. */
bool fsl_cg_ident_variant(const em *e, const char *s) {
  if (!e->pre) return false;
  if (e->lv_exact[0] && strcmp(s, e->lv_exact) == 0) return true;
  if (e->lv_prefix[0] && s[0] == e->lv_prefix[0] && (s[1] == '_' || (s[1] >= '0' && s[1] <= '9'))) return true;
  if (e->red_cols && s[0] == 'r' && s[1] >= '0' && s[1] <= '9') return true;
  if ((s[0] == 'i' || s[0] == 't') && s[1] >= '0' && s[1] <= '9') {
    int t = atoi(s + 1);
    return t < e->cap_tvar && e->tvar[t];
  }
  return false;
}

bool fsl_cg_coords_variant(const em *e, const coords *c) {
  for (int i = 0; i < c->rank; i++)
    if (fsl_cg_ident_variant(e, c->c[i])) return true;
  return false;
}


void fsl_cg_loop_begin(em *e, loop_ctx *L, const char *lv_prefix, const char *lv_exact) {
  L->outer = e->b;
  memset(&L->pre, 0, sizeof L->pre);
  memset(&L->body, 0, sizeof L->body);
  e->pre = &L->pre;
  e->pre_indent = e->indent;
  e->pre_depth = e->depth;
  e->body_depth = -1;
  e->b = &L->body;
  snprintf(e->lv_prefix, sizeof e->lv_prefix, "%s", lv_prefix);
  snprintf(e->lv_exact, sizeof e->lv_exact, "%s", lv_exact);
}

void fsl_cg_loop_end(em *e, loop_ctx *L) {
  fsl_sbuf_puts(L->outer, L->pre.p ? L->pre.p : "");
  fsl_sbuf_puts(L->outer, L->body.p ? L->body.p : "");
  if (L->pre.oom || L->body.oom) L->outer->oom = true;
  fsl_sbuf_free(&L->pre);
  fsl_sbuf_free(&L->body);
  e->b = L->outer;
  e->pre = NULL;
  e->body_depth = -1;
  e->lv_prefix[0] = e->lv_exact[0] = 0;
}

static void coords_key(const coords *c, char *key, size_t cap) {
  size_t o = 0;
  key[0] = 0;
  for (int i = 0; i < c->rank && o + CLEN + 2 < cap; i++) o += (size_t)snprintf(key + o, cap - o, "%s,", c->c[i]);
}

const char *fsl_cg_memo_find(em *e, int vid, const coords *c) {
  char key[FSL_MAX_RANK * (CLEN + 1) + 8];
  coords_key(c, key, sizeof key);
  for (int i = e->n_memo - 1; i >= 0; i--)
    if (e->memo[i].vid == vid && strcmp(e->memo[i].key, key) == 0) return e->memo[i].var;
  return NULL;
}

void fsl_cg_memo_add(em *e, int vid, const coords *c, const char *var) {
  if (e->n_memo == e->cap_memo) {
    int cap = e->cap_memo ? e->cap_memo * 2 : 64;
    memo_ent *m = realloc(e->memo, sizeof *m * (size_t)cap);
    if (!m) {
      e->b->oom = true;
      return;
    }
    e->memo = m;
    e->cap_memo = cap;
  }
  char key[FSL_MAX_RANK * (CLEN + 1) + 8];
  coords_key(c, key, sizeof key);
  memo_ent *m = &e->memo[e->n_memo];
  m->key = strdup(key);
  if (!m->key) {
    e->b->oom = true;
    return;
  }
  m->vid = vid;
  m->depth = e->depth;
  snprintf(m->var, CLEN, "%s", var);
  e->n_memo++;
}

/* Opens loop L (the dialect prints its header); the caller closes it with
 * fsl_cg_close_scope and a "}" line. */
void fsl_cg_loop_open(em *e, const fsl_cg_loop *L) {
  char annot[256], head[256];
  annot[0] = head[0] = 0;
  e->d->loop_header(L, annot, sizeof annot, head, sizeof head);
  if (annot[0]) fsl_cg_line(e, "%s", annot);
  fsl_cg_line(e, "%s", head);
}
