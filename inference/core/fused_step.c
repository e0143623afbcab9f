/* A whole forward pass of 1 to 8 tokens through a float32 Llama decoder in one call: every layer's norms, products,
 * rotary embedding, attention over the KV cache, SwiGLU MLP and residuals, then the final norm and the output layer.
 *
 * Why: the bundled model's decode step is 43 products and ~150 small element-wise operations. Through torch each of
 * those is an operator call (~5-20 us of dispatch, allocation and Python), which costs more than its arithmetic
 * (5.8M multiply-adds, ~23 MB of weights that sit in L3). Here the same operations run back to back with no
 * dispatch and no allocation but a few scratch rows. The products are packed_matmul.c's kernels, so a row's
 * numbers do not depend on how many rows the pass has: a verify pass's rows equal one-token steps bit for bit.
 *
 * The cache is owned by Python: a `FixedKV` block (inference/core/fixed_cache.py), or a DynamicCache's tensors
 * where no block is in use. This reads each layer's past keys and values (rows of head_dim, kv_stride floats from one
 * K/V head to the next) and writes the new tokens' keys and values to new_k / new_v [layers][kv_heads][tokens]
 * [head_dim], which the caller appends to the block (or to the DynamicCache with cache.update). `draft_round` below
 * writes them into the block itself between its passes.
 *
 * The arithmetic is transformers' (LlamaRMSNorm, rotate_half, softmax(q k^T * scaling) v, silu(gate) * up); only
 * the order of additions inside sums differs, so logits agree to float rounding (tests: within 1e-4). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int packed_matmul(const float *x, const float *packed, float *y, int64_t rows, int64_t k_len, int64_t outs);

/* Weights, per layer l at weights[l * 6 + i]: input norm, stacked q/k/v, o, post-attention norm, stacked
 * gate/up, down. After the layers: weights[layers * 6] the final norm, weights[layers * 6 + 1] the output layer.
 * Every product's weight is packed in panels of 16 outputs (packed_matmul.c); the norms are the model's own. */
enum { INPUT_NORM, QKV, O, POST_NORM, GATE_UP, DOWN, PER_LAYER };

typedef struct {
    int64_t layers, hidden, heads, kv_heads, head_dim, intermediate, vocab;
    float eps, final_eps, scaling;
} Shape;

/* q . k over head_dim: 8 lanes then a horizontal sum (a float sum the compiler would not vectorise itself). */
static inline float dot(const float *a, const float *b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
    float sum = _mm_cvtss_f32(s);
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

/* scores[j] = (q . keys[j]) * scaling for `count` key rows of head_dim floats. Eight rows at a time: each row's
 * products in one register (head_dim / 8 fused multiply-adds), then the eight sums folded into one register
 * together; a row's numbers are the same wherever it falls in the eight. */
static void key_scores(const float *q, const float *keys, int64_t count, int64_t hd, float scaling, float *scores) {
    int64_t j = 0;
    if (hd % 8 == 0) {
        for (; j + 8 <= count; j += 8) {
            __m256 acc[8];
            for (int r = 0; r < 8; ++r) {
                const float *k = keys + (j + r) * hd;
                acc[r] = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(k));
                for (int64_t d = 8; d < hd; d += 8) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc[r]);
            }
            /* [a0..a7] -> one register of their lane sums, by pairs: the horizontal sum of each row */
            __m256 s01 = _mm256_hadd_ps(acc[0], acc[1]), s23 = _mm256_hadd_ps(acc[2], acc[3]);
            __m256 s45 = _mm256_hadd_ps(acc[4], acc[5]), s67 = _mm256_hadd_ps(acc[6], acc[7]);
            __m256 s0123 = _mm256_hadd_ps(s01, s23), s4567 = _mm256_hadd_ps(s45, s67);
            __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
            _mm256_storeu_ps(scores + j, _mm256_mul_ps(sums, _mm256_set1_ps(scaling)));
        }
    }
    for (; j < count; ++j) {  /* the last rows one at a time, in the same order of additions */
        const float *k = keys + j * hd;
        float lanes[8] = {0};
        if (hd % 8 == 0) {
            __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(k));
            for (int64_t d = 8; d < hd; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc);
            _mm256_storeu_ps(lanes, acc);
            /* hadd's order: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) */
            scores[j] = (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))) * scaling;
        } else {
            scores[j] = dot(q, k, hd) * scaling;
        }
    }
}

