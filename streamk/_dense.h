/* The Projectron's O(n^2) and O(n^3) loops on P = K(S, S)^-1, for streamk/budget/_projectron.pxi
 * (included by streamk/budget/_policies.pyx and streamk/learners/_event.pyx: one definition, so
 * the two modules agree to the bit) and _policies.inverse_by_cholesky.
 *
 * Every function is cloned like sk_dots in _fastexp.h: AVX2 *without* FMA and the baseline,
 * so both clones do the same roundings and P has the same bits on every machine of a build.
 * Sums follow sk_dots's lane order (lane j over the indices k = j mod 4, left to right, then
 * (lane0 + lane1) + (lane2 + lane3)); the rank-one updates do y + a x element by element,
 * in the order of the NumPy reference's steps (streamk/budget/projectron.py).
 */
#ifndef STREAMK_DENSE_H
#define STREAMK_DENSE_H

#include "_fastexp.h"

/* x . y in sk_dots's lane order (the same bits as a row of sk_dots). */
static inline __attribute__((always_inline)) double sk_dot_lanes(const double *x, const double *y, Py_ssize_t n)
{
    sk_v4d a = sk_lanes1(x, y, n);
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* y[b] = y[b] + alpha x[b] for b < n, four lanes at a time. */
static inline __attribute__((always_inline)) void sk_axpy4(double *y, double alpha, const double *x, Py_ssize_t n)
{
    Py_ssize_t b = 0;
    sk_v4d q, r;
    for (; b + 4 <= n; b += 4) {
        memcpy(&q, y + b, sizeof q);
        memcpy(&r, x + b, sizeof r);
        q = q + alpha * r;
        memcpy(y + b, &q, sizeof q);
    }
    for (; b < n; b++)
        y[b] = y[b] + alpha * x[b];
}

/* y[b] = (y[b] + alpha x[b]) + beta z[b] for b < n: a downdate and a growth in one pass. */
static inline __attribute__((always_inline)) void sk_axpy2(double *y, double alpha, const double *x, double beta,
                            const double *z, Py_ssize_t n)
{
    Py_ssize_t b = 0;
    sk_v4d q, r, s;
    for (; b + 4 <= n; b += 4) {
        memcpy(&q, y + b, sizeof q);
        memcpy(&r, x + b, sizeof r);
        memcpy(&s, z + b, sizeof s);
        q = (q + alpha * r) + beta * s;
        memcpy(y + b, &q, sizeof q);
    }
    for (; b < n; b++)
        y[b] = (y[b] + alpha * x[b]) + beta * z[b];
}

/* The lane sum (lane0 + lane1) + (lane2 + lane3) of sk_dots. */
static inline __attribute__((always_inline)) double sk_hsum4(sk_v4d a)
{
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* out[s] = P[s] . k for s < n (rows of P w wide, leading dimension ldp) in sk_dots's lane
 * order, eight rows at a time: eight independent sums hide the latency of the additions
 * (four, as sk_dots has, wait on it), and each load of k serves eight rows. */
static inline __attribute__((always_inline)) void sk_matvec(double *out, const double *P, Py_ssize_t ldp, Py_ssize_t n,
                             const double *k, Py_ssize_t w)
{
    const Py_ssize_t w4 = w & ~(Py_ssize_t)3;
    const int t = (int)(w - w4);
    Py_ssize_t s = 0, b;
    if (w >= 4) {
        for (; s + 8 <= n; s += 8) {
            const double *x = P + s * ldp;
            sk_v4d a0 = {0.0, 0.0, 0.0, 0.0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
                   a6 = a0, a7 = a0, q, r;
            for (b = 0; b < w4; b += 4) {
                memcpy(&r, k + b, sizeof r);
                memcpy(&q, x + b, sizeof q);
                a0 = a0 + q * r;
                memcpy(&q, x + ldp + b, sizeof q);
                a1 = a1 + q * r;
                memcpy(&q, x + 2 * ldp + b, sizeof q);
                a2 = a2 + q * r;
                memcpy(&q, x + 3 * ldp + b, sizeof q);
                a3 = a3 + q * r;
                memcpy(&q, x + 4 * ldp + b, sizeof q);
                a4 = a4 + q * r;
                memcpy(&q, x + 5 * ldp + b, sizeof q);
                a5 = a5 + q * r;
                memcpy(&q, x + 6 * ldp + b, sizeof q);
                a6 = a6 + q * r;
                memcpy(&q, x + 7 * ldp + b, sizeof q);
                a7 = a7 + q * r;
            }
            if (t) {
                r = sk_tail4(k + w4, t);
                a0 = a0 + sk_tail4(x + w4, t) * r;
                a1 = a1 + sk_tail4(x + ldp + w4, t) * r;
                a2 = a2 + sk_tail4(x + 2 * ldp + w4, t) * r;
                a3 = a3 + sk_tail4(x + 3 * ldp + w4, t) * r;
                a4 = a4 + sk_tail4(x + 4 * ldp + w4, t) * r;
                a5 = a5 + sk_tail4(x + 5 * ldp + w4, t) * r;
                a6 = a6 + sk_tail4(x + 6 * ldp + w4, t) * r;
                a7 = a7 + sk_tail4(x + 7 * ldp + w4, t) * r;
            }
            out[s] = sk_hsum4(a0);
            out[s + 1] = sk_hsum4(a1);
            out[s + 2] = sk_hsum4(a2);
            out[s + 3] = sk_hsum4(a3);
            out[s + 4] = sk_hsum4(a4);
            out[s + 5] = sk_hsum4(a5);
            out[s + 6] = sk_hsum4(a6);
            out[s + 7] = sk_hsum4(a7);
        }
    }
    if (s < n)
        sk_dots(out + s, P + s * ldp, ldp, n - s, k, w);
}

/* sk_axpy2 on two rows y0 and y1 at once (alpha, beta one per row): they share each load of
 * x and z. */
static inline __attribute__((always_inline)) void
sk_axpy2_pair(double *y0, double *y1, double a0, double a1, const double *x, double b0,
              double b1, const double *z, Py_ssize_t n)
{
    Py_ssize_t b = 0;
    sk_v4d q0, q1, r, s;
    for (; b + 4 <= n; b += 4) {
        memcpy(&r, x + b, sizeof r);
        memcpy(&s, z + b, sizeof s);
        memcpy(&q0, y0 + b, sizeof q0);
        memcpy(&q1, y1 + b, sizeof q1);
        q0 = (q0 + a0 * r) + b0 * s;
        q1 = (q1 + a1 * r) + b1 * s;
        memcpy(y0 + b, &q0, sizeof q0);
        memcpy(y1 + b, &q1, sizeof q1);
    }
    for (; b < n; b++) {
        y0[b] = (y0[b] + a0 * x[b]) + b0 * z[b];
        y1[b] = (y1[b] + a1 * x[b]) + b1 * z[b];
    }
}

/* sk_axpy2 on the four rows y, y + ldy, y + 2 ldy, y + 3 ldy at once (alpha, beta one per
 * row): they share each load of x and z. */
static inline __attribute__((always_inline)) void
sk_axpy2_quad(double *y, Py_ssize_t ldy, const double *alpha, const double *x,
              const double *beta, const double *z, Py_ssize_t n)
{
    Py_ssize_t b = 0;
    int j;
    const double a0 = alpha[0], a1 = alpha[1], a2 = alpha[2], a3 = alpha[3];
    const double b0 = beta[0], b1 = beta[1], b2 = beta[2], b3 = beta[3];
    double *y0 = y, *y1 = y + ldy, *y2 = y + 2 * ldy, *y3 = y + 3 * ldy;
    sk_v4d q0, q1, q2, q3, r, s;
    for (; b + 4 <= n; b += 4) {
        memcpy(&r, x + b, sizeof r);
        memcpy(&s, z + b, sizeof s);
        memcpy(&q0, y0 + b, sizeof q0);
        memcpy(&q1, y1 + b, sizeof q1);
        memcpy(&q2, y2 + b, sizeof q2);
        memcpy(&q3, y3 + b, sizeof q3);
        q0 = (q0 + a0 * r) + b0 * s;
        q1 = (q1 + a1 * r) + b1 * s;
        q2 = (q2 + a2 * r) + b2 * s;
        q3 = (q3 + a3 * r) + b3 * s;
        memcpy(y0 + b, &q0, sizeof q0);
        memcpy(y1 + b, &q1, sizeof q1);
        memcpy(y2 + b, &q2, sizeof q2);
        memcpy(y3 + b, &q3, sizeof q3);
    }
    for (; b < n; b++)
        for (j = 0; j < 4; j++)
            y[j * ldy + b] = (y[j * ldy + b] + alpha[j] * x[b]) + beta[j] * z[b];
}

/* d = P k (n x n, leading dimension ldp) and returns the squared projection error
 * kxx - k . d. */
SK_DOT_CLONES static double sk_pj_project(const double *P, Py_ssize_t ldp, const double *k,
                                          double *d, Py_ssize_t n, double kxx)
{
    if (n == 0)
        return kxx;
    sk_matvec(d, P, ldp, n, k, n);
    return kxx - sk_dot_lanes(k, d, n);
}

/* The squared projection error kxx - k . d over m entries (after a removal). */
SK_DOT_CLONES static double sk_pj_error(const double *k, const double *d, Py_ssize_t m,
                                        double kxx)
{
    return kxx - sk_dot_lanes(k, d, m);
}

/* Block-inverse growth of P (n x n) by one row and column for a vector with d = P k and
 * squared projection error delta: P += outer(d, d / delta), then the new row and column
 * -d / delta and the corner 1 / delta. g (n entries) is scratch: d / delta. */
SK_DOT_CLONES static void sk_pj_grow(double *P, Py_ssize_t ldp, const double *d, double *g,
                                     Py_ssize_t n, double delta)
{
    Py_ssize_t s;
    for (s = 0; s < n; s++)
        g[s] = d[s] / delta;
    for (s = 0; s < n; s++) {
        sk_axpy4(P + s * ldp, d[s], g, n);
        P[s * ldp + n] = -g[s];
    }
    for (s = 0; s < n; s++)
        P[n * ldp + s] = -g[s];
    P[n * ldp + n] = 1.0 / delta;
}

/* The removal of slot i from P (n x n) and the growth by the new vector, in one pass over P.
 *
 * The steps (as the reference does them): the rank-one downdate
 * P1 = P + outer(-col, row) with col = P[:, i] and row = P[i, :] / P_ii (both from before,
 * in col and row); row and column n - 1 moved into i; then the growth of the n - 1 rows left
 * by d (d = P k for the smaller set, in its slot order) and delta: P1 + outer(d, d / delta),
 * the new row and column n - 1 (-d / delta) and the corner 1 / delta. Each element is
 * computed as (P + (-col_a) row_b) + d_a g_b, so the bits are those of the steps one after
 * the other. Four rows at a time (two or one next to row i) share the loads of row and g:
 * the pass then runs at the speed of reading and writing P. A row's moved entry is read
 * before and written after its vector pass (a scalar store under a vector load would stall
 * it). g (n - 1 entries) is scratch: d / delta. */
SK_DOT_CLONES static void sk_pj_shrink_grow(double *P, Py_ssize_t ldp, Py_ssize_t n,
                                            Py_ssize_t i, const double *col, const double *row,
                                            const double *d, double *g, double delta)
{
    const Py_ssize_t m = n - 1; /* rows left after the removal; the new one goes to m */
    const int moved = i < m;    /* else the last slot left: nothing moves */
    const double *pm = P + m * ldp;
    Py_ssize_t a, b;
    for (b = 0; b < m; b++)
        g[b] = d[b] / delta;
    for (a = 0; a < m; a++) {
        double *pa = P + a * ldp;
        double alpha = -col[a], c = pa[m]; /* P[a, m]: column m moves into i */
        if (a + 3 < m && !(moved && a <= i && i <= a + 3)) { /* four plain rows at once */
            double na4[4] = {alpha, -col[a + 1], -col[a + 2], -col[a + 3]}, c4[4];
            int j;
            for (j = 0; j < 4; j++)
                c4[j] = pa[j * ldp + m];
            sk_axpy2_quad(pa, ldp, na4, row, d + a, g, m);
            for (j = 0; j < 4; j++) {
                double *pj = pa + j * ldp;
                if (moved)
                    pj[i] = (c4[j] + na4[j] * row[m]) + d[a + j] * g[i];
                pj[m] = -g[a + j];
            }
            a += 3;
            continue;
        }
        if (a + 1 < m && !(moved && (a == i || a + 1 == i))) { /* two plain rows at once */
            double *pb = pa + ldp, alpha1 = -col[a + 1], c1 = pb[m];
            sk_axpy2_pair(pa, pb, alpha, alpha1, row, d[a], d[a + 1], g, m);
            if (moved) {
                pa[i] = (c + alpha * row[m]) + d[a] * g[i];
                pb[i] = (c1 + alpha1 * row[m]) + d[a + 1] * g[i];
            }
            pa[m] = -g[a];
            pb[m] = -g[a + 1];
            a++;
            continue;
        }
        if (moved && a == i) { /* row i takes row m */
            alpha = -col[m];
            c = pm[m];
            memcpy(pa, pm, (size_t)m * sizeof(double));
        }
        sk_axpy2(pa, alpha, row, d[a], g, m);
        if (moved)
            pa[i] = (c + alpha * row[m]) + d[a] * g[i];
        pa[m] = -g[a];
    }
    double *pl = P + m * ldp;
    for (b = 0; b < m; b++)
        pl[b] = -g[b];
    pl[m] = 1.0 / delta;
}

/* P[:n, :n] = G^-1 for a symmetric positive definite G (n x n, contiguous): G = L L^T,
 * N = L^-T (upper triangular, row by row), P = N N^T, with L and N scratch (n x n each,
 * zeroed by the caller) and t (n entries) scratch. Returns 0 (P untouched) when a squared
 * pivot L_jj^2 falls to min_rel G_jj or below (or is NaN). Every step is a dot of two rows
 * (sk_dots, four rows at a time), so P comes out exactly symmetric (its lower triangle
 * mirrored); the zeros of the triangles only add +-0 to a lane sum. The dots go eight rows
 * at a time (sk_matvec). */
SK_DOT_CLONES static int sk_inverse_by_cholesky(const double *G, Py_ssize_t n, double *P,
                                                Py_ssize_t ldp, double *L, double *N,
                                                double *t, double min_rel)
{
    Py_ssize_t i, j, j0, i0;
    for (j = 0; j < n; j++) { /* Cholesky, column by column: L[i, :j] . L[j, :j] rows */
        double s = G[j * n + j] - sk_dot_lanes(L + j * n, L + j * n, j);
        if (!(s > min_rel * G[j * n + j]))
            return 0;
        double ljj = sqrt(s);
        L[j * n + j] = ljj;
        if (j + 1 < n) {
            sk_matvec(t, L + (j + 1) * n, n, n - j - 1, L + j * n, j);
            for (i = j + 1; i < n; i++)
                L[i * n + j] = (G[i * n + j] - t[i - j - 1]) / ljj;
        }
    }
    for (i = 0; i < n; i++) { /* column i of N = L^-T: N[j, i] = -L[i, j:i] . N[j, j:i] / L_ii */
        double lii = L[i * n + i];
        for (j0 = 0; j0 < i; j0 += 8)
            sk_matvec(t + j0, N + j0 * n + j0, n, i - j0 < 8 ? i - j0 : 8, L + i * n + j0, i - j0);
        for (j = 0; j < i; j++)
            N[j * n + i] = -t[j] / lii;
        N[i * n + i] = 1.0 / lii;
    }
    for (i = 0; i < n; i++) { /* P[i, j] = N[i, i:] . N[j, i:] for j <= i, then mirrored */
        i0 = i & ~(Py_ssize_t)3;
        sk_matvec(P + i * ldp, N + i0, n, i + 1, N + i * n + i0, n - i0);
        for (j = 0; j < i; j++)
            P[j * ldp + i] = P[i * ldp + j];
    }
    return 1;
}

#endif
