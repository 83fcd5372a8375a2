/* The Projectron's O(n^2) and O(n^3) loops on P = K(S, S)^-1, for streamk/budget/_projectron.pxi
 * (included by streamk/budget/_policies.pyx and streamk/learners/_event.pyx: one definition, so
 * the two modules agree to the bit) and _policies.inverse_by_cholesky.
 *
 * Every function is cloned like sk_dots in _fastexp.h: AVX2 *without* FMA and the baseline,
 * so both clones do the same roundings and P has the same bits on every machine of a build.
 * Sums follow sk_dots's lane order (lane j over the indices k = j mod 4, left to right, then
 * (lane0 + lane1) + (lane2 + lane3)); the rank-one updates do y + a x element by element,
 * in the order of the NumPy reference's steps (streamk/budget/projectron.py). The per-event
 * steps keep only P's lower triangle current (P is symmetric): half the memory of P to read
 * and write, which bounds them.
 */
#ifndef STREAMK_DENSE_H
#define STREAMK_DENSE_H

#include "_fastexp.h"

/* The clones of the per-event loops on P: sk_dots's two plus an AVX-512F one. The loops that
 * work element by element (y + a x, the products of a dot before its lane sums) do the same
 * roundings at any vector width, so the AVX-512F clone does them eight at a time and gives the
 * same bits; avx512f implies FMA, which GCC would contract a * b + c into (other roundings),
 * hence fp-contract=off for all three clones. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SK_DENSE_CLONES \
    __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define SK_DENSE_CLONES SK_DOT_CLONES
#endif

/* Eight lanes of float64: one AVX-512 instruction per operation in the AVX-512F clone, two
 * AVX ones in the AVX2 clone, four SSE2 ones in the baseline; element by element, the same
 * roundings. */
typedef double sk_v8d __attribute__((vector_size(64)));

/* x . y in sk_dots's lane order (the same bits as a row of sk_dots). */
static inline __attribute__((always_inline)) double sk_dot_lanes(const double *x, const double *y, Py_ssize_t n)
{
    return sk_hsum4(sk_lanes1(x, y, n));
}

