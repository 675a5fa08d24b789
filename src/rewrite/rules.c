/*
 * rules.c — the parser of the rule language (docs/rewrite.md) and the
 * built-in rule set (core.rules and generated.rules, compiled into the
 * library).
 *
 *   rule NAME
 *     from PATTERN [, PATTERN...]      source: primitives over names
 *     to   PATTERN [, PATTERN...]      target: one per source root
 *     when (CONDITION ...) ...         optional
 *     test NAME:SPEC ...               how to instantiate the rule
 *
 * A keyword counts only as the first word of a line; '#' starts a comment.
 */
#include "rewrite/rewrite.h"

#include <ctype.h>
#include <pthread.h>

extern const char fsl_rules_core[];      /* core.rules and generated.rules, */
extern const char fsl_rules_generated[]; /* embedded by cmake/embed.cmake */

/* ---- tokens ---- */
typedef struct tok {
  char c;            /* '(' ')' '[' ']' ',' '=' ':' or 'w' (word) or 0 (end) */
  const char *s;     /* word text (arena) */
  int line;
  bool first;        /* the first token of its line */
} tok;

typedef struct parser {
  fsl_ruleset *rs;
  const char *file;
  tok *t;
  int n, cap, pos;
  bool in_call;      /* parsing a condition or an attribute value: (name ...) is a function */
  fsl_status st;
} parser;

static bool word_char(int c) {
  return isalnum(c) || c == '_' || c == '-' || c == '.' || c == '*' || c == '+' || c == '$' || c == '@';
}

