/* Float32 decision hints for one event (streamk/learners/_event.pyx, EventPass._hint).
 *
 * The per-event path keeps a float32 mirror of the support rows, transposed (feature k of
 * vector s at S[k * ld + s]) and centred on one point, so that sk_hint_column (_fastexp.h)
 * gives the event's float32 kernel row against all of them in one pass, sixteen vectors per
 * lane group. The helpers below are the two steps around it: the centring of a row into
 * the mirror's float32 form, and the float64 sums that turn the float32 kernel row into the
 * hint f~ and the inputs of its error bound (the weighted bound of perceptron_hint_pass in
 * streamk/_core.pyx). They decide nothing: a hint is only ever trusted where that bound
 * makes the float64 decision certain. */
#ifndef STREAMK_HINTROW_H
#define STREAMK_HINTROW_H

#include "_fastexp.h"

/* out[k * step] = x[k] - center[k] rounded to float32 for k < w; returns the squared norm
 * of the differences in float64 (the bound takes it to 1%, so any summation order does:
 * four partial sums keep the additions independent). The block pass (streamk/_core.pyx:
 * its rows and its mirror) and the per-event hints centre with this one function. */
static inline double sk_centre32(float *out, const double *x, const double *center,
                                 Py_ssize_t w, Py_ssize_t step)
{
    double a[4] = {0.0, 0.0, 0.0, 0.0};
    for (Py_ssize_t k = 0; k < w; k++) {
        double dk = x[k] - center[k];
        out[k * step] = (float)dk;
        a[k & 3] += dk * dk;
    }
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* One output: f = sum_s c[s] k[s], A = sum_s |c[s]| k[s], L = sum_s |c[s]| over s < n, in
 * float64, eight vectors at a time in two sets of four-lane sums (the additions of a long
 * set would wait on each other: a chain of n / 4 dependent adds each). The bound's 1e-9
 * (1 + L) term covers any grouping of the sums; k >= 0, the float32 kernel values. */
SK_CLONES static void sk_hint_sums1(const double *k, const double *c, Py_ssize_t n, double *f,
                                    double *A, double *L)
{
    sk_v4d vf = {0.0, 0.0, 0.0, 0.0}, va = vf, vl = vf, wf = vf, wa = vf, wl = vf, kv, cv, av;
    Py_ssize_t s = 0;
    for (; s + 8 <= n; s += 8) {
        memcpy(&kv, k + s, sizeof kv);
        memcpy(&cv, c + s, sizeof cv);
        av = sk_abs4(cv);
        vf = vf + cv * kv;
        va = va + av * kv;
        vl = vl + av;
        memcpy(&kv, k + s + 4, sizeof kv);
        memcpy(&cv, c + s + 4, sizeof cv);
        av = sk_abs4(cv);
        wf = wf + cv * kv;
        wa = wa + av * kv;
        wl = wl + av;
    }
    vf = vf + wf;
    va = va + wa;
    vl = vl + wl;
    double f0 = sk_hsum4(vf), a0 = sk_hsum4(va), l0 = sk_hsum4(vl);
    for (; s < n; s++) {
        f0 += c[s] * k[s];
        a0 += fabs(c[s]) * k[s];
        l0 += fabs(c[s]);
    }
    *f = f0;
    *A = a0;
    *L = l0;
}

/* p outputs (coefficients row-major, p columns): f[j] = sum_s c[s, j] k[s]; A = sum_s
 * max_j |c[s, j]| k[s]; L = the largest column sum of |c[s, j]| (colsum: p doubles of
 * scratch). */
static void sk_hint_sums(const double *k, const double *c, Py_ssize_t n, Py_ssize_t p,
                         double *f, double *A, double *L, double *colsum)
{
    double a0 = 0.0, l0 = 0.0;
    for (Py_ssize_t j = 0; j < p; j++) {
        f[j] = 0.0;
        colsum[j] = 0.0;
    }
    for (Py_ssize_t s = 0; s < n; s++) {
        double cmax = 0.0;
        for (Py_ssize_t j = 0; j < p; j++) {
            double cj = c[s * p + j];
            f[j] += cj * k[s];
            colsum[j] += fabs(cj);
            cmax = fmax(cmax, fabs(cj));
        }
        a0 += cmax * k[s];
    }
    for (Py_ssize_t j = 0; j < p; j++)
        l0 = fmax(l0, colsum[j]);
    *A = a0;
    *L = l0;
}

#endif