/* y[b] = y[b] + alpha x[b] for b < n, four lanes at a time. */
static inline __attribute__((always_inline)) void sk_axpy4(double *y, double alpha, const double *x, Py_ssize_t n)
{
    Py_ssize_t b = 0;
    sk_v4d q, r;
    sk_v8d q8, r8;
    for (; b + 8 <= n; b += 8) {
        memcpy(&q8, y + b, sizeof q8);
        memcpy(&r8, x + b, sizeof r8);
        q8 = q8 + alpha * r8;
        memcpy(y + b, &q8, sizeof q8);
    }
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
    sk_v8d q8, r8, s8;
    for (; b + 8 <= n; b += 8) {
        memcpy(&q8, y + b, sizeof q8);
        memcpy(&r8, x + b, sizeof r8);
        memcpy(&s8, z + b, sizeof s8);
        q8 = (q8 + alpha * r8) + beta * s8;
        memcpy(y + b, &q8, sizeof q8);
    }
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
    sk_v8d p0, p1, p2, p3, r8, s8;
    for (; b + 8 <= n; b += 8) {
        memcpy(&r8, x + b, sizeof r8);
        memcpy(&s8, z + b, sizeof s8);
        memcpy(&p0, y0 + b, sizeof p0);
        memcpy(&p1, y1 + b, sizeof p1);
        memcpy(&p2, y2 + b, sizeof p2);
        memcpy(&p3, y3 + b, sizeof p3);
        p0 = (p0 + a0 * r8) + b0 * s8;
        p1 = (p1 + a1 * r8) + b1 * s8;
        p2 = (p2 + a2 * r8) + b2 * s8;
        p3 = (p3 + a3 * r8) + b3 * s8;
        memcpy(y0 + b, &p0, sizeof p0);
        memcpy(y1 + b, &p1, sizeof p1);
        memcpy(y2 + b, &p2, sizeof p2);
        memcpy(y3 + b, &p3, sizeof p3);
    }
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

/* The squared projection error kxx - k . d over m entries (after a removal). */
SK_DOT_CLONES static double sk_pj_error(const double *k, const double *d, Py_ssize_t m,
                                        double kxx)
{
    return kxx - sk_dot_lanes(k, d, m);
}

/* ---- P in its lower triangle ----------------------------------------------------------------
 * P is symmetric; the compiled paths read and write only its lower triangle (b <= a), half the
 * memory of the full matrix, and the policy mirrors it before Python reads P
 * (Projectron._mirror). */

/* The diagonal 4 x 4 tile of P's rows a0 + r0 .. a0 + r0 + 3 at columns a0 + r0 .. + 3 (all
 * four in the set): row r0 + j adds its columns up to the diagonal to its lanes and its
 * columns left of the diagonal to u, the others masked to +0, which adds nothing (the upper
 * triangle may hold anything). */
static inline __attribute__((always_inline)) void
sk_pjl_tile(const double *P, Py_ssize_t ldp, Py_ssize_t c, sk_v4d *acc, const double *k,
            double *u)
{
    const sk_v4l le[4] = {{-1, 0, 0, 0}, {-1, -1, 0, 0}, {-1, -1, -1, 0}, {-1, -1, -1, -1}};
    sk_v4d q, kb, ub;
    int j;
    memcpy(&kb, k + c, sizeof kb);
    memcpy(&ub, u + c, sizeof ub);
    for (j = 0; j < 4; j++) {
        memcpy(&q, P + (c + j) * ldp + c, sizeof q);
        acc[j] = acc[j] + (sk_v4d)((sk_v4l)q & le[j]) * kb;
        if (j)
            ub = ub + k[c + j] * (sk_v4d)((sk_v4l)q & le[j - 1]);
    }
    memcpy(u + c, &ub, sizeof ub);
}

/* The removal's rank-two update (see sk_pjl_shrink_prep) of rows a0 .. a0 + R - 1's
 * entries in columns a0 .. a (their diagonal tile), from pend's four vectors of m entries. */
static inline __attribute__((always_inline)) void
sk_pjl_rank2_tile(double *P, Py_ssize_t ldp, Py_ssize_t a0, int R, const double *pend,
                  Py_ssize_t m)
{
    const double *na = pend, *row = pend + m, *d = pend + 2 * m, *g = pend + 3 * m;
    Py_ssize_t a, b;
    int j;
    for (j = 0; j < R; j++) {
        double *pa = P + (a0 + j) * ldp;
        a = a0 + j;
        for (b = a0; b <= a; b++)
            pa[b] = (pa[b] + na[a] * row[b]) + d[a] * g[b];
    }
}

/* The columns b < a0 of sk_pjl_block's R rows, eight at a time: each row's lane sums with k
 * and u's part of the upper triangle (the products' halves added to the lanes one after the
 * other: the bits of four columns at a time). With pend (all rows below m) each entry first
 * takes the removal's deferred rank-two update in a register and is stored (element by
 * element: the bits of the update and the sums one after the other); pend NULL: read only
 * (a constant wherever it is inlined, so the test folds away). Returns the first column it
 * left. */
static inline __attribute__((always_inline)) Py_ssize_t
sk_pjl_left(double *P, Py_ssize_t ldp, Py_ssize_t a0, const int R, const double *k,
            double *u, sk_v4d *acc, const double *pend, Py_ssize_t m)
{
    sk_v8d q8, kb8, ub8, r8, g8, p8;
    sk_v4d lo, hi;
    Py_ssize_t b;
    int j;
    for (b = 0; b + 8 <= a0; b += 8) {
        memcpy(&kb8, k + b, sizeof kb8);
        memcpy(&ub8, u + b, sizeof ub8);
        if (pend) {
            memcpy(&r8, pend + m + b, sizeof r8);
            memcpy(&g8, pend + 3 * m + b, sizeof g8);
        }
        for (j = 0; j < R; j++) {
            double *pr = P + (a0 + j) * ldp + b;
            memcpy(&q8, pr, sizeof q8);
            if (pend) {
                q8 = (q8 + pend[a0 + j] * r8) + pend[2 * m + a0 + j] * g8;
                memcpy(pr, &q8, sizeof q8);
            }
            p8 = q8 * kb8;
            memcpy(&lo, &p8, sizeof lo);
            memcpy(&hi, (const char *)&p8 + sizeof lo, sizeof hi);
            acc[j] = acc[j] + lo;
            acc[j] = acc[j] + hi;
            ub8 = ub8 + k[a0 + j] * q8;
        }
        memcpy(u + b, &ub8, sizeof ub8);
    }
    for (; b < a0; b += 4) { /* the last four columns left of the tile, if any */
        sk_v4d q, kb, ub, rb, gb;
        memcpy(&kb, k + b, sizeof kb);
        memcpy(&ub, u + b, sizeof ub);
        if (pend) {
            memcpy(&rb, pend + m + b, sizeof rb);
            memcpy(&gb, pend + 3 * m + b, sizeof gb);
        }
        for (j = 0; j < R; j++) {
            double *pr = P + (a0 + j) * ldp + b;
            memcpy(&q, pr, sizeof q);
            if (pend) {
                q = (q + pend[a0 + j] * rb) + pend[2 * m + a0 + j] * gb;
                memcpy(pr, &q, sizeof q);
            }
            acc[j] = acc[j] + q * kb;
            ub = ub + k[a0 + j] * q;
        }
        memcpy(u + b, &ub, sizeof ub);
    }
    return b;
}

/* d[a0 .. a0 + R - 1] (lane sums) and u (the upper triangle's part) for the R rows from a0
 * (a multiple of 4; R is 8, 4 or below 4 for the last rows) of P's lower triangle: the
 * columns left of the block four at a time for the R rows together (eight independent lane
 * sums hide the latency of the additions), then the diagonal tiles. With pend (all R rows
 * below m), the rows first take the removal's deferred rank-two update, in the same loads
 * (sk_pjl_left) and then in their tiles; P is written only then (pend NULL: read only). */
static inline __attribute__((always_inline)) void
sk_pjl_block(double *P, Py_ssize_t ldp, Py_ssize_t a0, const int R, const double *k,
             double *d, double *u, const double *pend, Py_ssize_t m)
{
    sk_v4d acc[8];
    sk_v4d q, kb, ub;
    Py_ssize_t b = 0;
    int j;
    for (j = 0; j < R; j++)
        acc[j] = (sk_v4d){0.0, 0.0, 0.0, 0.0};
    if (pend) { /* (two calls, so each inlined copy has pend's test folded) */
        sk_pjl_left(P, ldp, a0, R, k, u, acc, pend, m);
        sk_pjl_rank2_tile(P, ldp, a0, R, pend, m);
    } else {
        sk_pjl_left(P, ldp, a0, R, k, u, acc, NULL, 0);
    }
    if (R >= 4) {
        sk_pjl_tile(P, ldp, a0, acc, k, u);
        if (R == 8) { /* rows 4 .. 7: columns a0 .. a0 + 3 whole, then their own tile */
            memcpy(&kb, k + a0, sizeof kb);
            memcpy(&ub, u + a0, sizeof ub);
            for (j = 4; j < 8; j++) {
                memcpy(&q, P + (a0 + j) * ldp + a0, sizeof q);
                acc[j] = acc[j] + q * kb;
                ub = ub + k[a0 + j] * q;
            }
            memcpy(u + a0, &ub, sizeof ub);
            sk_pjl_tile(P, ldp, a0 + 4, acc + 4, k, u);
        }
    } else {
        for (j = 0; j < R; j++) {
            const double *x = P + (a0 + j) * ldp;
            for (b = a0; b <= a0 + j; b++) {
                acc[j][b & 3] = acc[j][b & 3] + x[b] * k[b];
                if (b < a0 + j)
                    u[b] = u[b] + k[a0 + j] * x[b];
            }
        }
    }
    for (j = 0; j < R; j++)
        d[a0 + j] = sk_hsum4(acc[j]);
}

/* The removal of slot i from P (n x n, lower triangle) and the growth by the new vector.
 *
 * The steps (as the reference does them): the rank-one downdate
 * P1 = P + outer(-col, row) with col = P[:, i] and row = P[i, :] / P_ii (both from before,
 * in col and row); row and column n - 1 moved into i; then the growth of the n - 1 rows left
 * by d (d = P k for the smaller set, in its slot order) and delta: P1 + outer(d, d / delta),
 * the new row and column n - 1 (-d / delta) and the corner 1 / delta. With P_xy read from
 * the lower triangle, new entry (a, b), b <= a < n - 1, is
 * (P_{a'b'} + (-col_{a'}) row_{b'}) + d_a g_b, where a' is a with i and n - 1 swapped: the
 * roundings of the steps one after the other. The moves are O(n) and done first (here): slot
 * i's row takes row n - 1's entries (kept in cm, n entries), the rows below it their moved
 * entry (n - 1, a) in column i, and row[i] row[n - 1]'s entry; the new row n - 1 is -g and
 * the corner 1 / delta. What is left is one rank-two update of the rows a < m = n - 1,
 * (P_ab + na_a row_b) + d_a g_b over b <= a with na_a = -col_{a'} (sk_pjl_rank2_rows): the
 * O(n^2) pass, which sk_pjl_shrink_grow does at once and sk_pjl_shrink_defer leaves to the
 * next d = P k (sk_pjl_project_pending): one pass over P instead of two. pend (4 m entries)
 * takes na, row, d and g = d / delta, in that order. */
static inline __attribute__((always_inline)) void
sk_pjl_shrink_prep(double *P, Py_ssize_t ldp, Py_ssize_t n, Py_ssize_t i, const double *col,
                   double *row, const double *d, double *cm, double delta, double *pend)
{
    const Py_ssize_t m = n - 1; /* rows left after the removal; the new one goes to m */
    const int moved = i < m;    /* else the last slot left: nothing moves */
    double *pm = P + m * ldp, *g = pend + 3 * m;
    Py_ssize_t a, b;
    for (b = 0; b < m; b++)
        g[b] = d[b] / delta;
    for (a = 0; a < m; a++)
        pend[a] = -col[moved && a == i ? m : a];
    if (moved) {
        memcpy(cm, pm, (size_t)(m + 1) * sizeof(double)); /* old row m, diagonal in cm[m] */
        row[i] = row[m];
        memcpy(P + i * ldp, cm, (size_t)i * sizeof(double));
        P[i * ldp + i] = cm[m];
        for (a = i + 1; a < m; a++) /* old entry (m, a) moved into column i */
            P[a * ldp + i] = cm[a];
    }
    memcpy(pend + m, row, (size_t)m * sizeof(double));
    memcpy(pend + 2 * m, d, (size_t)m * sizeof(double));
    for (b = 0; b < m; b++)
        pm[b] = -g[b];
    pm[m] = 1.0 / delta;
}

/* Rows a0 .. a1 - 1 of P's lower triangle take the removal's rank-two update
 * (P_ab + na_a row_b) + d_a g_b for b <= a (na, row, d, g: pend's four vectors of m
 * entries): four rows at a time over the columns left of their diagonal tile, sharing the
 * loads of row and g, then the tile. Every entry is updated on its own, so the rows may be
 * taken in any groups: the same bits. */
static inline __attribute__((always_inline)) void
sk_pjl_rank2_rows(double *P, Py_ssize_t ldp, Py_ssize_t a0, Py_ssize_t a1, const double *pend,
                  Py_ssize_t m)
{
    const double *na = pend, *row = pend + m, *d = pend + 2 * m, *g = pend + 3 * m;
    int j, R;
    for (; a0 < a1; a0 += 4) {
        R = a1 - a0 < 4 ? (int)(a1 - a0) : 4;
        if (R == 4)
            sk_axpy2_quad(P + a0 * ldp, ldp, na + a0, row, d + a0, g, a0);
        else
            for (j = 0; j < R; j++)
                sk_axpy2(P + (a0 + j) * ldp, na[a0 + j], row, d[a0 + j], g, a0);
        sk_pjl_rank2_tile(P, ldp, a0, R, pend, m);
    }
}

/* sk_pjl_shrink_prep and the pass: P inverts the new set on return. pend (4 (n - 1) entries)
 * and cm (n entries) are scratch; row is changed. */
SK_DENSE_CLONES static void sk_pjl_shrink_grow(double *P, Py_ssize_t ldp, Py_ssize_t n,
                                               Py_ssize_t i, const double *col, double *row,
                                               const double *d, double *pend, double *cm,
                                               double delta)
{
    sk_pjl_shrink_prep(P, ldp, n, i, col, row, d, cm, delta, pend);
    sk_pjl_rank2_rows(P, ldp, 0, n - 1, pend, n - 1);
}

/* sk_pjl_shrink_prep alone: P's rows below n - 1 still want pend's rank-two update
 * (sk_pjl_project_pending or sk_pjl_settle applies it). */
SK_DENSE_CLONES static void sk_pjl_shrink_defer(double *P, Py_ssize_t ldp, Py_ssize_t n,
                                                Py_ssize_t i, const double *col, double *row,
                                                const double *d, double *pend, double *cm,
                                                double delta)
{
    sk_pjl_shrink_prep(P, ldp, n, i, col, row, d, cm, delta, pend);
}

/* The deferred rank-two update (pend, m) of sk_pjl_shrink_defer applied to all of P's rows
 * below m, when no d = P k follows to take it. */
SK_DENSE_CLONES static void sk_pjl_settle(double *P, Py_ssize_t ldp, const double *pend,
                                          Py_ssize_t m)
{
    sk_pjl_rank2_rows(P, ldp, 0, m, pend, m);
}

/* Rows a0 .. a0 + R - 1 of d = P k (sk_pjl_block), after the deferred update (pend, m) when
 * there is one: fused into the block's pass when all its rows are below m, else (the block
 * of row m, which is current) applied to the rows below m first. */
#define SK_PJL_BLOCK(P, ldp, a0, R, k, d, u, pend, m)                                        \
    do {                                                                                     \
        if (!(pend) || (a0) + (R) <= (m)) {                                                  \
            sk_pjl_block(P, ldp, a0, R, k, d, u, pend, m);                                   \
        } else {                                                                             \
            if ((a0) < (m))                                                                  \
                sk_pjl_rank2_rows(P, ldp, a0, m, pend, m);                                   \
            sk_pjl_block(P, ldp, a0, R, k, d, u, NULL, 0);                                   \
        }                                                                                    \
    } while (0)

/* d = P k from P's lower triangle (n x n, leading dimension ldp), u (n entries) scratch, and
 * returns the squared projection error kxx - k . d. d_a is the lane sum of row a's entries
 * b <= a (lane b mod 4, left to right) plus u_a, the sum over the rows c > a in order of
 * P_ca k_c: the same bits however the rows are grouped. With pend (m > 0), P's rows below m
 * first take the rank-two update sk_pjl_shrink_defer left, in the same pass: P is read and
 * written once for both. */
static inline __attribute__((always_inline)) double
sk_pjl_project_body(double *P, Py_ssize_t ldp, const double *k, double *d, double *u,
                    Py_ssize_t n, double kxx, const double *pend, Py_ssize_t m)
{
    Py_ssize_t a0 = 0, a;
    if (n == 0)
        return kxx;
    memset(u, 0, (size_t)n * sizeof(double));
    for (; a0 + 8 <= n; a0 += 8)
        SK_PJL_BLOCK(P, ldp, a0, 8, k, d, u, pend, m);
    if (a0 + 4 <= n) {
        SK_PJL_BLOCK(P, ldp, a0, 4, k, d, u, pend, m);
        a0 += 4;
    }
    switch (n - a0) {
    case 1:
        SK_PJL_BLOCK(P, ldp, a0, 1, k, d, u, pend, m);
        break;
    case 2:
        SK_PJL_BLOCK(P, ldp, a0, 2, k, d, u, pend, m);
        break;
    case 3:
        SK_PJL_BLOCK(P, ldp, a0, 3, k, d, u, pend, m);
        break;
    default:
        break;
    }
    for (a = 0; a < n; a++)
        d[a] = d[a] + u[a];
    return kxx - sk_dot_lanes(k, d, n);
}

/* d = P k and kxx - k . d with P read only: the body's AVX-512F clone too (eight columns per
 * load in sk_pjl_left; the same bits on every clone). */
SK_DENSE_CLONES static double sk_pjl_project(const double *P, Py_ssize_t ldp, const double *k,
                                           double *d, double *u, Py_ssize_t n, double kxx)
{
    return sk_pjl_project_body((double *)P, ldp, k, d, u, n, kxx, NULL, 0);
}

/* sk_pjl_project after the deferred update (pend, m) of sk_pjl_shrink_defer, fused into its
 * pass (m < n: the rows below m take it); P inverts the set on return. */
SK_DENSE_CLONES static double sk_pjl_project_pending(double *P, Py_ssize_t ldp, const double *k,
                                                     double *d, double *u, Py_ssize_t n,
                                                     double kxx, const double *pend,
                                                     Py_ssize_t m)
{
    return sk_pjl_project_body(P, ldp, k, d, u, n, kxx, pend, m);
}

/* The arguments of row i of the Projectron's Gram matrix from its dots (m = i + 1 entries):
 * g[j] = max(0, (-2 d[j] + sq_i) + sq[j]) (NaN to 0), _policies._gram_rows's order, element
 * by element (the same bits in every clone; fp-contract off: no FMA), for sk_scaled_exp. */
SK_DENSE_CLONES static void sk_gram_args(double *g, const double *d, const double *sq,
                                         double sq_i, Py_ssize_t m)
{
    Py_ssize_t j;
    double t;
    for (j = 0; j < m; j++) {
        t = -2.0 * d[j];
        t = t + sq_i;
        t = t + sq[j];
        g[j] = t > 0.0 ? t : 0.0;
    }
}

/* The removal's choice (Projectron._remove_one): i = argmin_a ||coef_a||^2 / P_aa (the first
 * of equal costs; coef row-major, p columns), with col = P[:, i] read from the lower triangle
 * and row = col / P_ii; returns i. The costs and row come from loops of their own over
 * contiguous buffers (the diagonal gathered into col first), which the clones divide four
 * or eight at a time: a division element by element, so the same bits as one at a time. */
SK_DENSE_CLONES static Py_ssize_t sk_pjl_pick(const double *P, Py_ssize_t ldp,
                                              const double *coef, Py_ssize_t p, double *col,
                                              double *row, Py_ssize_t n)
{
    Py_ssize_t a, c, i = 0;
    double best = INFINITY, cost, pii;
    for (a = 0; a < n; a++)
        col[a] = P[a * ldp + a];
    if (p == 1) {
        for (a = 0; a < n; a++) /* (0 + c c is c c: a square is never -0) */
            row[a] = (coef[a] * coef[a]) / col[a];
    } else {
        for (a = 0; a < n; a++) {
            cost = 0.0;
            for (c = 0; c < p; c++)
                cost = cost + coef[a * p + c] * coef[a * p + c];
            row[a] = cost / col[a];
        }
    }
    for (a = 0; a < n; a++)
        if (row[a] < best) {
            best = row[a];
            i = a;
        }
    pii = P[i * ldp + i];
    for (a = 0; a < i; a++) /* P[i, :i] is row i's part of the lower triangle */
        col[a] = P[i * ldp + a];
    for (a = i; a < n; a++)
        col[a] = P[a * ldp + i];
    for (a = 0; a < n; a++)
        row[a] = col[a] / pii;
    return i;
}

/* Block-inverse growth of P (n x n, lower triangle) by one row and column for a vector with
 * d = P k and squared projection error delta: P += outer(d, d / delta) (row a < n gains
 * d_a g_b for b <= a), then the new row n (-d / delta) and the corner 1 / delta. g (n
 * entries) is scratch: d / delta. */
SK_DENSE_CLONES static void sk_pjl_grow(double *P, Py_ssize_t ldp, const double *d, double *g,
                                      Py_ssize_t n, double delta)
{
    Py_ssize_t s;
    for (s = 0; s < n; s++)
        g[s] = d[s] / delta;
    for (s = 0; s < n; s++)
        sk_axpy4(P + s * ldp, d[s], g, s + 1);
    for (s = 0; s < n; s++)
        P[n * ldp + s] = -g[s];
    P[n * ldp + n] = 1.0 / delta;
}

/* sk_pjl_grow but its pass over P: the new row n (-d / delta) and the corner 1 / delta now,
 * and the rows below n's rank-one update P_ab + d_a g_b left in pend (4 n entries) as a
 * removal's rank-two one (sk_pjl_shrink_prep) with na = -0 and row = +0, for
 * sk_pjl_project_pending: P_ab + (-0 * +0) is P_ab exactly (x + -0 = x, a zero's sign
 * included), so the same bits as sk_pjl_grow. */
SK_DENSE_CLONES static void sk_pjl_grow_defer(double *P, Py_ssize_t ldp, const double *d,
                                              Py_ssize_t n, double delta, double *pend)
{
    double *g = pend + 3 * n;
    Py_ssize_t s;
    for (s = 0; s < n; s++) {
        g[s] = d[s] / delta;
        pend[s] = -0.0;
        pend[n + s] = 0.0;
        pend[2 * n + s] = d[s];
    }
    for (s = 0; s < n; s++)
        P[n * ldp + s] = -g[s];
    P[n * ldp + n] = 1.0 / delta;
}

/* P[:n, :n] = G^-1 for a symmetric positive definite G (n x n, contiguous): G = L L^T,
 * N = L^-T (upper triangular, row by row), P = N N^T, with L and N scratch (n x n each,
 * zeroed by the caller) and t (n entries) scratch. Returns 0 (P untouched) when a squared
 * pivot L_jj^2 falls to min_rel G_jj or below (or is NaN). Every step is a dot of two rows
 * (sk_dots, four rows at a time), so P comes out exactly symmetric (its lower triangle
 * mirrored); the zeros of the triangles only add +-0 to a lane sum. */
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
            sk_dots(t, L + (j + 1) * n, n, n - j - 1, L + j * n, j);
            for (i = j + 1; i < n; i++)
                L[i * n + j] = (G[i * n + j] - t[i - j - 1]) / ljj;
        }
    }
    for (i = 0; i < n; i++) { /* column i of N = L^-T: N[j, i] = -L[i, j:i] . N[j, j:i] / L_ii */
        double lii = L[i * n + i];
        for (j0 = 0; j0 < i; j0 += 8)
            sk_dots(t + j0, N + j0 * n + j0, n, i - j0 < 8 ? i - j0 : 8, L + i * n + j0, i - j0);
        for (j = 0; j < i; j++)
            N[j * n + i] = -t[j] / lii;
        N[i * n + i] = 1.0 / lii;
    }
    for (i = 0; i < n; i++) { /* P[i, j] = N[i, i:] . N[j, i:] for j <= i, then mirrored */
        i0 = i & ~(Py_ssize_t)3;
        sk_dots(P + i * ldp, N + i0, n, i + 1, N + i * n + i0, n - i0);
        for (j = 0; j < i; j++)
            P[j * ldp + i] = P[i * ldp + j];
    }
    return 1;
}