static fsl_status perr(parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static fsl_status perr(parser *p, int line, const char *fmt, ...) {
  if (p->st != FSL_OK) return p->st;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  p->st = fsl_errorf(FSL_ERR_PARSE, "%s:%d: %s", p->file, line, msg);
  return p->st;
}

static fsl_status tokenize(parser *p, const char *s) {
  int line = 1;
  bool first = true;
  while (*s) {
    if (*s == '\n') {
      line++;
      first = true;
      s++;
      continue;
    }
    if (isspace((unsigned char)*s)) {
      s++;
      continue;
    }
    if (*s == '#') {
      while (*s && *s != '\n') s++;
      continue;
    }
    if (p->n + 1 >= p->cap) {
      int nc = p->cap ? 2 * p->cap : 256;
      tok *nt = realloc(p->t, sizeof *nt * (size_t)nc);
      if (!nt) return fsl_errorf(FSL_ERR_NOMEM, "out of memory parsing rules");
      p->t = nt;
      p->cap = nc;
    }
    tok *t = &p->t[p->n++];
    t->line = line;
    t->first = first;
    first = false;
    t->s = NULL;
    if (strchr("()[],=:", *s)) {
      t->c = *s++;
      continue;
    }
    if (!word_char((unsigned char)*s)) return perr(p, line, "unexpected character '%c'", *s);
    const char *b = s;
    while (word_char((unsigned char)*s)) s++;
    t->c = 'w';
    t->s = fsl_arena_alloc(&p->rs->arena, (size_t)(s - b) + 1);
    if (!t->s) return fsl_errorf(FSL_ERR_NOMEM, "out of memory parsing rules");
    memcpy((char *)t->s, b, (size_t)(s - b));
    ((char *)t->s)[s - b] = 0;
  }
  if (p->n >= p->cap) {
    tok *nt = realloc(p->t, sizeof *nt * (size_t)(p->n + 1));
    if (!nt) return fsl_errorf(FSL_ERR_NOMEM, "out of memory parsing rules");
    p->t = nt;
  }
  p->t[p->n] = (tok){.c = 0, .line = line, .first = true};
  return FSL_OK;
}

static tok *peek(parser *p) { return &p->t[p->pos]; }
static tok *next(parser *p) { return p->pos < p->n ? &p->t[p->pos++] : &p->t[p->n]; }
static bool is_kw(const tok *t) {
  static const char *const kw[] = {"rule", "from", "to", "when", "test", NULL};
  if (t->c == 0) return true;
  if (t->c != 'w' || !t->first) return false;
  for (int i = 0; kw[i]; i++)
    if (!strcmp(t->s, kw[i])) return true;
  return false;
}
static bool expect(parser *p, char c) {
  tok *t = next(p);
  if (t->c == c) return true;
  perr(p, t->line, "expected '%c', found %s", c, t->c == 'w' ? t->s : t->c ? (char[]){t->c, 0} : "the end");
  return false;
}

static fsl_rw_expr *new_expr(parser *p, fsl_rw_kind k) {
  fsl_rw_expr *e = fsl_arena_alloc(&p->rs->arena, sizeof *e);
  if (!e) {
    p->st = fsl_errorf(FSL_ERR_NOMEM, "out of memory parsing rules");
    return NULL;
  }
  memset(e, 0, sizeof *e);
  e->kind = k;
  return e;
}

static bool push(parser *p, void **arr, int *n, size_t size, const void *item) {
  void *na = fsl_arena_alloc(&p->rs->arena, size * (size_t)(*n + 1));
  if (!na) {
    p->st = fsl_errorf(FSL_ERR_NOMEM, "out of memory parsing rules");
    return false;
  }
  if (*n) memcpy(na, *arr, size * (size_t)*n);
  memcpy((char *)na + size * (size_t)*n, item, size);
  *arr = na;
  (*n)++;
  return true;
}

static bool parse_number(const char *s, double *v, bool *is_int) {
  char *end;
  *v = strtod(s, &end);
  if (end == s || *end) return false;
  *is_int = !strpbrk(s, ".eE") && strcmp(s, "-") && strcmp(s, "+");
  return true;
}

/* a*b+1-c: '+'/'-' below '*', left to right; words are symbols or integers. */
static fsl_rw_expr *parse_arith(parser *p, const char *s, size_t len, int line) {
  for (int pass = 0; pass < 2; pass++) {
    const char *ops = pass == 0 ? "+-" : "*";
    for (size_t i = len; i-- > 1;) {
      if (!strchr(ops, s[i])) continue;
      fsl_rw_expr *e = new_expr(p, FSL_RW_ARITH);
      if (!e) return NULL;
      e->name = s[i] == '+' ? "+" : s[i] == '-' ? "-" : "*";
      fsl_rw_expr *l = parse_arith(p, s, i, line), *r = parse_arith(p, s + i + 1, len - i - 1, line);
      if (!l || !r) return NULL;
      push(p, (void **)&e->args, &e->n_args, sizeof l, &l);
      push(p, (void **)&e->args, &e->n_args, sizeof r, &r);
      return e;
    }
  }
  char buf[64];
  if (len == 0 || len >= sizeof buf) {
    perr(p, line, "bad dimension expression");
    return NULL;
  }
  memcpy(buf, s, len);
  buf[len] = 0;
  double v;
  bool is_int;
  fsl_rw_expr *e;
  if (parse_number(buf, &v, &is_int)) {
    if (!is_int) {
      perr(p, line, "dimension %s is not an integer", buf);
      return NULL;
    }
    if (!(e = new_expr(p, FSL_RW_NUM))) return NULL;
    e->num = v;
    e->is_int = true;
    return e;
  }
  if (!(e = new_expr(p, FSL_RW_VAR))) return NULL;
  e->name = fsl_arena_strdup(&p->rs->arena, buf);
  return e;
}

static fsl_rw_expr *parse_expr(parser *p, bool arith);
static bool is_function(const char *s);

static fsl_rw_expr *parse_list(parser *p, bool arith) {
  fsl_rw_expr *e = new_expr(p, FSL_RW_LIST);
  if (!e || !expect(p, '[')) return NULL;
  if (peek(p)->c == ']') {
    next(p);
    return e;
  }
  for (;;) {
    fsl_rw_expr *a = parse_expr(p, arith);
    if (!a || !push(p, (void **)&e->args, &e->n_args, sizeof a, &a)) return NULL;
    tok *t = next(p);
    if (t->c == ']') return e;
    if (t->c != ',') {
      perr(p, t->line, "expected ',' or ']' in a list");
      return NULL;
    }
  }
}

static fsl_op prim_by_name(const char *s) {
  for (int op = 1; op < FSL_OP_COUNT; op++)
    if (fsl_op_is_primitive((fsl_op)op) && !strcmp(fsl_op_name((fsl_op)op), s)) return (fsl_op)op;
  return FSL_OP_NONE;
}

static fsl_rw_expr *parse_paren(parser *p, const char *label) {
  int line = peek(p)->line;
  if (!expect(p, '(')) return NULL;
  tok *h = next(p);
  if (h->c != 'w') {
    perr(p, h->line, "expected an op or function name after '('");
    return NULL;
  }
  /* (eq a b) is the primitive as an operand, the condition elsewhere */
  fsl_op op = p->in_call && is_function(h->s) ? FSL_OP_NONE : prim_by_name(h->s);
  if (!op && !p->in_call) {
    perr(p, h->line, "(%s) is not a primitive", h->s);
    return NULL;
  }
  bool outer = p->in_call;
  fsl_rw_expr *e = new_expr(p, op ? FSL_RW_NODE : FSL_RW_CALL);
  if (!e) return NULL;
  e->op = op;
  e->name = h->s;
  e->label = label;
  if (label && !op) {
    perr(p, line, "label %s names (%s), which is not a primitive", label, h->s);
    return NULL;
  }
  for (;;) {
    tok *t = peek(p);
    if (t->c == ')') {
      next(p);
      break;
    }
    if (t->c == 0 || is_kw(t)) {
      perr(p, line, "unclosed '(' of (%s)", h->s);
      return NULL;
    }
    if (t->c == ':') {
      next(p);
      tok *a = next(p);
      if (!op || a->c != 'w') {
        perr(p, a->line, "attributes (':name value') belong to primitives, not to (%s)", h->s);
        return NULL;
      }
      if (!strcmp(a->s, "like")) {
        tok *l = next(p);
        if (l->c != 'w') {
          perr(p, l->line, ":like takes a label");
          return NULL;
        }
        e->like = l->s;
        continue;
      }
      p->in_call = true;
      fsl_rw_attr at = {.name = a->s, .val = parse_expr(p, false)};
      p->in_call = outer;
      if (!at.val || !push(p, (void **)&e->attrs, &e->n_attrs, sizeof at, &at)) return NULL;
      continue;
    }
    p->in_call = !op;
    fsl_rw_expr *a = parse_expr(p, false);
    p->in_call = outer;
    if (!a || !push(p, (void **)&e->args, &e->n_args, sizeof a, &a)) return NULL;
  }
  if (op) {
    int want = fsl_op_get(op)->min_in;
    if (fsl_op_get(op)->max_in >= 0 && e->n_args != want) {
      perr(p, line, "(%s) takes %d operands, the pattern gives %d", h->s, want, e->n_args);
      return NULL;
    }
  }
  return e;
}

static fsl_rw_expr *parse_expr(parser *p, bool arith) {
  tok *t = peek(p);
  if (t->c == '(') return parse_paren(p, NULL);
  if (t->c == '[') return parse_list(p, arith);
  if (t->c != 'w' || is_kw(t)) {
    perr(p, t->line, "expected an expression");
    return NULL;
  }
  next(p);
  if (peek(p)->c == '=' && p->t[p->pos + 1].c == '(') {
    next(p);
    return parse_paren(p, t->s);
  }
  double v;
  bool is_int;
  if (parse_number(t->s, &v, &is_int)) {
    fsl_rw_expr *e = new_expr(p, FSL_RW_NUM);
    if (!e) return NULL;
    e->num = v;
    e->is_int = is_int;
    return e;
  }
  if (arith) return parse_arith(p, t->s, strlen(t->s), t->line);
  fsl_rw_expr *e = new_expr(p, FSL_RW_VAR);
  if (e) e->name = t->s;
  return e;
}

/* PATTERN [, PATTERN...] up to the next keyword */
static int parse_roots(parser *p, fsl_rw_expr **out) {
  int n = 0;
  for (;;) {
    if (n == FSL_RW_MAX_ROOTS) {
      perr(p, peek(p)->line, "more than %d roots", FSL_RW_MAX_ROOTS);
      return -1;
    }
    if (!(out[n++] = parse_expr(p, false))) return -1;
    if (peek(p)->c != ',') return n;
    next(p);
  }
}

static fsl_dtype dtype_by_name(const char *s) {
  for (int d = 1; d < FSL_DT_COUNT; d++) {
    const char *n = fsl_dtype_name((fsl_dtype)d);
    if (n && !strcmp(n, s)) return (fsl_dtype)d;
  }
  return FSL_DT_UNDEFINED;
}

/* NAME:[dims]  NAME:float[dims]  NAME:float+[dims]  NAME:int64[dims]  NAME:const[dims]
 * NAME:const=V[dims]  NAME=[ints]  NAME=N  NAME=perm(N) */
static bool parse_test(parser *p, fsl_rule *r) {
  tok *n = next(p);
  fsl_rw_test t = {.name = n->s, .dtype = FSL_DT_F32, .vary_axis = -1};
  if (n->c != 'w') return perr(p, n->line, "expected a test binding NAME:TYPE[dims] or NAME=VALUE"), false;
  tok *sep = next(p);
  if (sep->c == '=') {
    if (peek(p)->c == '[') {
      t.kind = FSL_RWT_INTS;
      if (!(t.dims = parse_list(p, true))) return false;
    } else if (peek(p)->c == 'w' && strcmp(peek(p)->s, "perm")) {
      t.kind = FSL_RWT_INTS; /* NAME=N: one integer */
      if (!(t.dims = parse_arith(p, peek(p)->s, strlen(peek(p)->s), peek(p)->line))) return false;
      next(p);
    } else {
      tok *f = next(p);
      if (f->c != 'w' || strcmp(f->s, "perm") || !expect(p, '(')) return perr(p, f->line, "expected [ints] or perm(N) after %s=", t.name), false;
      tok *k = next(p);
      double v;
      bool is_int;
      if (k->c != 'w' || !parse_number(k->s, &v, &is_int) || !is_int || v < 1 || v > FSL_MAX_RANK)
        return perr(p, k->line, "perm(N) takes a rank 1..%d", FSL_MAX_RANK), false;
      if (!expect(p, ')')) return false;
      t.kind = FSL_RWT_PERM;
      if (!(t.dims = new_expr(p, FSL_RW_NUM))) return false;
      t.dims->num = v;
      t.dims->is_int = true;
    }
    return push(p, (void **)&r->tests, &r->n_tests, sizeof t, &t);
  }
  if (sep->c != ':') return perr(p, sep->line, "expected ':' or '=' after test name %s", t.name), false;
  t.kind = FSL_RWT_INPUT;
  if (peek(p)->c == 'w') {
    tok *ty = next(p);
    char buf[32];
    snprintf(buf, sizeof buf, "%s", ty->s);
    size_t L = strlen(buf);
    if (L && buf[L - 1] == '+') {
      t.positive = true;
      buf[L - 1] = 0;
    }
    char *at = strchr(buf, '@');
    if (at && !strncmp(buf, "const@", 6)) {
      char *end;
      long ax = strtol(at + 1, &end, 10);
      if (end == at + 1 || *end || ax < 0 || ax >= FSL_MAX_RANK) return perr(p, ty->line, "const@AXIS takes an axis"), false;
      t.vary_axis = (int)ax;
      *at = 0;
    }
    if (!strcmp(buf, "const")) {
      t.kind = FSL_RWT_CONST;
      if (peek(p)->c == '=') {
        next(p);
        tok *v = next(p);
        bool is_int;
        if (v->c != 'w' || !parse_number(v->s, &t.fill, &is_int)) return perr(p, v->line, "const= takes a number"), false;
        t.has_fill = true;
      }
    } else if ((t.dtype = dtype_by_name(buf)) == FSL_DT_UNDEFINED) {
      return perr(p, ty->line, "unknown test type %s (an ONNX dtype name such as float or int64, or const)", ty->s), false;
    }
  }
  if (!(t.dims = parse_list(p, true))) return false;
  return push(p, (void **)&r->tests, &r->n_tests, sizeof t, &t);
}

/* ---- checks on a parsed rule ---- */
typedef struct names {
  const char *s[FSL_RW_MAX_BIND * 2];
  int n;
} names;

static bool has(const names *ns, const char *s) {
  for (int i = 0; i < ns->n; i++)
    if (!strcmp(ns->s[i], s)) return true;
  return false;
}
static void add(names *ns, const char *s) {
  if (s && !has(ns, s) && ns->n < (int)FSL_ARRAY_LEN(ns->s)) ns->s[ns->n++] = s;
}

/* names bound by a source pattern: operand variables, attribute variables, labels */
static void source_names(const fsl_rw_expr *e, names *vals, names *attrs) {
  if (e->kind == FSL_RW_VAR) add(vals, e->name);
  if (e->kind != FSL_RW_NODE) return;
  add(vals, e->label);
  for (int i = 0; i < e->n_args; i++) source_names(e->args[i], vals, attrs);
  for (int i = 0; i < e->n_attrs; i++)
    if (e->attrs[i].val->kind == FSL_RW_VAR) add(attrs, e->attrs[i].val->name);
}


/* every name used in e is in ok; functions known */
static const char *unbound(const fsl_rw_expr *e, const names *ok) {
  switch (e->kind) {
  case FSL_RW_VAR: return has(ok, e->name) ? NULL : e->name;
  case FSL_RW_NUM: return NULL;
  case FSL_RW_CALL:
    if (!is_function(e->name)) return e->name;
    /* fall through */
  default:
    if (e->like && !has(ok, e->like)) return e->like;
    for (int i = 0; i < e->n_args; i++) {
      /* the second argument of (attr L NAME) is an attribute name */
      if (e->kind == FSL_RW_CALL && !strcmp(e->name, "attr") && i == 1) continue;
      const char *u = unbound(e->args[i], ok);
      if (u) return u;
    }
    for (int i = 0; i < e->n_attrs; i++) {
      const char *u = unbound(e->attrs[i].val, ok);
      if (u) return u;
    }
    return NULL;
  }
}

static void target_labels(const fsl_rw_expr *e, names *ns) {
  if (e->kind != FSL_RW_NODE && e->kind != FSL_RW_CALL) return;
  if (e->label) add(ns, e->label);
  for (int i = 0; i < e->n_args; i++) target_labels(e->args[i], ns);
}

static bool ops_multilinear(const fsl_rw_expr *e) {
  if (e->kind != FSL_RW_NODE) return true;
  switch (e->op) {
  case FSL_OP_add: case FSL_OP_sub: case FSL_OP_mul: case FSL_OP_neg: case FSL_OP_matmul: case FSL_OP_conv:
  case FSL_OP_reduce_sum: case FSL_OP_reshape: case FSL_OP_permute: case FSL_OP_expand: case FSL_OP_slice:
  case FSL_OP_concat: case FSL_OP_window: case FSL_OP_pad:
    break;
  default: return false;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!ops_multilinear(e->args[i])) return false;
  return true;
}

static bool finish_rule(parser *p, fsl_rule *r) {
  if (!r->n_from || !r->n_to) return perr(p, r->line, "rule %s needs 'from' and 'to'", r->name), false;
  if (r->n_from != r->n_to)
    return perr(p, r->line, "rule %s: %d source roots but %d target roots", r->name, r->n_from, r->n_to), false;
  if (r->from[0]->kind != FSL_RW_NODE)
    return perr(p, r->line, "rule %s: the first source root must be a primitive", r->name), false;
  names vals = {0}, attrs = {0}, ok = {0}, tested = {0};
  for (int i = 0; i < r->n_from; i++) source_names(r->from[i], &vals, &attrs);
  for (int i = 0; i < vals.n; i++) add(&ok, vals.s[i]);
  for (int i = 0; i < attrs.n; i++) add(&ok, attrs.s[i]);
  for (int i = 0; i < r->n_when; i++) {
    const char *u = unbound(r->when[i], &ok);
    if (u) return perr(p, r->line, "rule %s: condition uses %s, which the source does not bind (or no such function)", r->name, u), false;
  }
  for (int i = 0; i < r->n_to; i++) target_labels(r->to[i], &ok);
  for (int i = 0; i < r->n_to; i++) {
    const char *u = unbound(r->to[i], &ok);
    if (u) return perr(p, r->line, "rule %s: target uses %s, which the source does not bind (or no such function)", r->name, u), false;
  }
  for (int i = 0; i < r->n_tests; i++) add(&tested, r->tests[i].name);
  names labels = {0};
  for (int i = 0; i < r->n_from; i++) target_labels(r->from[i], &labels);
  for (int i = 0; i < vals.n; i++)
    if (!has(&labels, vals.s[i]) && !has(&tested, vals.s[i]))
      return perr(p, r->line, "rule %s: the test instance does not make %s", r->name, vals.s[i]), false;
  for (int i = 0; i < attrs.n; i++)
    if (!has(&tested, attrs.s[i]))
      return perr(p, r->line, "rule %s: the test instance does not make attribute %s", r->name, attrs.s[i]), false;
  r->multilinear = true;
  for (int i = 0; i < r->n_from; i++) r->multilinear = r->multilinear && ops_multilinear(r->from[i]);
  for (int i = 0; i < r->n_to; i++) r->multilinear = r->multilinear && ops_multilinear(r->to[i]);
  return true;
}

static bool is_function(const char *s) {
  static const char *const fns[] = {
      /* attribute functions (apply.c) */
      "compose", "inverse", "dims", "dim", "rank", "vector-at", "set-dim", "attr", "at", "+", "-", "*",
      "axis-of",
      /* conditions */
      "const", "runtime", "identity", "eq", "ne", "le", "same-attrs", "all", "float", "channel", "ints-all", "square",
      "varies-only", "windows-hit", NULL};
  for (int i = 0; fns[i]; i++)
    if (!strcmp(fns[i], s)) return true;
  return false;
}

fsl_status fsl_ruleset_parse(fsl_ruleset *rs, const char *text, const char *file) {
  if (!rs || !text) return fsl_errorf(FSL_ERR_ARG, "fsl_ruleset_parse: NULL argument");
  parser p = {.rs = rs, .file = file ? file : "rules"};
  fsl_status st = tokenize(&p, text);
  while (st == FSL_OK && p.st == FSL_OK && peek(&p)->c) {
    tok *t = next(&p);
    if (t->c != 'w' || strcmp(t->s, "rule") || !t->first) {
      perr(&p, t->line, "expected 'rule NAME' at the start of a line");
      break;
    }
    tok *nm = next(&p);
    if (nm->c != 'w') {
      perr(&p, nm->line, "expected a rule name");
      break;
    }
    fsl_rule r = {.name = nm->s, .file = p.file, .line = t->line};
    if (peek(&p)->c == 'w' && !peek(&p)->first && !strcmp(peek(&p)->s, "cost")) {
      next(&p);
      r.cost = true;
    }
    for (int i = 0; i < rs->n_rules; i++)
      if (!strcmp(rs->rules[i].name, r.name)) perr(&p, t->line, "rule %s is defined twice", r.name);
    while (p.st == FSL_OK && peek(&p)->c && strcmp(peek(&p)->s ? peek(&p)->s : "", "rule")) {
      tok *k = next(&p);
      if (!is_kw(k)) {
        perr(&p, k->line, "rule %s: expected from, to, when or test", r.name);
        break;
      }
      if (!strcmp(k->s, "from")) r.n_from = parse_roots(&p, r.from);
      else if (!strcmp(k->s, "to")) r.n_to = parse_roots(&p, r.to);
      else if (!strcmp(k->s, "when")) {
        while (p.st == FSL_OK && !is_kw(peek(&p))) {
          p.in_call = true;
          fsl_rw_expr *c = parse_expr(&p, false);
          p.in_call = false;
          if (c && c->kind != FSL_RW_CALL) perr(&p, k->line, "rule %s: a condition is (function args...)", r.name);
          if (c) push(&p, (void **)&r.when, &r.n_when, sizeof c, &c);
        }
      } else {
        while (p.st == FSL_OK && !is_kw(peek(&p))) parse_test(&p, &r);
      }
    }
    if (p.st != FSL_OK || !finish_rule(&p, &r)) break;
    if (rs->n_rules == rs->cap_rules) {
      int nc = rs->cap_rules ? 2 * rs->cap_rules : 64;
      fsl_rule *nr = realloc(rs->rules, sizeof *nr * (size_t)nc);
      if (!nr) return fsl_errorf(FSL_ERR_NOMEM, "out of memory parsing rules");
      rs->rules = nr;
      rs->cap_rules = nc;
    }
    rs->rules[rs->n_rules++] = r;
  }
  free(p.t);
  return st != FSL_OK ? st : p.st;
}

void fsl_ruleset_free(fsl_ruleset *rs) {
  if (!rs) return;
  free(rs->rules);
  fsl_arena_free(&rs->arena);
  memset(rs, 0, sizeof *rs);
}

static fsl_ruleset g_builtin;
static fsl_status g_builtin_st;
static char g_builtin_err[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load_builtin(void) {
  g_builtin_st = fsl_ruleset_parse(&g_builtin, fsl_rules_core, "core.rules");
  if (g_builtin_st == FSL_OK) g_builtin_st = fsl_ruleset_parse(&g_builtin, fsl_rules_generated, "generated.rules");
  if (g_builtin_st != FSL_OK) snprintf(g_builtin_err, sizeof g_builtin_err, "%s", fsl_last_error());
}

const fsl_ruleset *fsl_ruleset_builtin(void) {
  pthread_once(&g_once, load_builtin);
  if (g_builtin_st != FSL_OK) {
    fsl_errorf(g_builtin_st, "the built-in rewrite rules do not parse: %s", g_builtin_err);
    return NULL;
  }
  return &g_builtin;
}
