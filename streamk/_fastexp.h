/* A branch-free, vectorisable exp() for the kernel loops of streamk/_core.pyx.
 *
 * exp(x) = 2^k exp(r), k = round(x / ln 2), r = x - k ln 2 split Cody-Waite style into a
 * high part exact for |k| < 2^20 and a low correction; exp(r) for |r| <= ln(2)/2 is a
 * degree-11 polynomial by Horner's rule: the Chebyshev (near-minimax) fit of exp on that
 * range, relative error 1.7e-17 with its coefficients rounded to double (the Taylor series
 * needs degree 13 for the same). 2^k is built from its bits. The result is within about
 * 1 ulp of the true value (tests/test_accel.py checks 2 ulp against libm over the kernel's
 * range, densely near 0 and at the edges); x < -708 gives 0 (the true value is below
 * 3.3e-308), x > 709 gives +inf, NaN stays NaN.
 *
 * Every loop of the core uses this one function, so a kernel value is the same whichever
 * path computed it. With GCC on x86-64 the passes are compiled twice (AVX2+FMA and the
 * baseline) and the loader picks one per machine; the element-wise exp loops
 * (SK_EXP_CLONES) have an AVX-512 clone too, twice the lanes for the same operations per
 * element, so the same bits as the AVX2 clone. The sums under a kernel row (sk_dots,
 * sk_l1dists) are cloned for AVX2 without FMA instead: the same bits on every machine.
 */
#ifndef STREAMK_FASTEXP_H
#define STREAMK_FASTEXP_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SK_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define SK_EXP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SK_CLONES
#define SK_EXP_CLONES
#endif

/* exp(xc) for -708 <= xc <= 709 (or NaN): the reduction, polynomial and scaling that
 * sk_exp and sk_exp_nonpos share. */