/* Merge's per-row passes (streamk/budget/_merge.pxi's _merge_pick): once the set is full
 * nearly every event merges, and these run over all n rows each time. They do the
 * operations of the scalar loops they replace in the same order (fp-contract off), so the
 * same bits: the search's picks do not move. Element by element, they run on the clones'
 * widest lanes; the p = 1 case (one coefficient column: every learner but a multi-output
 * one) gets a loop of its own that GCC vectorises. */

typedef int64_t sk_v8l __attribute__((vector_size(64)));

/* min(lo, a[0..n-1]) (the smallest value: min is exact, so the lane order does not
 * matter), eight lanes at a time by a compare and a blend. */
static inline __attribute__((always_inline)) double skm_min(const double *a, Py_ssize_t n,
                                                            double lo)
{
    Py_ssize_t i = 0;
    if (n >= 8) {
        sk_v8d v, x;
        sk_v8l k;
        memcpy(&v, a, sizeof v);
        for (i = 8; i + 8 <= n; i += 8) {
            memcpy(&x, a + i, sizeof x);
            k = x < v;
            v = (sk_v8d)((k & (sk_v8l)x) | (~k & (sk_v8l)v));
        }
        for (int j = 0; j < 8; j++)
            lo = v[j] < lo ? v[j] : lo;
    }
    for (; i < n; i++)
        lo = a[i] < lo ? a[i] : lo;
    return lo;
}

