/* versions.c — oneDNN 2.x / 3.x convolution and matmul micro-benchmark (f32,
 * forward inference, 1 image), to decide which oneDNN fissile builds on
 * (issue 9; bench/results/onednn-versions.md).  One source for both C APIs
 * (3.x creates primitive descriptors directly).  Built and run by
 * versions.sh.  Output lines: RES|case|layout|what|impl|tag|median_us|min_us
 * (layout a: oneDNN chooses; b: plain nchw; c: nhwc). */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHK(f) do { dnnl_status_t s_ = (f); if (s_ != dnnl_success) { \
    fprintf(stderr, "%s:%d: %s -> status %d\n", __FILE__, __LINE__, #f, (int)s_); exit(1); } } while (0)

#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t cmd_t;
static cmd_t mk_md(int nd, const dnnl_dim_t *dims, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md; dnnl_dims_t d; memcpy(d, dims, nd * sizeof(dnnl_dim_t));
    CHK(dnnl_memory_desc_create_with_tag(&md, nd, d, dnnl_f32, tag)); return md;
}
#define MDP(x) (x)
#else
typedef const dnnl_memory_desc_t *cmd_t;
static cmd_t mk_md(int nd, const dnnl_dim_t *dims, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t *md = calloc(1, sizeof(*md)); dnnl_dims_t d; memcpy(d, dims, nd * sizeof(dnnl_dim_t));
    CHK(dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, tag)); return md;
}
#endif

static dnnl_engine_t eng; static dnnl_stream_t strm;
static int NWARM = 20, NITER = 200;

static double now_us(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

static dnnl_memory_t mk_mem(cmd_t md) {
    dnnl_memory_t m; CHK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    void *p; CHK(dnnl_memory_get_data_handle(m, &p));
    size_t n = dnnl_memory_desc_get_size(md) / sizeof(float); float *f = p;
    for (size_t i = 0; i < n; i++) f[i] = 0.01f * (float)((i * 7) % 101) - 0.5f;
    return m;
}

static void timeit(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args, double *med, double *mn) {
    static double t[10000];
    for (int i = 0; i < NWARM; i++) { CHK(dnnl_primitive_execute(p, strm, nargs, args)); CHK(dnnl_stream_wait(strm)); }
    for (int i = 0; i < NITER; i++) {
        double t0 = now_us();
        CHK(dnnl_primitive_execute(p, strm, nargs, args)); CHK(dnnl_stream_wait(strm));
        t[i] = now_us() - t0;
    }
    qsort(t, NITER, sizeof(double), cmpd);
    *med = (NITER % 2) ? t[NITER / 2] : 0.5 * (t[NITER / 2 - 1] + t[NITER / 2]); *mn = t[0];
}

static const char *impl(dnnl_primitive_desc_t pd) {
    const char *s = NULL; CHK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s)); return s;
}

/* name the activation layout chosen by oneDNN */
static const char *tagname(cmd_t md, int nd, const dnnl_dim_t *dims) {
    static const struct { dnnl_format_tag_t t; const char *n; } c[] = {
        {dnnl_nchw, "nchw"}, {dnnl_nhwc, "nhwc"}, {dnnl_nChw16c, "nChw16c"}, {dnnl_nChw8c, "nChw8c"},
        {dnnl_nChw4c, "nChw4c"}, {dnnl_ab, "ab"}};
    for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        if (nd == 2 && c[i].t != dnnl_ab) continue;
        if (nd == 4 && c[i].t == dnnl_ab) continue;
        cmd_t x = mk_md(nd, dims, c[i].t);
        if (dnnl_memory_desc_equal(md, x)) return c[i].n;
    }
    return "other";
}

static void time_reorder(const char *cname, const char *what, cmd_t from, cmd_t to) {
    dnnl_primitive_desc_t pd; dnnl_primitive_t p;
    CHK(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
    CHK(dnnl_primitive_create(&p, pd));
    dnnl_memory_t a = mk_mem(from), b = mk_mem(to);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    double med, mn; timeit(p, 2, args, &med, &mn);
    printf("RES|%s|a|%s|%s|-|%.2f|%.2f\n", cname, what, impl(pd), med, mn);
    dnnl_primitive_destroy(p); dnnl_primitive_desc_destroy(pd); dnnl_memory_destroy(a); dnnl_memory_destroy(b);
}

static void conv(const char *cname, char lay, int C, int OC, int G, int H, int K, int S, int P) {
    int OH = (H + 2 * P - K) / S + 1;
    dnnl_dim_t sd[4] = {1, C, H, H}, dd[4] = {1, OC, OH, OH};
    dnnl_dim_t wd[5] = {G, OC / G, C / G, K, K};
    dnnl_format_tag_t at = lay == 'a' ? dnnl_format_tag_any : lay == 'b' ? dnnl_nchw : dnnl_nhwc;
    cmd_t smd = mk_md(4, sd, at), dmd = mk_md(4, dd, at);
    cmd_t wmd = G > 1 ? mk_md(5, wd, dnnl_format_tag_any) : mk_md(4, wd + 1, dnnl_format_tag_any);
    dnnl_dims_t st = {S, S}, pl = {P, P}, pr = {P, P};
    dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
    dnnl_dims_t dil = {0, 0};
    CHK(dnnl_convolution_forward_primitive_desc_create(&pd, eng, dnnl_forward_inference, dnnl_convolution_direct,
        smd, wmd, NULL, dmd, st, dil, pl, pr, NULL));
#else
    dnnl_convolution_desc_t cd;
    CHK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
        smd, wmd, NULL, dmd, st, pl, pr));
    CHK(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL));