/* out += sum_j p[j] * values[j] over `count` rows of head_dim floats, rows in order. */
static void add_weighted(const float *p, const float *values, int64_t count, int64_t hd, float *out) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {  /* 32 dimensions in four registers across all rows */
        __m256 a0 = _mm256_loadu_ps(out + d), a1 = _mm256_loadu_ps(out + d + 8);
        __m256 a2 = _mm256_loadu_ps(out + d + 16), a3 = _mm256_loadu_ps(out + d + 24);
        for (int64_t j = 0; j < count; ++j) {
            const __m256 pj = _mm256_set1_ps(p[j]);
            const float *v = values + j * hd + d;
            a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v), a0);
            a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8), a1);
            a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 16), a2);
            a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 24), a3);
        }
        _mm256_storeu_ps(out + d, a0), _mm256_storeu_ps(out + d + 8, a1);
        _mm256_storeu_ps(out + d + 16, a2), _mm256_storeu_ps(out + d + 24, a3);
    }
    for (; d < hd; ++d)
        for (int64_t j = 0; j < count; ++j) out[d] = fmaf(p[j], values[j * hd + d], out[d]);
}

/* e^x for 8 floats: Cephes' expf (range reduction by ln 2 in two parts, a degree-5 polynomial, 2^n from the
 * exponent bits), within 2 ulp of expf over the range; inputs clamped to +-88.376 where expf over- or underflows.
 * The MLP's silu and attention's softmax call it ~5,000 times a token: one at a time, expf took ~15% of a step. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f)), _mm256_set1_ps(88.3762626647949f));
    __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* out[i] = e^(x[i] - shift); returns their sum. */
static float exp_shifted(const float *x, float shift, float *out, int64_t n) {
    __m256 total = _mm256_setzero_ps(), s = _mm256_set1_ps(shift);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
        _mm256_storeu_ps(out + i, e);
        total = _mm256_add_ps(total, e);
    }
    float buffer[8], sum = 0.0f;
    _mm256_storeu_ps(buffer, total);
    for (int k = 0; k < 8; ++k) sum += buffer[k];
    for (; i < n; ++i) sum += (out[i] = expf(x[i] - shift));
    return sum;
}

/* act[i] = silu(gate[i]) * up[i] = gate / (1 + e^-gate) * up. */
static void swiglu(const float *gate, const float *up, float *act, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 sig = _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)));
        _mm256_storeu_ps(act + i, _mm256_mul_ps(_mm256_div_ps(g, sig), _mm256_loadu_ps(up + i)));
    }
    for (; i < n; ++i) act[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void rms_norm(const float *x, const float *weight, float *out, int64_t n, float eps) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
    float scale = 1.0f / sqrtf(sum / (float)n + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * scale);
}

/* x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[half:], x[:half]); signed_sin already carries the sign. */
static void rotate(float *x, const float *cos, const float *signed_sin, int64_t head_dim, float *tmp) {
    int64_t half = head_dim / 2;
    for (int64_t d = 0; d < head_dim; ++d) tmp[d] = x[d] * cos[d] + x[d < half ? d + half : d - half] * signed_sin[d];
    memcpy(x, tmp, (size_t)head_dim * sizeof(float));
}

/* tokens rows 1..8; positions past .. past + tokens - 1; keep: logits of the last `keep` rows into logits
 * [keep][vocab]. past_k / past_v: per layer a pointer (NULL when past == 0), kv_stride floats between K/V heads.
 * Returns 0, -1 for a row count the kernels do not take, -2 when scratch memory could not be had. */