/* nn[i] = ||C_i||² (its p columns summed left to right from 0) and cs[i] = nn[i] kdiag[i]
 * (the removal cost squared) for the n rows; returns the smallest cs. */
SK_DENSE_CLONES static double skm_costs(const double *C, Py_ssize_t p, const double *kdiag,
                                        Py_ssize_t n, double *nn, double *cs)
{
    Py_ssize_t i, c;
    if (p == 1) {
        for (i = 0; i < n; i++) {
            nn[i] = 0.0 + C[i] * C[i];
            cs[i] = nn[i] * kdiag[i];
        }
    } else {
        for (i = 0; i < n; i++) {
            double t = 0.0;
            for (c = 0; c < p; c++)
                t += C[i * p + c] * C[i * p + c];
            nn[i] = t;
            cs[i] = t * kdiag[i];
        }
    }
    return skm_min(cs, n, INFINITY);
}

/* Every row's place against row m, from dd[i] = x_i . x_m: dd[i] = max(sq_i + sq_m -
 * 2 dd[i], 0) (the squared distance), mn[i] = C_i . C_m and u[i] = gamma dd[i] (row m's
 * three set as for a distance of 0). Returns the nearest row but m (the first of the
 * nearest). */
SK_DENSE_CLONES static Py_ssize_t skm_partners(double *dd, const double *sq, const double *C,
                                               Py_ssize_t p, Py_ssize_t n, Py_ssize_t m,
                                               double gamma, double *mn, double *u)
{
    Py_ssize_t i, c;
    double sqm = sq[m], lo;
    const double *cm = C + m * p;
    sk_v8d x, lov;
    sk_v8l k;
    for (i = 0; i < n; i++) {
        double d = sq[i] + sqm - 2.0 * dd[i];
        d = 0.0 > d ? 0.0 : d;
        dd[i] = d;
        u[i] = gamma * d;
    }
    if (p == 1) {
        for (i = 0; i < n; i++)
            mn[i] = 0.0 + C[i] * cm[0];
    } else {
        for (i = 0; i < n; i++) {
            double t = 0.0;
            for (c = 0; c < p; c++)
                t += C[i * p + c] * cm[c];
            mn[i] = t;
        }
    }
    dd[m] = 0.0;
    u[m] = gamma * 0.0;
    lo = skm_min(dd + m + 1, n - m - 1, skm_min(dd, m, INFINITY));
    lov = (sk_v8d){0.0} + lo;
    /* the first row at lo: blocks of eight without it passed over on one vector compare
     * (from the first block holding it, row by row: m's dd of 0 can equal lo) */
    for (i = 0; i + 8 <= n; i += 8) {
        memcpy(&x, dd + i, sizeof x);
        k = x == lov;
        if ((k[0] | k[1]) | (k[2] | k[3]) | (k[4] | k[5]) | (k[6] | k[7]))
            break;
    }
    for (; i < n; i++)
        if (i != m && dd[i] == lo)
            return i;
    return m == 0 ? 1 : 0;  /* NaN distances only */
}

