/* y[m, o] = sum_k x[m, k] * w[o, k] for 1 to 8 rows m, the weight packed in panels of 16 outputs: the products of
 * fused_step.c (a decode step is one row; a speculative verify pass gamma + 1 rows).
 *
 * Layout: panel p holds outputs 16p .. 16p + 15 as [k_len][16] floats (the last panel padded with zero rows), so one
 * vector load brings one input position's weights for 16 outputs, and one broadcast of x[m, k] multiplies them into
 * row m's 16 accumulators. Packing is done once per model (`inference.core.fused_step.packed`).
 *
 * Why this and not one weight row at a time (small_matmul.c): each output here is one lane of one accumulator, summed
 * over k in order, so
 *   - a row's outputs are the same numbers whatever the row count: the verify pass's rows equal one-token steps bit
 *     for bit, and speculative greedy decoding writes plain greedy decoding's text by construction, not by luck;
 *   - the same is true with 16-lane (AVX-512) or 8-lane (AVX2) registers: one lane is one output either way, and
 *     a fused multiply-add rounds once in both, so the two paths give the same bits (tests);
 *   - no horizontal sum per output, and many independent accumulators, so the FMA units are not waiting on one
 *     dependency chain. Measured on the 2-core AMD EPYC VM (Zen 4), the bundled model's 25 products (23 MB),
 *     median of 300: one row 0.24 ms (0.41-0.48 one weight row at a time), five rows 0.41 ms with AVX-512 (0.58 with
 *     AVX2 here, 0.67-0.90 one weight row at a time).
 * AVX-512 is used where the CPU has it (checked once at run time); the library itself needs only AVX2 and FMA. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define PANEL 16

/* done [rows][panels][16]: the finished sums of `panels` panels from panel p on, into y [rows][outs] (the last
 * panel of an output count that is not a multiple of 16 only in part). Stored through memory so the kernels'
 * accumulators stay registers in their loops (stored straight from them, GCC kept them on the stack). */
static inline void store_panels(float *y, const float *done, int rows, int panels, int64_t p, int64_t outs) {
    for (int m = 0; m < rows; ++m)
        for (int g = 0; g < panels; ++g) {
            const int64_t first = (p + g) * PANEL, valid = outs - first < PANEL ? outs - first : PANEL;
            memcpy(y + m * outs + first, done + (m * panels + g) * PANEL, (size_t)valid * sizeof(float));
        }
}

/* AVX-512: M rows, G panels at once (M * G accumulators of 16 lanes). */
#define Z_KERNEL(M, G)                                                                                           \
    __attribute__((target("avx512f"))) static int64_t z_##M##_##G(const float *x, const float *packed, float *y,   \
                                                                  int64_t k_len, int64_t outs, int64_t p) {       \
        const int64_t panels = (outs + PANEL - 1) / PANEL;                                                      \
        for (; p + G <= panels; p += G) {                                                                       \
            const float *wp = packed + p * k_len * PANEL;                                                       \
            __m512 acc[M][G];                                                                                   \
            for (int m = 0; m < M; ++m)                                                                         \
                for (int g = 0; g < G; ++g) acc[m][g] = _mm512_setzero_ps();                                    \
            for (int64_t k = 0; k < k_len; ++k) {                                                               \
                __m512 w[G];                                                                                    \
                for (int g = 0; g < G; ++g) w[g] = _mm512_loadu_ps(wp + (g * k_len + k) * PANEL);                \
                for (int m = 0; m < M; ++m) {                                                                   \
                    const __m512 xb = _mm512_set1_ps(x[m * k_len + k]);                                         \
                    for (int g = 0; g < G; ++g) acc[m][g] = _mm512_fmadd_ps(w[g], xb, acc[m][g]);                \
                }                                                                                               \
            }                                                                                                   \
            float done[M][G][PANEL];                                                                            \
            for (int m = 0; m < M; ++m)                                                                         \
                for (int g = 0; g < G; ++g) _mm512_storeu_ps(done[m][g], acc[m][g]);                            \
            store_panels(y, &done[0][0][0], M, G, p, outs);                                                     \
        }                                                                                                       \
        return p;                                                                                               \
    }