int fused_step(const Shape *s, const float *const *weights, const float *embedded, int64_t tokens, int64_t past,
               const float *cos, const float *signed_sin, const float *const *past_k, const float *const *past_v,
               const int64_t *kv_stride, float *new_k, float *new_v, int64_t keep, float *logits) {
    if (tokens < 1 || tokens > 8 || keep < 1 || keep > tokens) return -1;
    const int64_t H = s->hidden, hd = s->head_dim, nq = s->heads, nkv = s->kv_heads, I = s->intermediate;
    const int64_t q_len = nq * hd, kv_len = nkv * hd, qkv_len = q_len + 2 * kv_len, groups = nq / nkv;
    const int64_t total = past + tokens;
    float *x = malloc(sizeof(float) * tokens * H), *h = malloc(sizeof(float) * tokens * H);
    float *qkv = malloc(sizeof(float) * tokens * qkv_len), *attn = malloc(sizeof(float) * tokens * q_len);
    float *gu = malloc(sizeof(float) * tokens * 2 * I), *act = malloc(sizeof(float) * tokens * I);
    float *delta = malloc(sizeof(float) * tokens * H), *scores = malloc(sizeof(float) * total);
    float *tmp = malloc(sizeof(float) * hd);
    int status = (x && h && qkv && attn && gu && act && delta && scores && tmp) ? 0 : -2;
    if (status) goto done;
    memcpy(x, embedded, sizeof(float) * tokens * H);
    for (int64_t l = 0; l < s->layers; ++l) {
        const float *const *w = weights + l * PER_LAYER;
        float *layer_k = new_k + l * tokens * kv_len, *layer_v = new_v + l * tokens * kv_len;
        for (int64_t t = 0; t < tokens; ++t) rms_norm(x + t * H, w[INPUT_NORM], h + t * H, H, s->eps);
        packed_matmul(h, w[QKV], qkv, tokens, H, qkv_len);
        for (int64_t t = 0; t < tokens; ++t) {
            float *row = qkv + t * qkv_len;
            for (int64_t head = 0; head < nq + nkv; ++head)  /* q heads, then k heads */
                rotate(row + head * hd, cos + t * hd, signed_sin + t * hd, hd, tmp);
            for (int64_t g = 0; g < nkv; ++g) {
                memcpy(layer_k + (g * tokens + t) * hd, row + q_len + g * hd, sizeof(float) * hd);
                memcpy(layer_v + (g * tokens + t) * hd, row + q_len + kv_len + g * hd, sizeof(float) * hd);
            }
        }
        /* Row t (position past + t) attends to the past and to new rows 0..t: the same calls for every row, so a
         * row's numbers do not depend on how many rows the pass has. */
        for (int64_t t = 0; t < tokens; ++t) {
            const int64_t seen = past + t + 1;
            for (int64_t head = 0; head < nq; ++head) {
                const int64_t g = head / groups;
                const float *q = qkv + t * qkv_len + head * hd;
                const float *keys = past ? past_k[l] + g * kv_stride[l] : NULL, *values = past ? past_v[l] + g * kv_stride[l] : NULL;
                const float *new_keys = layer_k + g * tokens * hd, *new_values = layer_v + g * tokens * hd;
                if (past) key_scores(q, keys, past, hd, s->scaling, scores);
                key_scores(q, new_keys, t + 1, hd, s->scaling, scores + past);
                float top = -INFINITY;
                for (int64_t j = 0; j < seen; ++j) top = scores[j] > top ? scores[j] : top;
                const float sum = exp_shifted(scores, top, scores, seen);
                for (int64_t j = 0; j < seen; ++j) scores[j] /= sum;
                float *out = attn + t * q_len + head * hd;
                memset(out, 0, sizeof(float) * hd);
                if (past) add_weighted(scores, values, past, hd, out);
                add_weighted(scores + past, new_values, t + 1, hd, out);
            }
        }
        packed_matmul(attn, w[O], delta, tokens, q_len, H);
        for (int64_t i = 0; i < tokens * H; ++i) x[i] += delta[i];
        for (int64_t t = 0; t < tokens; ++t) rms_norm(x + t * H, w[POST_NORM], h + t * H, H, s->eps);
        packed_matmul(h, w[GATE_UP], gu, tokens, H, 2 * I);
        for (int64_t t = 0; t < tokens; ++t) swiglu(gu + t * 2 * I, gu + t * 2 * I + I, act + t * I, I);
        packed_matmul(act, w[DOWN], delta, tokens, I, H);
        for (int64_t i = 0; i < tokens * H; ++i) x[i] += delta[i];
    }
    const float *const *tail = weights + s->layers * PER_LAYER;
    for (int64_t t = tokens - keep; t < tokens; ++t) rms_norm(x + t * H, tail[0], h + (t - tokens + keep) * H, H, s->final_eps);
    packed_matmul(h, tail[1], logits, keep, H, s->vocab);
done:
    free(x), free(h), free(qkv), free(attn), free(gu), free(act), free(delta), free(scores), free(tmp);
    return status;
}