/* Merge's reach: how far from m a partner can be and still lose as little as best.
 * For a partner at u = gamma d² whose ||alpha_n||² = nn >= mm (every partner of an RBF set:
 * m has the smallest norm), the weight's maximum lies on h in [0, 1/2], where the loss at h
 * is (1 - a²) mm + (1 - b²) nn - 2 (ab - e^-u) mn with ab >= e^-u; as |mn| <= sqrt(mm nn),
 * with s = sqrt(nn / mm) >= 1 it is at least mm M(u, h), M = min over s >= 1 of
 * (1 - a²) + (1 - b²) s² - 2 (ab - e^-u) s, whatever the coefficients. So no partner at u
 * loses less than mm L(u), L(u) = min over h of M(u, h): L rises from u²/2 at 0 (for u <= 2
 * it is the loss of two equal coefficients, 2 (1 - e^-u/2)²) to 1 - e^-2u-ish far off.
 * skm_reach[k] <= L(u) for every u >= u_k = 2^(k/16 - 15): L computed offline on 64 points
 * an octave (a dense h grid polished by a bounded 1-D search, long double), nondecreasing
 * (tests/test_merge_reach.py checks 256 points an octave and that 1% higher fails), times
 * 1 - 1e-6 and rounded down, capped below 1. One number a row (its u) then rules out the far
 * rows, where the polygon bound skm_bounds would take three exponentials each. */
#define SKM_REACH_N 305
static const double skm_reach[SKM_REACH_N] = {
    4.6565371e-10, 5.0779863e-10, 5.5375794e-10, 6.0387687e-10, 6.5853189e-10, 7.1813355e-10,
    7.8312953e-10, 8.5400806e-10, 9.3130154e-10, 1.0155905e-09, 1.1075082e-09, 1.2077450e-09,
    1.3170539e-09, 1.4362558e-09, 1.5662462e-09, 1.7080015e-09, 1.8625864e-09, 2.0311621e-09,
    2.2149949e-09, 2.4154655e-09, 2.6340798e-09, 2.8724797e-09, 3.1324561e-09, 3.4159616e-09,
    3.7251257e-09, 4.0622707e-09, 4.4299288e-09, 4.8308615e-09, 5.2680804e-09, 5.7448693e-09,
    6.2648096e-09, 6.8318063e-09, 7.4501184e-09, 8.1243897e-09, 8.8596848e-09, 9.6615264e-09,
    1.0535936e-08, 1.1489483e-08, 1.2529328e-08, 1.3663281e-08, 1.4899860e-08, 1.6248350e-08,
    1.7718881e-08, 1.9322496e-08, 2.1071240e-08, 2.2978245e-08, 2.5057835e-08, 2.7325628e-08,
    2.9798654e-08, 3.2495487e-08, 3.5436380e-08, 3.8643419e-08, 4.2140688e-08, 4.5954451e-08,
    5.0113348e-08, 5.4648610e-08, 5.9594296e-08, 6.4987544e-08, 7.0868854e-08, 7.7282389e-08,
    8.4276309e-08, 9.1903131e-08, 1.0022012e-07, 1.0928973e-07, 1.1918007e-07, 1.2996538e-07,
    1.4172665e-07, 1.5455219e-07, 1.6853828e-07, 1.8378994e-07, 2.0042166e-07, 2.1855831e-07,
    2.3833603e-07, 2.5990332e-07, 2.8342205e-07, 3.0906879e-07, 3.3703604e-07, 3.6753372e-07,
    4.0079076e-07, 4.3705676e-07, 4.7660391e-07, 5.1972902e-07, 5.6675572e-07, 6.1803693e-07,
    6.7395746e-07, 7.3493693e-07, 8.0143289e-07, 8.7394426e-07, 9.5301508e-07, 1.0392385e-06,
    1.1332614e-06, 1.2357892e-06, 1.3475907e-06, 1.4695047e-06, 1.6024454e-06, 1.7474099e-06,
    1.9054851e-06, 2.0778564e-06, 2.2658162e-06, 2.4707736e-06, 2.6942651e-06, 2.9379659e-06,
    3.2037025e-06, 3.4934666e-06, 3.8094293e-06, 4.1539582e-06, 4.5296343e-06, 4.9392720e-06,
    5.3859394e-06, 5.8729816e-06, 6.4040457e-06, 6.9831078e-06, 7.6145027e-06, 8.3029563e-06,
    9.0536207e-06, 9.8721128e-06, 1.0764555e-05, 1.1737624e-05, 1.2798596e-05, 1.3955404e-05,
    1.5216694e-05, 1.6591895e-05, 1.8091280e-05, 1.9726051e-05, 2.1508418e-05, 2.3451687e-05,
    2.5570365e-05, 2.7880261e-05, 3.0398609e-05, 3.3144190e-05, 3.6137473e-05, 3.9400767e-05,
    4.2958386e-05, 4.6836826e-05, 5.1064962e-05, 5.5674259e-05, 6.0699004e-05, 6.6176561e-05,
    7.2147640e-05, 7.8656600e-05, 8.5751768e-05, 9.3485802e-05, 1.0191606e-04, 1.1110505e-04,
    1.2112084e-04, 1.3203760e-04, 1.4393610e-04, 1.5690432e-04, 1.7103809e-04, 1.8644178e-04,
    2.0322903e-04, 2.2152361e-04, 2.4146028e-04, 2.6318578e-04, 2.8685984e-04, 3.1265639e-04,
    3.4076475e-04, 3.7139097e-04, 4.0475935e-04, 4.4111397e-04, 4.8072045e-04, 5.2386780e-04,
    5.7087049e-04, 6.2207059e-04, 6.7784020e-04, 7.3858405e-04, 8.0474226e-04, 8.7679343e-04,
    9.5525789e-04, 1.0407013e-03, 1.1337385e-03, 1.2350377e-03, 1.3453249e-03, 1.4653890e-03,
    1.5960868e-03, 1.7383489e-03, 1.8931858e-03, 2.0616945e-03, 2.2450658e-03, 2.4445919e-03,
    2.6616749e-03, 2.8978355e-03, 3.1547229e-03, 3.4341251e-03, 3.7379802e-03, 4.0683882e-03,
    4.4276239e-03, 4.8181511e-03, 5.2426367e-03, 5.7039672e-03, 6.2052653e-03, 6.7499082e-03,
    7.3415465e-03, 7.9841256e-03, 8.6819067e-03, 9.4394908e-03, 1.0261843e-02, 1.1154320e-02,
    1.2122695e-02, 1.3173191e-02, 1.4312508e-02, 1.5547857e-02, 1.6886998e-02, 1.8338266e-02,
    1.9910622e-02, 2.1613678e-02, 2.3457748e-02, 2.5453886e-02, 2.7613928e-02, 2.9950537e-02,
    3.2477252e-02, 3.5208527e-02, 3.8159783e-02, 4.1347452e-02, 4.4789026e-02, 4.8503098e-02,
    5.2509407e-02, 5.6828885e-02, 6.1483689e-02, 6.6497244e-02, 7.1894267e-02, 7.7700802e-02,
    8.3944232e-02, 9.0653296e-02, 9.7858089e-02, 1.0559005e-01, 1.1388196e-01, 1.2276790e-01,
    1.3228316e-01, 1.4246426e-01, 1.5334877e-01, 1.6497528e-01, 1.7738320e-01, 1.9061265e-01,
    2.0470425e-01, 2.1969892e-01, 2.3563760e-01, 2.5256100e-01, 2.7050927e-01, 2.8952161e-01,
    3.0963593e-01, 3.3088838e-01, 3.5331290e-01, 3.7694068e-01, 4.0179965e-01, 4.2791388e-01,
    4.5530298e-01, 4.8398149e-01, 5.1395818e-01, 5.4523545e-01, 5.7780863e-01, 6.1166532e-01,
    6.4678481e-01, 6.8313741e-01, 7.2068397e-01, 7.5937534e-01, 7.9915200e-01, 8.3600872e-01,
    8.6670193e-01, 8.9218290e-01, 9.1326007e-01, 9.3062225e-01, 9.4485734e-01, 9.5646767e-01,
    9.6588261e-01, 9.7346892e-01, 9.7953952e-01, 9.8436075e-01, 9.8815862e-01, 9.9112412e-01,
    9.9341782e-01, 9.9517398e-01, 9.9650399e-01, 9.9749960e-01, 9.9823568e-01, 9.9877272e-01,
    9.9915905e-01, 9.9943283e-01, 9.9962379e-01, 9.9975476e-01, 9.9984298e-01, 9.9990130e-01,
    9.9993909e-01, 9.9996306e-01, 9.9997794e-01, 9.9998695e-01, 9.9999228e-01, 9.9999535e-01,
    9.9999707e-01, 9.9999801e-01, 9.9999851e-01, 9.9999876e-01, 9.9999889e-01, 9.9999895e-01,
    9.9999897e-01, 9.9999899e-01, 9.9999899e-01, 9.9999899e-01, 9.9999899e-01, 9.9999899e-01,
    9.9999899e-01, 9.9999899e-01, 9.9999899e-01, 9.9999899e-01, 9.9999899e-01
};