/* AVX2: the same, each panel two 8-lane halves. */
#define Y_KERNEL(M, G)                                                                                           \
    static int64_t y_##M##_##G(const float *x, const float *packed, float *y, int64_t k_len, int64_t outs,        \
                               int64_t p) {                                                                      \
        const int64_t panels = (outs + PANEL - 1) / PANEL;                                                      \
        for (; p + G <= panels; p += G) {                                                                       \
            const float *wp = packed + p * k_len * PANEL;                                                       \
            __m256 acc[M][G][2];                                                                                \
            for (int m = 0; m < M; ++m)                                                                         \
                for (int g = 0; g < G; ++g) acc[m][g][0] = acc[m][g][1] = _mm256_setzero_ps();                  \
            for (int64_t k = 0; k < k_len; ++k) {                                                               \
                __m256 w[G][2];                                                                                 \
                for (int g = 0; g < G; ++g) {                                                                   \
                    w[g][0] = _mm256_loadu_ps(wp + (g * k_len + k) * PANEL);                                    \
                    w[g][1] = _mm256_loadu_ps(wp + (g * k_len + k) * PANEL + 8);                                \
                }                                                                                               \
                for (int m = 0; m < M; ++m) {                                                                   \
                    const __m256 xb = _mm256_broadcast_ss(x + m * k_len + k);                                   \
                    for (int g = 0; g < G; ++g) {                                                               \
                        acc[m][g][0] = _mm256_fmadd_ps(w[g][0], xb, acc[m][g][0]);                              \
                        acc[m][g][1] = _mm256_fmadd_ps(w[g][1], xb, acc[m][g][1]);                              \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
            float done[M][G][PANEL];                                                                            \
            for (int m = 0; m < M; ++m)                                                                         \
                for (int g = 0; g < G; ++g) {                                                                   \
                    _mm256_storeu_ps(done[m][g], acc[m][g][0]);                                                 \
                    _mm256_storeu_ps(done[m][g] + 8, acc[m][g][1]);                                             \
                }                                                                                               \
            store_panels(y, &done[0][0][0], M, G, p, outs);                                                     \
        }                                                                                                       \
        return p;                                                                                               \
    }

/* Panels at once per row count: enough independent accumulators to keep both FMA units busy, few enough to stay in
 * registers (32 with AVX-512, 16 with AVX2). Then one panel at a time for what is left. */
Z_KERNEL(1, 8) Z_KERNEL(2, 4) Z_KERNEL(3, 4) Z_KERNEL(4, 4) Z_KERNEL(5, 4) Z_KERNEL(6, 4) Z_KERNEL(7, 2)
Z_KERNEL(8, 2) Z_KERNEL(1, 1) Z_KERNEL(2, 1) Z_KERNEL(3, 1) Z_KERNEL(4, 1) Z_KERNEL(5, 1) Z_KERNEL(6, 1)
Z_KERNEL(7, 1) Z_KERNEL(8, 1)
Y_KERNEL(1, 6) Y_KERNEL(2, 3) Y_KERNEL(3, 1) Y_KERNEL(4, 1) Y_KERNEL(5, 1) Y_KERNEL(6, 1) Y_KERNEL(1, 1)
Y_KERNEL(2, 1)

static int has_avx512 = -1;

/* 1 = AVX-512 where the CPU has it (the default), 0 = AVX2 only (tests compare the two). */
int packed_matmul_use_avx512(int wanted) {
    __builtin_cpu_init();  /* (a library loaded by dlopen: its CPU model may not be read yet) */
    has_avx512 = wanted && __builtin_cpu_supports("avx512f");
    return has_avx512;
}

/* x [rows, k_len], packed [ceil(outs / 16), k_len, 16], y [rows, outs], contiguous float32. Returns 0, or -1 for a
 * row count outside 1-8. */
int packed_matmul(const float *x, const float *packed, float *y, int64_t rows, int64_t k_len, int64_t outs) {
    if (rows < 1 || rows > 8) return -1;
    if (has_avx512 < 0) packed_matmul_use_avx512(1);
    if (has_avx512) {
        switch (rows) {
            case 1: z_1_1(x, packed, y, k_len, outs, z_1_8(x, packed, y, k_len, outs, 0)); return 0;
            case 2: z_2_1(x, packed, y, k_len, outs, z_2_4(x, packed, y, k_len, outs, 0)); return 0;
            case 3: z_3_1(x, packed, y, k_len, outs, z_3_4(x, packed, y, k_len, outs, 0)); return 0;
            case 4: z_4_1(x, packed, y, k_len, outs, z_4_4(x, packed, y, k_len, outs, 0)); return 0;
            case 5: z_5_1(x, packed, y, k_len, outs, z_5_4(x, packed, y, k_len, outs, 0)); return 0;
            case 6: z_6_1(x, packed, y, k_len, outs, z_6_4(x, packed, y, k_len, outs, 0)); return 0;
            case 7: z_7_1(x, packed, y, k_len, outs, z_7_2(x, packed, y, k_len, outs, 0)); return 0;
            default: z_8_1(x, packed, y, k_len, outs, z_8_2(x, packed, y, k_len, outs, 0)); return 0;
        }
    }
    switch (rows) {
        case 1: y_1_1(x, packed, y, k_len, outs, y_1_6(x, packed, y, k_len, outs, 0)); return 0;
        case 2: y_2_1(x, packed, y, k_len, outs, y_2_3(x, packed, y, k_len, outs, 0)); return 0;
        case 3: y_3_1(x, packed, y, k_len, outs, 0); return 0;
        case 4: y_4_1(x, packed, y, k_len, outs, 0); return 0;
        case 5: y_5_1(x, packed, y, k_len, outs, 0); return 0;
        case 6: y_6_1(x, packed, y, k_len, outs, 0); return 0;
        default: /* 7 or 8 rows: 4 now, the rest after (more would not fit AVX2's 16 registers) */
            y_4_1(x, packed, y, k_len, outs, 0);
            return packed_matmul(x + 4 * k_len, packed, y + 4 * outs, rows - 4, k_len, outs);
    }
}