/* A draft model's round of speculative decoding in one call (`FixedCacheForward.draft_round`): the Python loop it
 * replaces paid ~0.1-0.2 ms a drafted token around a ~0.1 ms pass (each operation after a pass finds the CPU's caches
 * cold; Intel Xeon VM, 2026-12-03).
 *
 * First the catch-up pass: the `fed` tokens of `feed` (1 to 8: what the draft has not seen of the text, the last
 * committed token or two) in one fused pass, whose last logits are the first drafted token's row; or, with fed 0,
 * that row given as `first` [vocab] (the prompt's catch-up ran in Python). Then, for i = 0 .. gamma - 1: choose
 * token i from its row (temperature 0: the row's first largest logit, numpy's argmax; else `temperature_draw` with
 * uniforms[i], and the whole order where the head does not decide); stop after
 * the last, or after a token of `stop_ids`; else one fused pass of it at position past + i, whose keys and values go
 * to the cache block (past_k / past_v: each layer's first position, kv_stride floats between K/V heads) and whose
 * logits, over `rows` (the shortlist's ids, NULL: every token) and -inf elsewhere, are the next token's row.
 * Writes tokens[i], the rows logits[i] [vocab], q[i] [vocab] (sampled only) and each pass's seconds. Returns the
 * tokens drafted (one-token passes run: one fewer; pass_seconds has the catch-up's first), or fused_step's negative
 * status. */
#include <time.h>

int64_t temperature_draw(const float *logits, int64_t vocab, float temperature, double u, double *q, int64_t *ids);
int64_t whole_order_draw(const double *probs, int64_t vocab, double u, int64_t *ids);

/* Keys and values of `tokens` new positions from past on (new_k / new_v [layers][kv_heads][tokens][head_dim]) into
 * the cache block. */
static void into_block(const Shape *s, float *const *past_k, float *const *past_v, const int64_t *kv_stride,
                       const float *new_k, const float *new_v, int64_t past, int64_t tokens) {
    const int64_t hd = s->head_dim, nkv = s->kv_heads;
    for (int64_t l = 0; l < s->layers; ++l)
        for (int64_t g = 0; g < nkv; ++g)
            for (int64_t t = 0; t < tokens; ++t) {
                const int64_t from = ((l * nkv + g) * tokens + t) * hd, to = g * kv_stride[l] + (past + t) * hd;
                memcpy(past_k[l] + to, new_k + from, sizeof(float) * hd);
                memcpy(past_v[l] + to, new_v + from, sizeof(float) * hd);
            }
}

/* logits over the shortlist `rows` (s->vocab of them) at their ids in a [vocab] row, -inf elsewhere. */
static void widen(const Shape *s, const int64_t *rows, const float *short_logits, float *row, int64_t vocab) {
    for (int64_t v = 0; v < vocab; ++v) row[v] = -INFINITY;
    for (int64_t r = 0; r < s->vocab; ++r) row[rows[r]] = short_logits[r];
}

static double seconds_since(const struct timespec *started) {
    struct timespec ended;
    clock_gettime(CLOCK_MONOTONIC, &ended);
    return (double)(ended.tv_sec - started->tv_sec) + 1e-9 * (double)(ended.tv_nsec - started->tv_nsec);
}