/* The reach of best at two table points, into reach[0..3] = (u1, cap1, u2, cap2): u1 is
 * the smallest table point u_k at which mm skm_reach[k] exceeds best by the search's
 * margin 1e-9 (mm + nn) for nn = mm, cap1 the largest nn for which it still does (the
 * margin grows with nn; 1e-6 of it kept for rounding); u2 and cap2 the same an octave
 * farther, where the bound has grown past the margin of far heavier partners (a novelty
 * detector's best loss is often about 0, so cap1 is a few mm and its merged rows are
 * heavier). A partner at u >= u1 with mm <= nn <= cap1, or at u >= u2 with
 * mm <= nn <= cap2, cannot lose less than best. Returns 0 when no table point does (best
 * about mm or more, or mm = 0): nothing is ruled out by distance. */
static inline int skm_reach_at(double mm, double best, double *reach)
{
    Py_ssize_t lo = 0, hi = SKM_REACH_N - 1, mid, far;
    double need = best + 2e-9 * mm;
    if (!(mm > 0.0) || !(mm * skm_reach[hi] > need))
        return 0;
    while (lo < hi) {  /* the first k with mm skm_reach[k] > need (the table is sorted) */
        mid = (lo + hi) / 2;
        if (mm * skm_reach[mid] > need)
            hi = mid;
        else
            lo = mid + 1;
    }
    far = lo + 16 < SKM_REACH_N ? lo + 16 : SKM_REACH_N - 1;
    reach[0] = exp2((double)lo / 16.0 - 15.0);
    reach[1] = 1e9 * (mm * skm_reach[lo] - best) * (1.0 - 1e-6) - mm;
    reach[2] = exp2((double)far / 16.0 - 15.0);
    reach[3] = 1e9 * (mm * skm_reach[far] - best) * (1.0 - 1e-6) - mm;
    return 1;
}

/* The candidates for skm_bounds: every row but m within reach (skm_reach_at's; NaN too),
 * and seed always; their indices into pick, their u, nn, mn into cu, cn, cmn (which may be
 * the scratch of earlier passes), in slot order. The flags are one byte a row (in flag's
 * room, padded with zeros to a whole block of eight); a block of eight rows is one 64-bit
 * word, passed over when zero (most are) and otherwise walked by its lowest set byte, so
 * the cost is a compare a row plus the rows kept (writing every row of a block that keeps
 * one, branch-free, cost twice as much at 1,000 rows). Returns how many. */
SK_DENSE_CLONES static Py_ssize_t skm_gather(const double *u, const double *nn,
                                             const double *mn, double mm, const double *reach,
                                             Py_ssize_t n, Py_ssize_t m, Py_ssize_t seed,
                                             double *flag, Py_ssize_t *pick, double *cu,
                                             double *cn, double *cmn)
{
    Py_ssize_t i, j, J = 0;
    double u1 = reach[0], cap1 = reach[1], u2 = reach[2], cap2 = reach[3];
    unsigned char *f = (unsigned char *)flag;  /* n bytes and the padding fit in n doubles */
    uint64_t bits;
    for (i = 0; i < n; i++) {
        double ui = u[i], ni = nn[i];
        int heavier = ni >= mm;
        f[i] = ((ui >= u1) & heavier & (ni <= cap1)) | ((ui >= u2) & heavier & (ni <= cap2))
                   ? 0 : 1;
    }
    f[seed] = 1;
    f[m] = 0;
    for (i = n; i % 8; i++)
        f[i] = 0;
    for (i = 0; i < n; i += 8) {
        memcpy(&bits, f + i, sizeof bits);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        while (bits) {  /* row i + k is byte k: the lowest set byte first, slot order */
            j = i + (__builtin_ctzll(bits) >> 3);
            bits &= bits - 1;
#else
        for (j = i; bits && j < i + 8; j++) {
            if (!f[j])
                continue;
#endif
            pick[J] = j;
            cu[J] = u[j];
            cn[J] = nn[j];
            cmn[J] = mn[j];
            J++;
        }
    }
    return J;
}

/* The slot of the smallest of ids[0 .. n - 1] (the first on ties; 0 for n = 0):
 * SupportSet.oldest, which remove-oldest and the Forgetron take on every insertion into a
 * full set. Eight lanes keep each its smallest id and where it is (a strict compare keeps a
 * lane's first), then the lanes in slot order decide: one vectorised pass instead of a
 * compare-and-branch a slot (6% of a full Forgetron(1000)'s learn_one on 50 features). */
SK_DENSE_CLONES static Py_ssize_t sk_oldest(const int64_t *ids, Py_ssize_t n)
{
    Py_ssize_t i = 0, j, slot = 0;
    int64_t lo;
    sk_v8l x, lt, best, at, here, lane = {0, 1, 2, 3, 4, 5, 6, 7};
    if (n <= 0)
        return 0;
    lo = ids[0];
    if (n >= 16) {
        memcpy(&best, ids, sizeof best);
        at = lane;
        for (i = 8; i + 8 <= n; i += 8) {
            memcpy(&x, ids + i, sizeof x);
            lt = x < best;
            here = lane + (int64_t)i;
            best = (x & lt) | (best & ~lt);
            at = (here & lt) | (at & ~lt);
        }
        lo = best[0];
        slot = (Py_ssize_t)at[0];
        for (j = 1; j < 8; j++)
            if (best[j] < lo || (best[j] == lo && at[j] < slot)) {
                lo = best[j];
                slot = (Py_ssize_t)at[j];
            }
    }
    for (; i < n; i++)
        if (ids[i] < lo) {
            lo = ids[i];
            slot = i;
        }
    return slot;
}

/* The largest double t with sqrt(t) <= root, for a finite root >= 0: sqrt is correctly
 * rounded, so monotone, and t is root² to an ulp or two. c <= t is then the test
 * sqrt(c) <= root without a square root. */
static inline double skm_root_floor(double root)
{
    double t = root * root;
    for (int i = 0; i < 8 && sqrt(t) > root; i++)
        t = nextafter(t, 0.0);
    for (int i = 0; i < 8 && sqrt(nextafter(t, INFINITY)) <= root; i++)
        t = nextafter(t, INFINITY);
    return t;
}

/* m: the row of smallest cost (lo = the smallest squared cost cs, from skm_costs), ties
 * within 1e-12 relative in the costs themselves going to the oldest id. sqrt is monotone,
 * so only rows within 3e-12 of lo in squares can tie, and where lo is an ordinary number
 * the roots' test is a bound on the squares (skm_root_floor): the tie is cs <= near, one
 * vector compare for eight rows, and the oldest id and its slot are kept lane by lane by
 * blends (no branch a row: a set whose costs are equal, a novelty detector's often are,
 * ties on most rows). Elsewhere (NaN or huge costs) the roots row by row. */
SK_DENSE_CLONES static Py_ssize_t skm_smallest(const double *cs, const int64_t *ids,
                                               Py_ssize_t n, double lo)
{
    double near = lo * (1.0 + 3e-12), root = sqrt(lo) * (1.0 + 1e-12), t;
    Py_ssize_t i = 0, j, m = -1;
    int64_t oldest = INT64_MAX;
    sk_v8d x, nv;
    sk_v8l k, id, lt, slot, top = (sk_v8l){0} + INT64_MAX, best = top, at = top;
    sk_v8l lane = {0, 1, 2, 3, 4, 5, 6, 7};
    if (!(lo >= 0.0 && lo < 1e300)) {
        for (j = 0; j < n; j++)
            if (cs[j] <= near && sqrt(cs[j]) <= root && (m < 0 || ids[j] < oldest)) {
                m = j;
                oldest = ids[j];
            }
        return m;
    }
    t = skm_root_floor(root);
    near = t < near ? t : near;
    nv = (sk_v8d){0.0} + near;
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, cs + i, sizeof x);
        memcpy(&id, ids + i, sizeof id);
        k = x <= nv;
        id = (id & k) | (top & ~k);
        lt = id < best;  /* strict: a lane keeps its first slot of an id */
        slot = lane + (int64_t)i;
        best = (id & lt) | (best & ~lt);
        at = (slot & lt) | (at & ~lt);
    }
    for (j = 0; j < 8; j++)  /* lanes in slot order within a block: (id, slot) decides */
        if (best[j] < oldest || (best[j] == oldest && best[j] != INT64_MAX && at[j] < m)) {
            oldest = best[j];
            m = best[j] == INT64_MAX ? m : (Py_ssize_t)at[j];
        }
    for (; i < n; i++)
        if (cs[i] <= near && (m < 0 || ids[i] < oldest)) {
            m = i;
            oldest = ids[i];
        }
    return m;
}