static inline double sk_exp_core(double xc)
{
    const double log2e = 1.4426950408889634074;
    const double ln2hi = 6.93147180369123816490e-01; /* 32 significant bits: k*ln2hi is exact */
    const double ln2lo = 1.90821492927058770002e-10;
    const double shift = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    double kf = xc * log2e + shift;
    double k = kf - shift;
    double r = (xc - k * ln2hi) - k * ln2lo;
    double p = 2.5110037605963777e-08;
    p = p * r + 2.763263963904103e-07;
    p = p * r + 2.755724091857897e-06;
    p = p * r + 2.4801485482328494e-05;
    p = p * r + 1.9841269890047113e-04;
    p = p * r + 1.3888888952314775e-03;
    p = p * r + 8.333333333319601e-03;
    p = p * r + 4.16666666664881e-02;
    p = p * r + 1.666666666666668e-01;
    p = p * r + 5.000000000000019e-01;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t bits;
    memcpy(&bits, &kf, sizeof bits);
    bits = (bits - (int64_t)0x4338000000000000LL + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline double sk_exp(double x)
{
    double xc = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
    double res = sk_exp_core(xc);
    res = x < -708.0 ? 0.0 : res;
    res = x > 709.0 ? HUGE_VAL : res;
    return res;
}

/* sk_exp for x <= 0 (or NaN), as the RBF's exp(-gamma d) always is: the same operations
 * less the upper clamp and its select, so the same bits, and about half the time in the
 * AVX-512 loop. */
static inline double sk_exp_nonpos(double x)
{
    double res = sk_exp_core(x < -708.0 ? -708.0 : x);
    return x < -708.0 ? 0.0 : res;
}

/* a[i] = exp(factor * a[i]) for i < n. */
SK_EXP_CLONES static void sk_scaled_exp(double *a, Py_ssize_t n, double factor)
{
    for (Py_ssize_t i = 0; i < n; i++)
        a[i] = sk_exp(a[i] * factor);
}

/* out[i] = exp(-gamma * max(0, sq[i] + row_sq - 2 * dot[i])): RBF from the norm expansion,
 * in the operation order of streamk.tracking.rbf_rows. The argument is never positive for
 * gamma >= 0 (every RBF's): sk_exp_nonpos then, sk_exp otherwise. */
SK_EXP_CLONES static void sk_rbf_from_dots(double *out, const double *dot, const double *sq,
                                            double row_sq, Py_ssize_t n, double gamma)
{
    Py_ssize_t i;
    if (gamma >= 0.0) {
        for (i = 0; i < n; i++) {
            double d = -2.0 * dot[i];
            d = d + sq[i];
            d = d + row_sq;
            d = d < 0.0 ? 0.0 : d;
            out[i] = sk_exp_nonpos(d * -gamma);
        }
        return;
    }
    for (i = 0; i < n; i++) {
        double d = -2.0 * dot[i];
        d = d + sq[i];
        d = d + row_sq;
        d = d < 0.0 ? 0.0 : d;
        out[i] = sk_exp(d * -gamma);
    }
}

/* The dot-product clones: AVX2 without FMA, so that both clones do the same roundings (GCC
 * contracts a * b + c into an FMA only when the target has one) and a dot has the same bits
 * on every machine of a build. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SK_DOT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SK_DOT_CLONES
#endif

/* Four lanes of float64 (GCC's vector extension, which clang has too): one AVX instruction
 * per operation in the AVX2 clone, two SSE2 ones in the baseline; the same roundings. */
typedef double sk_v4d __attribute__((vector_size(32)));
typedef int64_t sk_v4l __attribute__((vector_size(32)));
#if defined(__clang__)
#define SK_SHUF4(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define SK_SHUF4(a, b, i, j, k, l) __builtin_shuffle(a, b, (sk_v4l){i, j, k, l})
#endif

/* The last, partial group of t < 4 features x[0 .. t - 1] of a row, padded with 0 (t is a
 * constant wherever it matters: the switch then folds away). */
static inline sk_v4d sk_tail4(const double *x, int t)
{
    switch (t) {
    case 1:
        return (sk_v4d){x[0], 0.0, 0.0, 0.0};
    case 2:
        return (sk_v4d){x[0], x[1], 0.0, 0.0};
    default:
        return (sk_v4d){x[0], x[1], x[2], 0.0};
    }
}

/* The lane sums of one row: lane j holds sum_{k = j mod 4} x[k] row[k], left to right. */
static inline sk_v4d sk_lanes1(const double *x, const double *row, Py_ssize_t w)
{
    sk_v4d a = {0.0, 0.0, 0.0, 0.0}, q, r;
    Py_ssize_t k = 0;
    for (; k + 4 <= w; k += 4) {
        memcpy(&q, x + k, sizeof q);
        memcpy(&r, row + k, sizeof r);
        a = a + q * r;
    }
    if (k < w)
        a = a + sk_tail4(x + k, (int)(w - k)) * sk_tail4(row + k, (int)(w - k));
    return a;
}

/* The lane sum (lane0 + lane1) + (lane2 + lane3) of sk_dots: one row's dot from its lanes. */
static inline __attribute__((always_inline)) double sk_hsum4(sk_v4d a)
{
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* The four rows' lane sums a0 .. a3 into out[0 .. 3]: each (lane0 + lane1) + (lane2 + lane3),
 * after a transpose (c_j holds lane j of the four rows). */
static inline __attribute__((always_inline)) void
sk_lane_sums4(double *out, sk_v4d a0, sk_v4d a1, sk_v4d a2, sk_v4d a3)
{
    sk_v4d t0 = SK_SHUF4(a0, a1, 0, 4, 2, 6);
    sk_v4d t1 = SK_SHUF4(a0, a1, 1, 5, 3, 7);
    sk_v4d t2 = SK_SHUF4(a2, a3, 0, 4, 2, 6);
    sk_v4d t3 = SK_SHUF4(a2, a3, 1, 5, 3, 7);
    sk_v4d c0 = SK_SHUF4(t0, t2, 0, 1, 4, 5);
    sk_v4d c1 = SK_SHUF4(t1, t3, 0, 1, 4, 5);
    sk_v4d c2 = SK_SHUF4(t0, t2, 2, 3, 6, 7);
    sk_v4d c3 = SK_SHUF4(t1, t3, 2, 3, 6, 7);
    sk_v4d d = (c0 + c1) + (c2 + c3);
    memcpy(out, &d, sizeof d);
}

/* F(..., t) with t = w mod 4 a constant in each of the four calls, so that each inlined copy
 * of F's loop folds its tail away (F: sk_dots4, sk_dots4x2, sk_dots2x4, sk_dots4x4). */
#define SK_BY_TAIL(w, F, ...)                                                               \
    (((w) & 3) == 0   ? F(__VA_ARGS__, 0)                                                   \
     : ((w) & 3) == 1 ? F(__VA_ARGS__, 1)                                                   \
     : ((w) & 3) == 2 ? F(__VA_ARGS__, 2)                                                   \
                      : F(__VA_ARGS__, 3))

/* sk_dots's rows four at a time, for w >= 4 with t = w mod 4 (inlined with t constant);
 * returns how many rows it did. */
static inline __attribute__((always_inline)) Py_ssize_t
sk_dots4(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n, const double *row,
         Py_ssize_t w, const int t)
{
    Py_ssize_t s = 0, k;
    for (; s + 4 <= n; s += 4) {
        const double *x = X + s * ldx;
        sk_v4d a0 = {0.0, 0.0, 0.0, 0.0}, a1 = a0, a2 = a0, a3 = a0, q, r;
        for (k = 0; k + 4 <= w; k += 4) {
            memcpy(&r, row + k, sizeof r);
            memcpy(&q, x + k, sizeof q);
            a0 = a0 + q * r;
            memcpy(&q, x + ldx + k, sizeof q);
            a1 = a1 + q * r;
            memcpy(&q, x + 2 * ldx + k, sizeof q);
            a2 = a2 + q * r;
            memcpy(&q, x + 3 * ldx + k, sizeof q);
            a3 = a3 + q * r;
        }
        if (t) {
            r = sk_tail4(row + k, t);
            a0 = a0 + sk_tail4(x + k, t) * r;
            a1 = a1 + sk_tail4(x + ldx + k, t) * r;
            a2 = a2 + sk_tail4(x + 2 * ldx + k, t) * r;
            a3 = a3 + sk_tail4(x + 3 * ldx + k, t) * r;
        }
        sk_lane_sums4(out + s, a0, a1, a2, a3);
    }
    return s;
}

/* sk_dots4 against two rows at once: each value of X loaded serves both (half the loads
 * per product, eight independent sums), each row's dots in sk_dots4's order. */
static inline __attribute__((always_inline)) Py_ssize_t
sk_dots4x2(double *out0, double *out1, const double *X, Py_ssize_t ldx, Py_ssize_t n,
           const double *row0, const double *row1, Py_ssize_t w, const int t)
{
    Py_ssize_t s = 0, k;
    for (; s + 4 <= n; s += 4) {
        const double *x = X + s * ldx;
        sk_v4d a[8], q, r0, r1;
        for (int i = 0; i < 8; i++)
            a[i] = (sk_v4d){0.0, 0.0, 0.0, 0.0};
        for (k = 0; k + 4 <= w; k += 4) {
            memcpy(&r0, row0 + k, sizeof r0);
            memcpy(&r1, row1 + k, sizeof r1);
            for (int i = 0; i < 4; i++) {
                memcpy(&q, x + i * ldx + k, sizeof q);
                a[i] = a[i] + q * r0;
                a[4 + i] = a[4 + i] + q * r1;
            }
        }
        if (t) {
            r0 = sk_tail4(row0 + k, t);
            r1 = sk_tail4(row1 + k, t);
            for (int i = 0; i < 4; i++) {
                q = sk_tail4(x + i * ldx + k, t);
                a[i] = a[i] + q * r0;
                a[4 + i] = a[4 + i] + q * r1;
            }
        }
        sk_lane_sums4(out0 + s, a[0], a[1], a[2], a[3]);
        sk_lane_sums4(out1 + s, a[4], a[5], a[6], a[7]);
    }
    return s;
}

/* out[s] = X[s] . row for s < n (X row-major with leading dimension ldx, row w wide).
 *
 * The summation order is fixed by the feature index alone: four lane sums, lane j over the
 * features k = j (mod 4) left to right, then (lane0 + lane1) + (lane2 + lane3). So a dot has
 * the same bits wherever its row sits (four rows at a time or alone), whichever operand is
 * the row (products commute), on every machine of a build (no FMA in either clone), and
 * with trailing zero features or without (a lane plus a +-0 product is the lane: the lanes
 * start at +0 and never become -0). For w <= 3 that order is the plain left-to-right sum,
 * which the loop over eight rows at a time computes faster. The four lanes use the SIMD
 * width along the features; the four rows at a time share each load of the row. */
SK_DOT_CLONES static void sk_dots(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                                  const double *row, Py_ssize_t w)
{
    Py_ssize_t s = 0, k, i;
    if (w <= 3) {
        for (; s + 8 <= n; s += 8) {
            const double *x = X + s * ldx;
            double a[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
            for (k = 0; k < w; k++) {
                double r = row[k];
                for (i = 0; i < 8; i++)
                    a[i] = a[i] + x[i * ldx + k] * r;
            }
            for (i = 0; i < 8; i++)
                out[s + i] = a[i];
        }
        for (; s < n; s++) {
            const double *x0 = X + s * ldx;
            double a0 = 0.0;
            for (k = 0; k < w; k++)
                a0 = a0 + x0[k] * row[k];
            out[s] = a0;
        }
        return;
    }
    s = SK_BY_TAIL(w, sk_dots4, out, X, ldx, n, row, w);
    for (; s < n; s++) {
        out[s] = sk_hsum4(sk_lanes1(X + s * ldx, row, w));
    }
}

/* sk_dots against two rows of the same width in one pass: out0[s] = X[s] . row0 and
 * out1[s] = X[s] . row1, each with the bits sk_dots gives it (its lane order), X read once
 * (the Forgetron's event row and the leaving vector's column: 7.4 -> 5.9 us for 1,000
 * rows of 50 features in the AVX2 clone, where the loads bound sk_dots). */
SK_DOT_CLONES static void sk_dots2(double *out0, double *out1, const double *X, Py_ssize_t ldx,
                                   Py_ssize_t n, const double *row0, const double *row1,
                                   Py_ssize_t w)
{
    Py_ssize_t s;
    if (w <= 3) { /* sk_dots's short rows: few loads to share */
        sk_dots(out0, X, ldx, n, row0, w);
        sk_dots(out1, X, ldx, n, row1, w);
        return;
    }
    s = SK_BY_TAIL(w, sk_dots4x2, out0, out1, X, ldx, n, row0, row1, w);
    for (; s < n; s++) {
        out0[s] = sk_hsum4(sk_lanes1(X + s * ldx, row0, w));
        out1[s] = sk_hsum4(sk_lanes1(X + s * ldx, row1, w));
    }
}

/* xr rows of X (2 or 4) against four rows R[g * ldr ..] at once, for w >= 4 with t = w mod 4
 * and xr inlined as constants: 4 * xr sums, each load of X serving four products and each
 * load of R xr; each dot in sk_dots4's lane order (xr = 4: four rows' lane sums at a time, as
 * sk_dots4 takes them). With xr = 4 its sixteen sums, four rows of X and a row of R need 21
 * vector registers: AVX-512's 32 hold them, AVX2's 16 do not (there it spills and runs at a
 * third of the speed of xr = 2). Returns how many rows of X it did. */
static inline __attribute__((always_inline)) Py_ssize_t
sk_dots_tile(double *out, Py_ssize_t ldo, const double *X, Py_ssize_t ldx, Py_ssize_t n,
             const double *R, Py_ssize_t ldr, Py_ssize_t w, const int t, const int xr)
{
    Py_ssize_t s = 0, k;
    for (; s + xr <= n; s += xr) {
        const double *x = X + s * ldx;
        sk_v4d a[16], q[4], r;
        for (int i = 0; i < 4 * xr; i++)
            a[i] = (sk_v4d){0.0, 0.0, 0.0, 0.0};
        for (k = 0; k + 4 <= w; k += 4) {
            for (int i = 0; i < xr; i++)
                memcpy(&q[i], x + i * ldx + k, sizeof r);
            for (int g = 0; g < 4; g++) {
                memcpy(&r, R + g * ldr + k, sizeof r);
                for (int i = 0; i < xr; i++)
                    a[xr * g + i] = a[xr * g + i] + q[i] * r;
            }
        }
        if (t) {
            for (int i = 0; i < xr; i++)
                q[i] = sk_tail4(x + i * ldx + k, t);
            for (int g = 0; g < 4; g++) {
                r = sk_tail4(R + g * ldr + k, t);
                for (int i = 0; i < xr; i++)
                    a[xr * g + i] = a[xr * g + i] + q[i] * r;
            }
        }
        for (int g = 0; g < 4; g++) {
            if (xr == 4)
                sk_lane_sums4(out + g * ldo + s, a[4 * g], a[4 * g + 1], a[4 * g + 2],
                              a[4 * g + 3]);
            else
                for (int i = 0; i < xr; i++)
                    out[g * ldo + s + i] = sk_hsum4(a[xr * g + i]);
        }
    }
    return s;
}

/* sk_dots_tile with two and four rows of X, for SK_BY_TAIL. */
#define sk_dots2x4(...) sk_dots_tile(__VA_ARGS__, 2)
#define sk_dots4x4(...) sk_dots_tile(__VA_ARGS__, 4)

/* The rows of X that sk_dots_tile left, against the four rows. */
static inline __attribute__((always_inline)) void
sk_rows4_rest(double *out, Py_ssize_t ldo, const double *X, Py_ssize_t ldx, Py_ssize_t s,
              Py_ssize_t n, const double *R, Py_ssize_t ldr, Py_ssize_t w)
{
    for (; s < n; s++) {
        for (int g = 0; g < 4; g++)
            out[g * ldo + s] = sk_hsum4(sk_lanes1(X + s * ldx, R + g * ldr, w));
    }
}

/* sk_dots_rows4 with two rows of X at a time (sk_dots2x4): the AVX2 clone and the baseline. */
SK_DOT_CLONES static void sk_dots_rows4_2x4(double *out, Py_ssize_t ldo, const double *X,
                                            Py_ssize_t ldx, Py_ssize_t n, const double *R,
                                            Py_ssize_t ldr, Py_ssize_t w)
{
    Py_ssize_t s = SK_BY_TAIL(w, sk_dots2x4, out, ldo, X, ldx, n, R, ldr, w);
    sk_rows4_rest(out, ldo, X, ldx, s, n, R, ldr, w);
}

/* The AVX-512 machines' tile: x86-64-v4 for its 32 registers, the same AVX2 operations on
 * four lanes (fp-contract off: no FMA), so the same bits as sk_dots_rows4_2x4. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SK_HAVE_WIDE_TILE 1
__attribute__((target("arch=x86-64-v4"), optimize("fp-contract=off"))) static void
sk_dots_rows4_4x4(double *out, Py_ssize_t ldo, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                  const double *R, Py_ssize_t ldr, Py_ssize_t w)
{
    Py_ssize_t s = SK_BY_TAIL(w, sk_dots4x4, out, ldo, X, ldx, n, R, ldr, w);
    sk_rows4_rest(out, ldo, X, ldx, s, n, R, ldr, w);
}
#endif

/* 1 where this machine runs x86-64-v4 code (its AVX-512 features, each asked for: older
 * compilers do not know the level's name); 0 where the wide tile is not compiled. */
static int sk_cpu_v4(void)
{
#ifdef SK_HAVE_WIDE_TILE
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
           && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
           && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx2")
           && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#else
    return 0;
#endif
}

/* Which tile sk_dots_rows4 takes: -1 not yet decided, 0 sk_dots2x4, 1 sk_dots4x4 (x86-64-v4
 * machines, decided at the first call; tests set it through sk_rows4_tile_set). */
static int sk_rows4_tile = -1;

/* 1 where sk_dots_rows4 takes the four-by-four tile on this machine. */
static int sk_rows4_wide(void)
{
    if (sk_rows4_tile < 0)
        sk_rows4_tile = sk_cpu_v4();
    return sk_rows4_tile;
}

/* Sets the tile (0 or 1; 1 only where the machine has it); returns the one in use before. */
static int sk_rows4_tile_set(int wide)
{
    int old = sk_rows4_wide();
    sk_rows4_tile = wide && sk_cpu_v4() ? 1 : 0;
    return old;
}

/* sk_dots for four rows of the same width w >= 4 (the look-ahead's: shorter rows share too
 * few loads and take sk_dots) in one pass over X: out[g * ldo + s] = X[s] . row g (row g at
 * R + g * ldr), each with the bits sk_dots gives it (whichever tile). Each load of X
 * serves four rows (rows of a block learned one after the other, against the set as it stood
 * before the first). 50 features, the minimum of 9 repeats of a C loop on an AVX-512 machine:
 * at 1,000 rows four sk_dots 15.4 us, sk_dots2x4's pass 13.3, sk_dots4x4's 10.3; at 2,874
 * rows 63, 39.4 and 33.8; at 500 rows 7.5, 6.6 and 5.1. */
static void sk_dots_rows4(double *out, Py_ssize_t ldo, const double *X, Py_ssize_t ldx,
                          Py_ssize_t n, const double *R, Py_ssize_t ldr, Py_ssize_t w)
{
#ifdef SK_HAVE_WIDE_TILE
    if (sk_rows4_wide()) {
        sk_dots_rows4_4x4(out, ldo, X, ldx, n, R, ldr, w);
        return;
    }
#endif
    sk_dots_rows4_2x4(out, ldo, X, ldx, n, R, ldr, w);
}

/* |v| on four lanes: the sign bits cleared (never -0). */
static inline sk_v4d sk_abs4(sk_v4d v)
{
    const sk_v4l m = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    return (sk_v4d)((sk_v4l)v & m);
}

/* out[s] = sum_k |X[s, k] - row[k]| over k < ldx, the row's absent features k >= w read as
 * 0 (the Laplacian kernel's distances), summed in the lane order of sk_dots: lane j over
 * the features k = j (mod 4) left to right, then (lane0 + lane1) + (lane2 + lane3). The
 * order depends on the feature index alone, so trailing zero features change nothing
 * (|0 - 0| = +0) and a distance has the same bits wherever its row sits. */
SK_DOT_CLONES static void sk_l1dists(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                                     const double *row, Py_ssize_t w)
{
    const Py_ssize_t w4 = w & ~(Py_ssize_t)3;
    sk_v4d zero = {0.0, 0.0, 0.0, 0.0}, r, q;
    sk_v4d rt = w4 < w ? sk_tail4(row + w4, (int)(w - w4)) : zero; /* last chunk, 0-padded */
    for (Py_ssize_t s = 0; s < n; s++) {
        const double *x = X + s * ldx;
        sk_v4d a = zero;
        Py_ssize_t k = 0;
        for (; k < w4; k += 4) {
            memcpy(&q, x + k, sizeof q);
            memcpy(&r, row + k, sizeof r);
            a = a + sk_abs4(q - r);
        }
        for (; k < ldx; k += 4) { /* the row's partial chunk (if any), then its absent zeros */
            if (k + 4 <= ldx)
                memcpy(&q, x + k, sizeof q);
            else
                q = sk_tail4(x + k, (int)(ldx - k));
            a = a + sk_abs4(k == w4 ? q - rt : q);
        }
        out[s] = sk_hsum4(a);
    }
}

/* sum_s k[s] c[s] over s < n in the order of the per-event path's one-column sum
 * (streamk/learners/_event.pyx, _combine): four lane sums, lane j over s = j (mod 4) up to
 * the last whole group of four, the rest added to lane 0 in order, then (lane0 + lane1) +
 * (lane2 + lane3). No FMA in either clone: the bits of the scalar loop it replaces. */
SK_DOT_CLONES static double sk_coef_dot(const double *k, const double *c, Py_ssize_t n)
{
    Py_ssize_t s = n & ~(Py_ssize_t)3;
    sk_v4d a = sk_lanes1(k, c, s); /* the whole groups of four: no tail */
    double a0 = a[0];
    for (; s < n; s++)
        a0 = a0 + k[s] * c[s];
    return (a0 + a[1]) + (a[2] + a[3]);
}

/* ---- float32, for decision hints only -------------------------------------------------------
 * The block pass of streamk/_core.pyx (perceptron_hint_pass) finds the rows of a micro-batch
 * that need attention from decision values computed in float32, with a proven error bound;
 * every decision it takes from them is one whose sign the bound makes certain, and every
 * other row is decided in float64 as learn_one decides it. */

/* exp(x) in float32 for x <= 88: Cody-Waite reduction (ln2hi has 16 significant bits, so
 * k*ln2hi is exact for the |k| <= 126 used here) and the Taylor series to r^7 (truncation
 * below 0.2 ulp). Within 4 ulp of the true value (tests/test_accel.py checks it); x < -87
 * gives 0, whose absolute error (< 1.7e-38) the hint bound absorbs. */
static inline float sk_expf(float x)
{
    const float log2e = 1.44269504088896341f;
    const float ln2hi = 0.693145751953125f;
    const float ln2lo = 1.428606765330187045e-06f;
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float kf = xc * log2e + shift;
    float k = kf - shift;
    float r = (xc - k * ln2hi) - k * ln2lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits;
    memcpy(&bits, &kf, sizeof bits);
    bits = (bits - (int32_t)0x4B400000 + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float res = p * scale;
    return x < -87.0f ? 0.0f : res;
}

/* a[i] = exp(a[i]) in float32 (the test hook for sk_expf). */
SK_CLONES static void sk_expf_array(float *a, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        a[i] = sk_expf(a[i]);
}

/* Sixteen lanes of float32 (and eight of float64) with GCC's vector extension (clang has it
 * too): one AVX-512 instruction per operation in the x86-64-v4 clone, two AVX2 ones in the
 * v3 clone, four SSE2 ones in the baseline, with the same roundings lane for lane. Every
 * helper taking or returning these vectors is always inlined: one left out of line would
 * be compiled for the baseline, whose way of passing 64-byte vectors the clones' do not
 * share (a crash, not a slowdown). */
typedef float sk_v16f __attribute__((vector_size(64)));
typedef int32_t sk_v16i __attribute__((vector_size(64)));
typedef float sk_v8f __attribute__((vector_size(32)));
typedef double sk_v8d __attribute__((vector_size(64)));

/* sk_expf on sixteen lanes of x <= 0, operation for operation, except that x < -87 gives
 * exp(-87) (< 1.7e-38) instead of 0: the same absolute error bound, two operations fewer.
 * C has no ?: on vectors: a mask does the clamp. */
static inline __attribute__((always_inline)) sk_v16f sk_expf16(sk_v16f x)
{
    const sk_v16f lo = (sk_v16f){0.0f} - 87.0f;
    sk_v16i under = x < lo;
    sk_v16f xc = (sk_v16f)((under & (sk_v16i)lo) | (~under & (sk_v16i)x));
    sk_v16f kf = xc * 1.44269504088896341f + 12582912.0f;
    sk_v16f k = kf - 12582912.0f;
    sk_v16f r = (xc - k * 0.693145751953125f) - k * 1.428606765330187045e-06f;
    sk_v16f p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    sk_v16i bits = ((sk_v16i)kf - (int32_t)0x4B400000 + 127) << 23;
    return p * (sk_v16f)bits;
}

/* k(v_t, row r + j) for nv vectors v_t and the 16 g rows r .. r + 16 g - 1 of a block
 * (nv in {1, 2, 4}, g in {1, 2, 4}, nv g <= 8, constants after inlining, so the nv g
 * accumulators stay in registers): the dots from the transposed rows Qt (w x ldq), then the norm expansion and
 * the float32 exp. Each feature's g loads of the rows serve every vector and each broadcast
 * feature of a vector every group of rows; and with nv g = 8 independent sums a
 * multiply-add's latency (4 cycles, two issued per cycle) no longer bounds the dots, as it
 * did with one vector and 2 x 16 rows. out[t * g + i]: vector t, rows r + 16 i ..
 * r + 16 i + 15.
 *
 * The compiler may fuse a multiply and an add (FMA) here: a fused step rounds once where
 * the pair rounds twice, so every error bound of the hints (perceptron_hint_pass in
 * streamk/_core.pyx: gamma (w + 8) u (||q||^2 + ||s||^2) on the exponent, a 4-ulp exp)
 * holds for both; the per-lane arithmetic is that of sk_expf otherwise. */
static inline __attribute__((always_inline)) void
sk_rbf_tile(sk_v16f *out, const int nv, const int g, const float *Qt, Py_ssize_t ldq,
            Py_ssize_t w, Py_ssize_t r, const float *const *v, const float *v_sq,
            const float *q_sq, float gamma)
{
    sk_v16f acc[8], q[4], qs;
    for (int a = 0; a < nv * g; a++)
        acc[a] = (sk_v16f){0.0f};
    for (Py_ssize_t k = 0; k < w; k++) {
        const float *row = Qt + k * ldq + r;
        for (int i = 0; i < g; i++)
            memcpy(&q[i], row + 16 * i, sizeof q[i]);
        for (int t = 0; t < nv; t++) {
            float vk = v[t][k];
            for (int i = 0; i < g; i++)
                acc[t * g + i] = acc[t * g + i] + q[i] * vk;
        }
    }
    for (int i = 0; i < g; i++) {
        memcpy(&qs, q_sq + r + 16 * i, sizeof qs);
        for (int t = 0; t < nv; t++) {
            sk_v16f d = (qs + v_sq[t]) - 2.0f * acc[t * g + i];
            d = (sk_v16f)(~(d < 0.0f) & (sk_v16i)d);
            out[t * g + i] = sk_expf16(d * -gamma);
        }
    }
}

/* kv with the lanes of the rows outside r0 .. r1 - 1 set to +0 (lane j: row r + j), so
 * adding c kv leaves those rows' hints as they were (x + 0 = x), whatever the padding
 * rows of Qt hold. */
static inline __attribute__((always_inline)) sk_v16f
sk_rows_only(sk_v16f kv, Py_ssize_t r, Py_ssize_t r0, Py_ssize_t r1)
{
    const sk_v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    sk_v16i j = lane + (int32_t)(r - r0); /* the row's offset from r0 */
    sk_v16i keep = (j >= 0) & (j < (int32_t)(r1 - r0));
    return (sk_v16f)(keep & (sk_v16i)kv);
}

/* h[0], h[1] (rows 0 .. 7, 8 .. 15) += c * kv, in float64 (kv converted exactly). */
static inline __attribute__((always_inline)) void sk_acc16(sk_v8d h[2], double c, sk_v16f kv)
{
    sk_v8f half;
    memcpy(&half, &kv, sizeof half);
    h[0] = h[0] + c * __builtin_convertvector(half, sk_v8d);
    memcpy(&half, (const char *)&kv + sizeof half, sizeof half);
    h[1] = h[1] + c * __builtin_convertvector(half, sk_v8d);
}

/* f[0 .. 15] += c * kv, in float64. */
static inline __attribute__((always_inline)) void sk_add16(double *f, double c, sk_v16f kv)
{
    sk_v8d h[2];
    memcpy(h, f, sizeof h);
    sk_acc16(h, c, kv);
    memcpy(f, h, sizeof h);
}

/* The hints of the 16 g rows from r (those below m count: the others' lanes are zeroed)
 * against the n vectors of V: sk_hint_block's body for one tile of rows. With one output
 * the vectors go four at a time (see sk_rbf_tile; a zero coefficient skipped, the last
 * one to three one at a time) and the sums stay in registers until the tile's end. With
 * weigh (a constant), the rows' error sums err[r] += max_c |W[s * p + c]| k too. */
static inline __attribute__((always_inline)) void
sk_hint_rows(double *H, double *err, Py_ssize_t ldh, Py_ssize_t p, const double *W, Py_ssize_t n,
             const float *V, Py_ssize_t ldv, const float *v_sq, const float *Qt,
             Py_ssize_t ldq, Py_ssize_t w, Py_ssize_t r, const int g, Py_ssize_t m,
             const float *q_sq, float gamma, const int weigh)
{
    sk_v16f kv[8];
    const float *v[4];
    float vs[4];
    int part = r + 16 * g > m;
    if (p == 1) {
        sk_v8d h[4] = {{0.0}, {0.0}, {0.0}, {0.0}}, ea[4] = {{0.0}, {0.0}, {0.0}, {0.0}};
        Py_ssize_t idx[4];
        int cnt = 0;
        for (Py_ssize_t s = 0; s <= n; s++) {
            if (s < n) { /* gather four vectors with a nonzero coefficient */
                if (W[s] == 0.0)
                    continue;
                idx[cnt] = s;
                v[cnt] = V + s * ldv;
                vs[cnt++] = v_sq[s];
                if (cnt < 4)
                    continue;
                sk_rbf_tile(kv, 4, g, Qt, ldq, w, r, v, vs, q_sq, gamma);
            } else if (cnt) { /* the last one to three: one at a time */
                for (int t = 0; t < cnt; t++)
                    sk_rbf_tile(kv + t * g, 1, g, Qt, ldq, w, r, v + t, vs + t, q_sq, gamma);
            }
            for (int t = 0; t < cnt; t++)
                for (int i = 0; i < g; i++) {
                    sk_v16f k = part ? sk_rows_only(kv[t * g + i], r + 16 * i, 0, m)
                                     : kv[t * g + i];
                    sk_acc16(h + 2 * i, W[idx[t]], k);
                    if (weigh)
                        sk_acc16(ea + 2 * i, fabs(W[idx[t]]), k);
                }
            cnt = 0;
        }
        for (int i = 0; i < 2 * g; i++) { /* H has room for whole groups: lanes past m add 0 */
            sk_v8d old;
            memcpy(&old, H + r + 8 * i, sizeof old);
            old = old + h[i];
            memcpy(H + r + 8 * i, &old, sizeof old);
            if (!weigh)
                continue;
            memcpy(&old, err + r + 8 * i, sizeof old);
            old = old + ea[i];
            memcpy(err + r + 8 * i, &old, sizeof old);
        }
        return;
    }
    sk_v8d ea[4] = {{0.0}, {0.0}, {0.0}, {0.0}}; /* the tile's error sums */
    for (Py_ssize_t s = 0; s < n; s++) {
        v[0] = V + s * ldv;
        vs[0] = v_sq[s];
        sk_rbf_tile(kv, 1, g, Qt, ldq, w, r, v, vs, q_sq, gamma);
        for (int i = 0; i < g && part; i++)
            kv[i] = sk_rows_only(kv[i], r + 16 * i, 0, m);
        double a = 0.0;
        for (Py_ssize_t c = 0; c < p; c++) {
            a = fmax(a, fabs(W[s * p + c]));
            if (W[s * p + c] != 0.0)
                for (int i = 0; i < g; i++)
                    sk_add16(H + c * ldh + r + 16 * i, W[s * p + c], kv[i]);
        }
        for (int i = 0; i < g && weigh; i++)
            sk_acc16(ea + 2 * i, a, kv[i]);
    }
    for (int i = 0; i < 2 * g && weigh; i++) {
        sk_v8d old;
        memcpy(&old, err + r + 8 * i, sizeof old);
        old = old + ea[i];
        memcpy(err + r + 8 * i, &old, sizeof old);
    }
}

/* H[c * ldh + r] += sum_s W[s * p + c] k(V[s], row r) for r < m, c < p, s < n: the decision
 * hints of a block against n vectors (rows of V, leading dimension ldv, squared norms v_sq),
 * with k the RBF kernel evaluated in float32 from the norm expansion. Qt holds the block's
 * rows transposed (w x ldq), q_sq their squared norms; rows and vectors are centred on one
 * point (distances do not change, rounding shrinks). Rows go 32 at a time (16 lanes, two
 * groups): their features stay in the first-level cache while every vector passes, and
 * their sums stay in registers. The sums are in float64. The last group of 16 may be
 * partial: Qt, q_sq and every H row need room for whole groups (ldq, ldh >= m rounded up
 * to 16); those lanes are computed, then zeroed, so H past m is left as it was.
 * err (NULL: not kept): err[r] += sum_s max_c |W[s * p + c]| k(V[s], row r), the sums the
 * bound weighted by the kernel values takes (perceptron_hint_pass in streamk/_core.pyx). */
SK_EXP_CLONES static void sk_hint_block(double *H, double *err, Py_ssize_t ldh, Py_ssize_t p,
                                        const double *W,
                                        Py_ssize_t n, const float *V, Py_ssize_t ldv,
                                        const float *v_sq, const float *Qt, Py_ssize_t ldq,
                                        Py_ssize_t w, Py_ssize_t m, const float *q_sq,
                                        float gamma)
{
    for (Py_ssize_t r = 0; r < m; r += 32) { /* (g, weigh) constants in each call */
        if (r + 16 < m && err)
            sk_hint_rows(H, err, ldh, p, W, n, V, ldv, v_sq, Qt, ldq, w, r, 2, m, q_sq, gamma, 1);
        else if (r + 16 < m)
            sk_hint_rows(H, err, ldh, p, W, n, V, ldv, v_sq, Qt, ldq, w, r, 2, m, q_sq, gamma, 0);
        else if (err)
            sk_hint_rows(H, err, ldh, p, W, n, V, ldv, v_sq, Qt, ldq, w, r, 1, m, q_sq, gamma, 1);
        else
            sk_hint_rows(H, err, ldh, p, W, n, V, ldv, v_sq, Qt, ldq, w, r, 1, m, q_sq, gamma, 0);
    }
}

/* H[c * ldh + r] += sum_t wts[t * p + c] k(v_t, row r) for r0 <= r < r1 and the nv vectors
 * v_t (nv <= 2): columns of the hints (a vector joining or leaving the set), as in
 * sk_hint_block, the rows in whole groups of 16 from r0 rounded down (room as there), 64
 * at a time while they last (nv g >= 4 independent sums); the lanes outside r0 .. r1 - 1
 * are zeroed, so only those rows change. err (NULL: not kept) as in sk_hint_block, a
 * vector taken out (negative weights) adding to it like one coming in. */
static inline __attribute__((always_inline)) void
sk_hint_cols(double *H, double *err, Py_ssize_t ldh, Py_ssize_t p, const double *wts, const int nv,
             const float *Qt, Py_ssize_t ldq, Py_ssize_t w, Py_ssize_t r0, Py_ssize_t r1,
             const float *const *v, const float *v_sq, const float *q_sq, float gamma)
{
    int g = 1;
    sk_v16f kv[8];
    double amax[2] = {0.0, 0.0}; /* each vector's largest |weight|: its error sum's */
    for (int t = 0; t < nv; t++)
        for (Py_ssize_t c = 0; c < p; c++)
            amax[t] = fmax(amax[t], fabs(wts[t * p + c]));
    for (Py_ssize_t r = r0 & ~(Py_ssize_t)15; r < r1; r += 16 * g) {
        g = r + 48 < r1 ? 4 : (r + 16 < r1 ? 2 : 1);
        if (g == 4)
            sk_rbf_tile(kv, nv, 4, Qt, ldq, w, r, v, v_sq, q_sq, gamma);
        else if (g == 2)
            sk_rbf_tile(kv, nv, 2, Qt, ldq, w, r, v, v_sq, q_sq, gamma);
        else
            sk_rbf_tile(kv, nv, 1, Qt, ldq, w, r, v, v_sq, q_sq, gamma);
        if (r < r0 || r + 16 * g > r1)
            for (int a = 0; a < nv * g; a++)
                kv[a] = sk_rows_only(kv[a], r + 16 * (a % g), r0, r1);
        for (int i = 0; i < g; i++) { /* a zero weight adds +0: no test, one code path */
            sk_v8d h[2];
            for (Py_ssize_t c = 0; c < p; c++) {
                memcpy(h, H + c * ldh + r + 16 * i, sizeof h);
                for (int t = 0; t < nv; t++)
                    sk_acc16(h, wts[t * p + c], kv[t * g + i]);
                memcpy(H + c * ldh + r + 16 * i, h, sizeof h);
            }
            if (!err)
                continue;
            memcpy(h, err + r + 16 * i, sizeof h); /* a vector taken out counts too */
            for (int t = 0; t < nv; t++)
                sk_acc16(h, amax[t], kv[t * g + i]);
            memcpy(err + r + 16 * i, h, sizeof h);
        }
    }
}

/* One vector's column of the hints, H[c * ldh + r] += wts[c] k(v, row r) for r0 <= r < r1
 * (see sk_hint_cols). */
SK_EXP_CLONES static void sk_hint_column(double *H, double *err, Py_ssize_t ldh, Py_ssize_t p,
                                         const double *wts,
                                         const float *Qt, Py_ssize_t ldq, Py_ssize_t w,
                                         Py_ssize_t r0, Py_ssize_t r1, const float *v, float v_sq,
                                         const float *q_sq, float gamma)
{
    const float *vv[1] = {v};
    sk_hint_cols(H, err, ldh, p, wts, 1, Qt, ldq, w, r0, r1, vv, &v_sq, q_sq, gamma);
}

/* Two vectors' columns in one pass over the rows (a vector leaving a full set and the one
 * taking its place): wts holds p weights for v0, then p for v1 (see sk_hint_cols). */
SK_EXP_CLONES static void sk_hint_column2(double *H, double *err, Py_ssize_t ldh, Py_ssize_t p,
                                          const double *wts, const float *Qt, Py_ssize_t ldq,
                                          Py_ssize_t w, Py_ssize_t r0, Py_ssize_t r1,
                                          const float *v0, float v0_sq, const float *v1,
                                          float v1_sq, const float *q_sq, float gamma)
{
    const float *vv[2] = {v0, v1};
    const float vs[2] = {v0_sq, v1_sq};
    sk_hint_cols(H, err, ldh, p, wts, 2, Qt, ldq, w, r0, r1, vv, vs, q_sq, gamma);
}

#endif
