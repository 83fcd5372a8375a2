/* A branch-free, vectorisable exp() for the kernel loops of streamk/_core.pyx.
 *
 * exp(x) = 2^k exp(r), k = round(x / ln 2), r = x - k ln 2 split Cody-Waite style into a
 * high part exact for |k| < 2^20 and a low correction; exp(r) for |r| <= ln(2)/2 is its
 * Taylor series to r^13 (truncation < 4e-18) by Horner's rule. 2^k is built from its
 * bits. The result is within about 1.5 ulp of the true value (tests/test_accel.py
 * checks 2 ulp against libm over the kernel's range); x < -708 gives 0 (the true value is
 * below 3.3e-308), x > 709 gives +inf, NaN stays NaN.
 *
 * Every loop of the core uses this one function, so a kernel value is the same whichever
 * path computed it. With GCC on x86-64 the passes are compiled twice (AVX2+FMA and the
 * baseline) and the loader picks one per machine.
 */
#ifndef STREAMK_FASTEXP_H
#define STREAMK_FASTEXP_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SK_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SK_CLONES
#endif

static inline double sk_exp(double x)
{
    const double log2e = 1.4426950408889634074;
    const double ln2hi = 6.93147180369123816490e-01; /* 32 significant bits: k*ln2hi is exact */
    const double ln2lo = 1.90821492927058770002e-10;
    const double shift = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    double xc = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
    double kf = xc * log2e + shift;
    double k = kf - shift;
    double r = (xc - k * ln2hi) - k * ln2lo;
    double p = 1.0 / 6227020800.0;           /* 1/13! */
    p = p * r + 1.0 / 479001600.0;           /* 1/12! */
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t bits;
    memcpy(&bits, &kf, sizeof bits);
    bits = (bits - (int64_t)0x4338000000000000LL + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    double res = p * scale;
    res = x < -708.0 ? 0.0 : res;
    res = x > 709.0 ? HUGE_VAL : res;
    return res;
}

/* a[i] = exp(factor * a[i]) for i < n. */
SK_CLONES static void sk_scaled_exp(double *a, Py_ssize_t n, double factor)
{
    for (Py_ssize_t i = 0; i < n; i++)
        a[i] = sk_exp(a[i] * factor);
}

/* out[i] = exp(-gamma * max(0, sq[i] + row_sq - 2 * dot[i])): RBF from the norm expansion,
 * in the operation order of streamk.tracking.rbf_rows. */
SK_CLONES static void sk_rbf_from_dots(double *out, const double *dot, const double *sq,
                                        double row_sq, Py_ssize_t n, double gamma)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = -2.0 * dot[i];
        d = d + sq[i];
        d = d + row_sq;
        d = d < 0.0 ? 0.0 : d;
        out[i] = sk_exp(d * -gamma);
    }
}

/* out[s] = X[s] . row for s < n (X row-major with leading dimension ldx), each dot summed
 * left to right; eight rows at a time so the additions of different rows overlap. Not
 * cloned: a dot has the same bits wherever its row sits and on every machine of a build. */
static void sk_dots(double *out, const double *X, Py_ssize_t ldx, Py_ssize_t n,
                    const double *row, Py_ssize_t w)
{
    Py_ssize_t s = 0, k, i;
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
}

#endif