/* The candidates skm_bounds's bounds lb do not rule out against best, and seed always,
 * but never m: the J rows bounded are rows from[j] (gathered by skm_gather with their u,
 * nn, mn, and half from skm_bounds; from may be pick itself) or, from NULL, rows 0..J-1 (all of them, m
 * included). Their rows into pick and their u, nn, mn, half into the search's, in slot
 * order (branch-free, as skm_gather). Returns how many. */
SK_DENSE_CLONES static Py_ssize_t skm_keep(const double *lb, Py_ssize_t J, Py_ssize_t seed,
                                           Py_ssize_t m, double mm, double best,
                                           const Py_ssize_t *from, Py_ssize_t *pick,
                                           const double *cu, const double *cn,
                                           const double *cmn, const double *chalf, double *u,
                                           double *nn, double *mn, double *half)
{
    Py_ssize_t j, K = 0;
    for (j = 0; j < J; j++) {
        Py_ssize_t i = from != NULL ? from[j] : j;
        int keep = (i == seed) | (!(lb[j] > best + 1e-9 * (mm + cn[j])) & (i != m));
        pick[K] = i;
        u[K] = cu[j];
        nn[K] = cn[j];
        mn[K] = cmn[j];
        half[K] = chalf[j];
        K += keep;
    }
    return K;
}

/* ---- P rebuilt from scratch, two dots per load ----------------------------------------------
 * sk_pjl_inverse is sk_inverse_by_cholesky with the same bits, faster: its O(n^3) steps take
 * two dots at a time that share a row operand (one load of that row for both). A dot keeps
 * sk_dots's order (four lane sums, lane l over the entries k = l mod 4 left to right, the last
 * partial group padded with 0, then (lane0 + lane1) + (lane2 + lane3)), so an eight-lane
 * vector may hold two dots' lanes side by side: element by element, the same roundings at any
 * width (the AVX-512F clone does it in one register, fp-contract off). Where a dot is one
 * entry longer than its partner (the next column of a triangle), that entry is the last of
 * its lane and is added to the kept lanes afterwards: the bits of the longer dot. Compilers
 * without __builtin_shufflevector (GCC < 12) run sk_inverse_by_cholesky itself. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define SK_PJL_SHUFFLE 1
#endif
#endif

#ifdef SK_PJL_SHUFFLE
/* A row's four entries twice over (one half per dot), two rows' four entries side by side,
 * and the halves of an eight-lane vector. */
#define SK_PJL_TWICE(v) __builtin_shufflevector(v, v, 0, 1, 2, 3, 0, 1, 2, 3)
#define SK_PJL_PAIR(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7)
#define SK_PJL_LO(v) __builtin_shufflevector(v, v, 0, 1, 2, 3)
#define SK_PJL_HI(v) __builtin_shufflevector(v, v, 4, 5, 6, 7)

static inline __attribute__((always_inline)) sk_v4d sk_pjl_load4(const double *x)
{
    sk_v4d v;
    memcpy(&v, x, sizeof v);
    return v;
}

/* (lane0 + lane1) + (lane2 + lane3) of four lanes kept in memory (sk_hsum4's sum). */
static inline __attribute__((always_inline)) double sk_pjl_hsum4p(const double *l)
{
    return (l[0] + l[1]) + (l[2] + l[3]);
}

/* The four lane sums of X[s] . q0 and X[s] . q1 (s < n, leading dimension ldx; q0 and q1 w
 * entries each) into out0 and out1 (4 n entries each; lane l of row s at 4 s + l), in
 * sk_dots's order. Eight rows at a time: two rows side by side in a vector against each
 * query's entries twice over, so each load of a row serves both dots. */