#endif
    dnnl_primitive_t p; CHK(dnnl_primitive_create(&p, pd));
    cmd_t s2 = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    cmd_t w2 = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    cmd_t d2 = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t ms = mk_mem(s2), mw = mk_mem(w2), md = mk_mem(d2);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
    double med, mn; timeit(p, 3, args, &med, &mn);
    char tg[64]; snprintf(tg, sizeof tg, "%s/%s", tagname(s2, 4, sd), tagname(d2, 4, dd));
    char lays[2] = {lay, 0};
    printf("RES|%s|%s|exec|%s|%s|%.2f|%.2f\n", cname, lays, impl(pd), tg, med, mn);
    fflush(stdout);
    if (lay == 'a') {
        time_reorder(cname, "reorder_src_nchw2chosen", mk_md(4, sd, dnnl_nchw), s2);
        time_reorder(cname, "reorder_dst_chosen2nchw", d2, mk_md(4, dd, dnnl_nchw));
    }
    dnnl_primitive_destroy(p); dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(ms); dnnl_memory_destroy(mw); dnnl_memory_destroy(md);
}

static void matmul(const char *cname, int M, int Kd, int N) {
    dnnl_dim_t ad[2] = {M, Kd}, bd[2] = {Kd, N}, cd_[2] = {M, N};
    cmd_t a = mk_md(2, ad, dnnl_ab), b = mk_md(2, bd, dnnl_ab), c = mk_md(2, cd_, dnnl_ab);
    dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
    CHK(dnnl_matmul_primitive_desc_create(&pd, eng, a, b, NULL, c, NULL));
#else
    dnnl_matmul_desc_t mdsc;
    CHK(dnnl_matmul_desc_init(&mdsc, a, b, NULL, c));
    CHK(dnnl_primitive_desc_create(&pd, &mdsc, NULL, eng, NULL));
#endif
    dnnl_primitive_t p; CHK(dnnl_primitive_create(&p, pd));
    dnnl_memory_t ma = mk_mem(a), mb = mk_mem(b), mc = mk_mem(c);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    double med, mn; timeit(p, 3, args, &med, &mn);
    printf("RES|%s|plain|exec|%s|ab|%.2f|%.2f\n", cname, impl(pd), med, mn);
    fflush(stdout);
    dnnl_primitive_destroy(p); dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(ma); dnnl_memory_destroy(mb); dnnl_memory_destroy(mc);
}

int main(void) {
    const dnnl_version_t *v = dnnl_version();
    printf("VERSION %d.%d.%d %s\n", v->major, v->minor, v->patch, v->hash);
    CHK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    const char *L3 = "abc";
    /* name, C, OC, G, H, K, S, P */
    for (int i = 0; i < 3; i++) conv("dw3x3_c64_56", L3[i], 64, 64, 64, 56, 3, 1, 1);
    conv("dw3x3_c128_28", 'a', 128, 128, 128, 28, 3, 1, 1);
    conv("dw3x3_c128_28", 'c', 128, 128, 128, 28, 3, 1, 1);
    conv("dw5x5_c96_14_s2", 'a', 96, 96, 96, 14, 5, 2, 2);
    conv("dw5x5_c96_14_s2", 'c', 96, 96, 96, 14, 5, 2, 2);
    for (int i = 0; i < 3; i++) conv("conv3x3_64to64_56", L3[i], 64, 64, 1, 56, 3, 1, 1);
    conv("conv3x3_256to256_14", 'a', 256, 256, 1, 14, 3, 1, 1);
    for (int i = 0; i < 3; i += 2) conv("conv3x3_512to512_7", L3[i], 512, 512, 1, 7, 3, 1, 1);
    conv("conv7x7_3to64_224_s2", 'a', 3, 64, 1, 224, 7, 2, 3);
    for (int i = 0; i < 3; i++) conv("conv1x1_16to64_56", L3[i], 16, 64, 1, 56, 1, 1, 0);
    for (int i = 0; i < 3; i++) conv("conv1x1_96to576_7", L3[i], 96, 576, 1, 7, 1, 1, 0);
    matmul("matmul_128x768x768", 128, 768, 768);
    matmul("matmul_128x768x3072", 128, 768, 3072);
    dnnl_stream_destroy(strm); dnnl_engine_destroy(eng);
    return 0;
}
