/* y[m, o] = sum_k x[m, k] * w[o, k] for a few rows m (a speculative verify pass: gamma + 1 tokens).
 *
 * Why: a decode step of a small model reads every weight once and is bound by memory. Feeding 5 tokens should
 * cost about the same, since each weight read once can serve all 5 rows, but MKL's SGEMM for 5 rows costs 2.6-3x
 * its 1-row product on our AMD EPYC (it packs and blocks for large matrices). Here each weight row is loaded once
 * into AVX registers and multiplied into M accumulators while the M input rows stay in L1.
 * Only the order of the additions differs from F.linear (8 lanes, then a horizontal sum), so results agree to
 * float rounding (tests: within 1e-5 of F.linear). Single-threaded: the app runs torch on one thread. */
#include <immintrin.h>
#include <stdint.h>

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
    return _mm_cvtss_f32(s);
}

#define ROWS_KERNEL(M)                                                                         \
    static void rows_##M(const float *x, const float *w, float *y, int64_t k_len, int64_t outs) { \
        for (int64_t o = 0; o < outs; ++o) {                                                   \
            const float *wr = w + o * k_len;                                                   \
            __m256 acc[M];                                                                     \
            for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();                          \
            int64_t k = 0;                                                                     \
            for (; k + 8 <= k_len; k += 8) {                                                   \
                __m256 wv = _mm256_loadu_ps(wr + k);                                           \
                for (int m = 0; m < M; ++m)                                                    \
                    acc[m] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + m * k_len + k), acc[m]);  \
            }                                                                                  \
            for (int m = 0; m < M; ++m) {                                                      \
                float s = hsum(acc[m]);                                                        \
                for (int64_t t = k; t < k_len; ++t) s += x[m * k_len + t] * wr[t];             \
                y[m * outs + o] = s;                                                           \
            }                                                                                  \
        }                                                                                      \
    }

ROWS_KERNEL(1)
ROWS_KERNEL(2)
ROWS_KERNEL(3)
ROWS_KERNEL(4)
ROWS_KERNEL(5)
ROWS_KERNEL(6)
ROWS_KERNEL(7)
ROWS_KERNEL(8)

/* One row (a decode step): four weight rows at a time, so x is loaded once for four products and the four
 * sums are reduced together (a horizontal sum per product would cost as much as a short row's products). */
static void one_row(const float *x, const float *w, float *y, int64_t k_len, int64_t outs) {
    int64_t o = 0;
    for (; o + 4 <= outs; o += 4) {
        const float *w0 = w + o * k_len, *w1 = w0 + k_len, *w2 = w1 + k_len, *w3 = w2 + k_len;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 8 <= k_len; k += 8) {
            __m256 xv = _mm256_loadu_ps(x + k);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), xv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), xv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), xv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), xv, a3);
        }
        /* [a0 a1 a2 a3] -> one vector of their four sums */
        __m256 h01 = _mm256_hadd_ps(a0, a1), h23 = _mm256_hadd_ps(a2, a3);
        __m256 h = _mm256_hadd_ps(h01, h23);
        __m128 sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        float out[4];
        _mm_storeu_ps(out, sums);
        for (; k < k_len; ++k) {
            out[0] += x[k] * w0[k];
            out[1] += x[k] * w1[k];
            out[2] += x[k] * w2[k];
            out[3] += x[k] * w3[k];
        }
        y[o] = out[0], y[o + 1] = out[1], y[o + 2] = out[2], y[o + 3] = out[3];
    }
    if (o < outs) rows_1(x, w + o * k_len, y + o, k_len, outs - o);
}

/* x [rows, k_len], w [outs, k_len], y [rows, outs], all contiguous float32; rows 1 to 8. Returns 0, or -1. */
int small_matmul(const float *x, const float *w, float *y, int64_t rows, int64_t k_len, int64_t outs) {
    switch (rows) {
        case 1: one_row(x, w, y, k_len, outs); return 0;
        case 2: rows_2(x, w, y, k_len, outs); return 0;
        case 3: rows_3(x, w, y, k_len, outs); return 0;
        case 4: rows_4(x, w, y, k_len, outs); return 0;
        case 5: rows_5(x, w, y, k_len, outs); return 0;
        case 6: rows_6(x, w, y, k_len, outs); return 0;
        case 7: rows_7(x, w, y, k_len, outs); return 0;
        case 8: rows_8(x, w, y, k_len, outs); return 0;
        default: return -1;
    }
}
