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

/* One row (a decode step) takes rows_1: one weight row against x at a time. A variant that took four weight rows at
 * once and reduced their sums together was ~15% slower over a step's 23 MB of weights (AMD EPYC, 2026-12-02, idle,
 * alternated: 0.89-0.96 ms against 1.09-1.19 for the 25 products), its four streams of weight rows competing. */

/* x [rows, k_len], w [outs, k_len], y [rows, outs], all contiguous float32; rows 1 to 8. Returns 0, or -1. */
int small_matmul(const float *x, const float *w, float *y, int64_t rows, int64_t k_len, int64_t outs) {
    switch (rows) {
        case 1: rows_1(x, w, y, k_len, outs); return 0;
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