/* One pass on the cache block (`FixedCacheForward._pass`: a plain decode step, a verify pass): the tokens' embedding
 * rows gathered here, `fused_step`, then the new keys and values written into the block at `past`. The Python around
 * the pass did the gather with torch and the copy with numpy, ~0.1-0.3 ms right after a pass (caches cold; Intel
 * Xeon VM, 2026-12-03). The same floats in the same places, so the same logits and cache. */
int block_pass(const Shape *s, const float *const *weights, const float *embed, const int64_t *ids, int64_t n,
               int64_t past, const float *cos, const float *signed_sin, float *const *past_k, float *const *past_v,
               const int64_t *kv_stride, float *new_k, float *new_v, int64_t keep, float *logits) {
    if (n < 1 || n > 8) return -1;
    float *embedded = malloc(sizeof(float) * n * s->hidden);
    if (!embedded) return -2;
    for (int64_t t = 0; t < n; ++t)
        memcpy(embedded + t * s->hidden, embed + ids[t] * s->hidden, sizeof(float) * s->hidden);
    const int status = fused_step(s, weights, embedded, n, past, cos, signed_sin, (const float *const *)past_k,
                                  (const float *const *)past_v, kv_stride, new_k, new_v, keep, logits);
    free(embedded);
    if (status == 0) into_block(s, past_k, past_v, kv_stride, new_k, new_v, past, n);
    return status;
}

int64_t draft_round(const Shape *s, const float *const *weights, const float *embed, const float *first,
                    const int64_t *feed, int64_t fed, int64_t past, const float *cos, const float *signed_sin,
                    float *const *past_k, float *const *past_v, const int64_t *kv_stride, float *new_k, float *new_v,
                    int64_t gamma, float temperature, const double *uniforms, const int64_t *rows, int64_t vocab,
                    const int64_t *stop_ids, int64_t stops, int64_t *tokens, float *logits, double *q,
                    double *pass_seconds, float *short_logits, int64_t *ids) {
    const int64_t hd = s->head_dim;
    struct timespec started;
    if (fed > 0) {  /* the catch-up pass: the tokens the draft has not seen, the last one's logits first */
        clock_gettime(CLOCK_MONOTONIC, &started);
        int status = block_pass(s, weights, embed, feed, fed, past, cos, signed_sin, past_k, past_v, kv_stride, new_k,
                                new_v, 1, rows ? short_logits : logits);
        if (status) return status;
        if (rows) widen(s, rows, short_logits, logits, vocab);
        past += fed, cos += fed * hd, signed_sin += fed * hd;
        *pass_seconds++ = seconds_since(&started);
    } else {
        memcpy(logits, first, sizeof(float) * vocab);
    }
    for (int64_t i = 0; i < gamma; ++i) {
        const float *row = logits + i * vocab;
        int64_t token = 0;
        if (temperature == 0.0f) {
            for (int64_t v = 1; v < vocab; ++v) token = row[v] > row[token] ? v : token;
        } else {
            token = temperature_draw(row, vocab, temperature, uniforms[i], q + i * vocab, ids);
            if (token < 0) token = whole_order_draw(q + i * vocab, vocab, uniforms[i], ids);
        }
        tokens[i] = token;
        int stop = i == gamma - 1;
        for (int64_t k = 0; k < stops; ++k) stop |= token == stop_ids[k];
        if (stop) return i + 1;
        clock_gettime(CLOCK_MONOTONIC, &started);
        const int64_t at = past + i;
        float *next = logits + (i + 1) * vocab;
        int status = fused_step(s, weights, embed + token * s->hidden, 1, at, cos + i * hd, signed_sin + i * hd,
                                (const float *const *)past_k, (const float *const *)past_v, kv_stride, new_k, new_v, 1,
                                rows ? short_logits : next);
        if (status) return status;
        into_block(s, past_k, past_v, kv_stride, new_k, new_v, at, 1);
        if (rows) widen(s, rows, short_logits, next, vocab);
        pass_seconds[i] = seconds_since(&started);
    }
    return gamma;
}