static inline __attribute__((always_inline)) void
sk_pjl_lanes2(const double *X, Py_ssize_t ldx, Py_ssize_t n, const double *q0,
              const double *q1, Py_ssize_t w, double *out0, double *out1)
{
    const Py_ssize_t wf = w & ~(Py_ssize_t)3;
    const int t = (int)(w - wf);
    const sk_v8d z = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    sk_v8d r0, r1, v, a0, qt = z;
    sk_v4d h0, h1;
    Py_ssize_t s = 0, k;
    int j;
    if (t) /* the queries' last partial group, padded with 0 */
        qt = SK_PJL_PAIR(sk_tail4(q0 + wf, t), sk_tail4(q1 + wf, t));
    for (; s + 8 <= n; s += 8) {
        const double *x = X + s * ldx;
        sk_v8d a[4] = {z, z, z, z}, b[4] = {z, z, z, z};
        for (k = 0; k < wf; k += 4) {
            h0 = sk_pjl_load4(q0 + k);
            h1 = sk_pjl_load4(q1 + k);
            r0 = SK_PJL_TWICE(h0);
            r1 = SK_PJL_TWICE(h1);
            for (j = 0; j < 4; j++) {
                v = SK_PJL_PAIR(sk_pjl_load4(x + 2 * j * ldx + k),
                                sk_pjl_load4(x + (2 * j + 1) * ldx + k));
                a[j] = a[j] + v * r0;
                b[j] = b[j] + v * r1;
            }
        }
        if (t) {
            h0 = SK_PJL_LO(qt);
            h1 = SK_PJL_HI(qt);
            r0 = SK_PJL_TWICE(h0);
            r1 = SK_PJL_TWICE(h1);
            for (j = 0; j < 4; j++) {
                v = SK_PJL_PAIR(sk_tail4(x + 2 * j * ldx + wf, t),
                                sk_tail4(x + (2 * j + 1) * ldx + wf, t));
                a[j] = a[j] + v * r0;
                b[j] = b[j] + v * r1;
            }
        }
        for (j = 0; j < 4; j++) {
            h0 = SK_PJL_LO(a[j]);
            memcpy(out0 + 4 * (s + 2 * j), &h0, sizeof h0);
            h0 = SK_PJL_HI(a[j]);
            memcpy(out0 + 4 * (s + 2 * j + 1), &h0, sizeof h0);
            h1 = SK_PJL_LO(b[j]);
            memcpy(out1 + 4 * (s + 2 * j), &h1, sizeof h1);
            h1 = SK_PJL_HI(b[j]);
            memcpy(out1 + 4 * (s + 2 * j + 1), &h1, sizeof h1);
        }
    }
    for (; s < n; s++) { /* the last rows one at a time, both queries side by side */
        const double *x = X + s * ldx;
        a0 = z;
        for (k = 0; k < wf; k += 4) {
            h0 = sk_pjl_load4(x + k);
            a0 = a0 + SK_PJL_TWICE(h0) * SK_PJL_PAIR(sk_pjl_load4(q0 + k), sk_pjl_load4(q1 + k));
        }
        if (t) {
            h0 = sk_tail4(x + wf, t);
            a0 = a0 + SK_PJL_TWICE(h0) * qt;
        }
        h0 = SK_PJL_LO(a0);
        memcpy(out0 + 4 * s, &h0, sizeof h0);
        h1 = SK_PJL_HI(a0);
        memcpy(out1 + 4 * s, &h1, sizeof h1);
    }
}

/* Column j of L below the diagonal, as sk_inverse_by_cholesky computes it:
 * L_ij = (G_ij - dot) / ljj with the dot's lanes at lanes + 4 (i - j - 1). */
static inline __attribute__((always_inline)) void
sk_pjl_chol_col(const double *G, Py_ssize_t n, double *L, Py_ssize_t j, double ljj,
                const double *lanes)
{
    Py_ssize_t i;
    for (i = j + 1; i < n; i++)
        L[i * n + j] = (G[i * n + j] - sk_pjl_hsum4p(lanes + 4 * (i - j - 1))) / ljj;
}
#endif

/* sk_inverse_by_cholesky's P (the same arguments, return and bits) with two dots per load
 * (see above): Cholesky columns j and j + 1 take their lane sums over L's first j columns
 * together, column j + 1's entry j once column j is known; N = L^-T columns i and i + 1 the
 * same over the full blocks of eight rows below i (the block holding row i by sk_dots, as
 * before); P = N N^T rows i and i + 1 (i even: the same start i & ~3) together. lanes
 * (8 n entries) is scratch besides sk_inverse_by_cholesky's. Only G's lower triangle is
 * read, only N's strictly lower triangle must be zero (L's unwritten entries are never
 * read), and with mirror 0 P's upper triangle is not made current (the per-event steps read
 * only the lower one; the mirror's column writes cost a cache line per entry). */
SK_DENSE_CLONES static int sk_pjl_inverse(const double *G, Py_ssize_t n, double *P,
                                          Py_ssize_t ldp, double *L, double *N, double *t,
                                          double *lanes, double min_rel, int mirror)
{
#ifdef SK_PJL_SHUFFLE
    double *l0 = lanes, *l1 = lanes + 4 * n, s, ljj, lii;
    Py_ssize_t i, j, j0, i0, jf, c;
    for (j = 0; j < n; j += 2) { /* Cholesky, columns j and j + 1 */
        s = G[j * n + j] - sk_dot_lanes(L + j * n, L + j * n, j);
        if (!(s > min_rel * G[j * n + j]))
            return 0;
        ljj = sqrt(s);
        L[j * n + j] = ljj;
        if (j + 1 == n)
            break;
        sk_pjl_lanes2(L + (j + 1) * n, n, n - j - 1, L + j * n, L + (j + 1) * n, j, l0, l1);
        sk_pjl_chol_col(G, n, L, j, ljj, l0);
        s = G[(j + 1) * n + j + 1] - sk_dot_lanes(L + (j + 1) * n, L + (j + 1) * n, j + 1);
        if (!(s > min_rel * G[(j + 1) * n + j + 1]))
            return 0;
        ljj = sqrt(s);
        L[(j + 1) * n + j + 1] = ljj;
        for (i = j + 2; i < n; i++) /* entry j of each dot of column j + 1, last in its lane */
            l1[4 * (i - j - 1) + (j & 3)] += L[i * n + j] * L[(j + 1) * n + j];
        sk_pjl_chol_col(G, n, L, j + 1, ljj, l1 + 4);
    }
    for (i = 0; i < n; i += 2) { /* N = L^-T, columns i and i + 1 */
        lii = L[i * n + i];
        jf = i & ~(Py_ssize_t)7; /* the full blocks of eight rows end here */
        for (j0 = 0; j0 < jf; j0 += 8)
            if (i + 1 < n)
                sk_pjl_lanes2(N + j0 * n + j0, n, 8, L + i * n + j0, L + (i + 1) * n + j0,
                              i - j0, l0 + 4 * j0, l1 + 4 * j0);
            else
                sk_dots(t + j0, N + j0 * n + j0, n, 8, L + i * n + j0, i - j0);
        if (i + 1 < n)
            for (j = 0; j < jf; j++)
                t[j] = sk_pjl_hsum4p(l0 + 4 * j);
        if (jf < i)
            sk_dots(t + jf, N + jf * n + jf, n, i - jf, L + i * n + jf, i - jf);
        for (j = 0; j < i; j++)
            N[j * n + i] = -t[j] / lii;
        N[i * n + i] = 1.0 / lii;
        if (i + 1 == n)
            break;
        lii = L[(i + 1) * n + i + 1];
        for (j = 0; j < jf; j++) { /* entry i of each dot of column i + 1, last in its lane */
            c = 4 * j + ((i - (j & ~(Py_ssize_t)7)) & 3);
            l1[c] += N[j * n + i] * L[(i + 1) * n + i];
            t[j] = sk_pjl_hsum4p(l1 + 4 * j);
        }
        sk_dots(t + jf, N + jf * n + jf, n, i + 1 - jf, L + (i + 1) * n + jf, i + 1 - jf);
        for (j = 0; j <= i; j++)
            N[j * n + i + 1] = -t[j] / lii;
        N[(i + 1) * n + i + 1] = 1.0 / lii;
    }
    for (i = 0; i < n; i += 2) { /* P[i, j] = N[i, i0:] . N[j, i0:], rows i and i + 1 */
        i0 = i & ~(Py_ssize_t)3;
        if (i + 1 == n) {
            sk_dots(P + i * ldp, N + i0, n, i + 1, N + i * n + i0, n - i0);
            break;
        }
        sk_pjl_lanes2(N + i0, n, i + 2, N + i * n + i0, N + (i + 1) * n + i0, n - i0, l0, l1);
        for (j = 0; j <= i; j++)
            P[i * ldp + j] = sk_pjl_hsum4p(l0 + 4 * j);
        for (j = 0; j <= i + 1; j++)
            P[(i + 1) * ldp + j] = sk_pjl_hsum4p(l1 + 4 * j);
    }
    for (i = 0; mirror && i < n; i++) /* mirrored: P exactly symmetric */
        for (j = 0; j < i; j++)
            P[j * ldp + i] = P[i * ldp + j];
    return 1;
#else
    (void)lanes, (void)mirror;
    return sk_inverse_by_cholesky(G, n, P, ldp, L, N, t, min_rel);
#endif
}

#endif
