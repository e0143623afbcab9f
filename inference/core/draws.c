/* A sampled draw's arithmetic in C (`inference.lessons.speculative.run`): the inverse-CDF draw of `sample_index`, and
 * the temperature stage with its float64 softmax. Both run several times a speculative round and once a plain sampled
 * step, right after a forward pass, where each torch or numpy operation finds cold caches and pays its dispatch.
 *
 * The draw. Display order: most likely first, ties by id. The head is every token with a probability of at least
 * max / 2^shift (ties across the cut included), which is exactly the start of that order: every token outside it is
 * less likely than every token inside. Its running sum, added left to right in double as numpy's cumsum adds over the
 * whole order, decides the draw when it passes u: the same sums, so the same token. The cut is tried at shifts 8, 16
 * and 24 (`HEAD_SHIFTS`), so a peaked row sorts a dozen tokens and a flat one a few hundred; returns -1 when even the
 * last head's sum does not pass u (the caller then orders the whole vocabulary). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static const int HEAD_SHIFTS[] = {8, 16, 24};

/* ids[0 .. n - 1] (increasing) into display order: a stable merge sort by descending probability, so ties keep id
 * order. Bottom-up into `spare` (n int64s) and back; no global state, so sessions on other threads draw at once. */
static void sort_display_order(int64_t *ids, int64_t *spare, int64_t n, const double *probs) {
    int64_t *from = ids, *to = spare;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t start = 0; start < n; start += 2 * width) {
            int64_t mid = start + width < n ? start + width : n, end = start + 2 * width < n ? start + 2 * width : n;
            int64_t i = start, j = mid, k = start;
            while (i < mid && j < end) to[k++] = probs[from[j]] > probs[from[i]] ? from[j++] : from[i++];
            while (i < mid) to[k++] = from[i++];
            while (j < end) to[k++] = from[j++];
        }
        int64_t *t = from;
        from = to;
        to = t;
    }
    if (from != ids) memcpy(ids, from, (size_t)n * sizeof(int64_t));
}

/* The largest of n values (NaN left out, as `v > top ? v : top` leaves it), four lanes at a time: the scans of a
 * draw were most of its cost, ~20 us of a 4,096-token row on the Intel Xeon VM (2026-12-03), where the head it sorts
 * is a dozen tokens. */
static double largest(const double *values, int64_t n) {
    __m256d lanes = _mm256_set1_pd(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) lanes = _mm256_max_pd(_mm256_loadu_pd(values + i), lanes); /* NaN: keeps lanes */
    double each[4], top = -INFINITY;
    _mm256_storeu_pd(each, lanes);
    for (int k = 0; k < 4; ++k) top = each[k] > top ? each[k] : top;
    for (; i < n; ++i) top = values[i] > top ? values[i] : top;
    return top;
}

/* The ids of the values >= threshold into ids, in id order; returns how many. */
static int64_t at_least(const double *values, int64_t n, double threshold, int64_t *ids) {
    const __m256d cut = _mm256_set1_pd(threshold);
    int64_t count = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
        int mask = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(values + i), cut, _CMP_GE_OQ));
        while (mask) {
            ids[count++] = i + __builtin_ctz(mask);
            mask &= mask - 1;
        }
    }
    for (; i < n; ++i)
        if (values[i] >= threshold) ids[count++] = i;
    return count;
}

/* probs [vocab] (float64), u in [0, 1); ids: 2 * vocab int64s of scratch. */
int64_t head_draw(const double *probs, int64_t vocab, double u, int64_t *ids) {
    if (vocab <= 0) return -1;
    const double top = largest(probs, vocab);
    if (!(top > 0.0)) return -1;
    for (size_t s = 0; s < sizeof(HEAD_SHIFTS) / sizeof(HEAD_SHIFTS[0]); ++s) {
        const double threshold = ldexp(top, -HEAD_SHIFTS[s]);
        const int64_t count = at_least(probs, vocab, threshold, ids);
        sort_display_order(ids, ids + vocab, count, probs);
        double total = 0.0;
        for (int64_t r = 0; r < count; ++r) {
            total += probs[ids[r]];
            if (total > u) return ids[r];
        }
    }
    return -1;
}

/* The whole display order's draw, where no head decides (`sample_index`'s fallback, torch's stable sort and
 * inverse_cdf_index): the first token whose running sum passes u, else the last token of positive probability.
 * Tokens of probability 0 add nothing to the sums and are left out of the sort. */
int64_t whole_order_draw(const double *probs, int64_t vocab, double u, int64_t *ids) {
    int64_t count = 0;
    for (int64_t i = 0; i < vocab; ++i)
        if (probs[i] > 0.0) ids[count++] = i;
    sort_display_order(ids, ids + vocab, count, probs);
    double total = 0.0;
    for (int64_t r = 0; r < count; ++r) {
        total += probs[ids[r]];
        if (total > u) return ids[r];
    }
    return count ? ids[count - 1] : -1;
}

/* e^x for 4 doubles, -700 <= x <= 0 (the caller sends the rest to libm's exp): x = n ln 2 + r with |r| <= ln 2 / 2
 * (ln 2 in two parts, so r is exact to ~1e-20), e^r by its Taylor series to r^13 (the first term left out is below
 * 1e-17 of e^r), 2^n from the exponent bits: within ~1 ulp of exp, with multiplies and adds only. */
__attribute__((target("avx2,fma"))) static inline __m256d exp4(__m256d x) {
    const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634073599)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
    static const double inverse_factorials[] = {
        1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
        1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,      1.0 / 24.0,      1.0 / 6.0,      0.5,
        1.0,                1.0};
    __m256d e = _mm256_set1_pd(inverse_factorials[0]);
    for (int k = 1; k < 14; ++k) e = _mm256_fmadd_pd(e, r, _mm256_set1_pd(inverse_factorials[k]));
    const __m128i n32 = _mm256_cvtpd_epi32(n);
    const __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(n32), _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(e, _mm256_castsi256_pd(bits));
}

/* The app's temperature stage and its float64 softmax, where temperature is the only stage that acts
 * (`run.temperature_alone_acts`): for each of `rows` float32 rows of `vocab` logits, x = logit / temperature divided
 * in float32 (as torch divides a float32 row by a number), then q = e^(x - max) / sum in double. A -inf logit (a
 * token a shortlist leaves out) gets exactly 0, as in torch's softmax. The exponentials are exp4's and the sums run in
 * four lanes, so q equals `run.final_probs` to float rounding (~1e-15), not bit for bit: a speculative round's draft
 * only has to draw from the q it reports (the accept rule makes the text the target's whatever q is), and a plain
 * step draws the same token but where u falls within ~1e-15 of a boundary. Torch's version costs ~0.1 ms a row right
 * after a pass (Intel Xeon VM, 2026-12-03). */
__attribute__((target("avx2,fma"))) void temperature_softmax(const float *logits, int64_t rows, int64_t vocab,
                                                            float temperature, double *q) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *row = logits + r * vocab;
        double *out = q + r * vocab, top = -INFINITY;
        /* eight divisions at once (each rounded as the one-at-a-time division rounds), widened to double exactly */
        const __m256 by = _mm256_set1_ps(temperature);
        __m256d tops = _mm256_set1_pd(-INFINITY);
        int64_t at = 0;
        for (; at + 8 <= vocab; at += 8) {
            const __m256 x = _mm256_div_ps(_mm256_loadu_ps(row + at), by);
            const __m256d low = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
            const __m256d high = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
            _mm256_storeu_pd(out + at, low);
            _mm256_storeu_pd(out + at + 4, high);
            tops = _mm256_max_pd(tops, _mm256_max_pd(low, high));
        }
        double lane_tops[4];
        _mm256_storeu_pd(lane_tops, tops);
        for (int k = 0; k < 4; ++k) top = lane_tops[k] > top ? lane_tops[k] : top;
        for (; at < vocab; ++at) {
            out[at] = (double)(row[at] / temperature);
            top = out[at] > top ? out[at] : top;
        }
        __m256d lanes = _mm256_setzero_pd();
        const __m256d shift = _mm256_set1_pd(top), floor_ = _mm256_set1_pd(-700.0);
        const __m256d minus_inf = _mm256_set1_pd(-INFINITY);
        int64_t i = 0;
        for (; i + 4 <= vocab; i += 4) {
            const __m256d x = _mm256_sub_pd(_mm256_loadu_pd(out + i), shift);
            const __m256d left_out = _mm256_cmp_pd(x, minus_inf, _CMP_EQ_OQ);  /* exactly 0 */
            const __m256d tiny = _mm256_andnot_pd(left_out, _mm256_cmp_pd(x, floor_, _CMP_LT_OQ));
            __m256d e;
            if (_mm256_movemask_pd(left_out) == 0xF) {  /* four tokens a shortlist left out */
                e = _mm256_setzero_pd();
            } else if (_mm256_movemask_pd(tiny) == 0) {
                e = _mm256_andnot_pd(left_out, exp4(_mm256_max_pd(x, floor_)));
            } else {  /* a finite logit more than 700 below the top: libm, one at a time */
                double one[4];
                _mm256_storeu_pd(one, x);
                for (int k = 0; k < 4; ++k) one[k] = exp(one[k]);
                e = _mm256_loadu_pd(one);
            }
            _mm256_storeu_pd(out + i, e);
            lanes = _mm256_add_pd(lanes, e);
        }
        double sum[4];
        _mm256_storeu_pd(sum, lanes);
        double total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
        for (; i < vocab; ++i) total += (out[i] = exp(out[i] - top));
        const double scale = 1.0 / total;  /* one rounding more than a division: still float rounding */
        for (i = 0; i < vocab; ++i) out[i] *= scale;
    }
}

/* One row: q as above into `q`, then `head_draw` on it. */
int64_t temperature_draw(const float *logits, int64_t vocab, float temperature, double u, double *q, int64_t *ids) {
    temperature_softmax(logits, 1, vocab, temperature, q);
    return head_draw(q, vocab, u, ids);
}

/* Speculative sampling's residual after a rejection, normalise(max(0, p - q)) (`run.residual_distribution`), into
 * `residual`, then `head_draw` on it. p itself where p - q has no positive part (p == q: no rejection happens there).
 * The sum runs in four lanes, as torch adds in vector lanes (not necessarily the same ones): equal to float rounding;
 * the division is torch's, element by element. */
int64_t residual_draw(const double *p, const double *q, int64_t vocab, double u, double *residual, int64_t *ids) {
    const __m256d zero = _mm256_setzero_pd();
    __m256d lanes = zero;
    int64_t i = 0;
    for (; i + 4 <= vocab; i += 4) {
        const __m256d r = _mm256_max_pd(_mm256_sub_pd(_mm256_loadu_pd(p + i), _mm256_loadu_pd(q + i)), zero);
        _mm256_storeu_pd(residual + i, r);
        lanes = _mm256_add_pd(lanes, r);
    }
    double sum[4];
    _mm256_storeu_pd(sum, lanes);
    double total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    for (; i < vocab; ++i) {
        const double r = p[i] - q[i];
        residual[i] = r > 0.0 ? r : 0.0;
        total += residual[i];
    }
    if (total > 0.0) {
        const __m256d by = _mm256_set1_pd(total);
        for (i = 0; i + 4 <= vocab; i += 4)
            _mm256_storeu_pd(residual + i, _mm256_div_pd(_mm256_loadu_pd(residual + i), by));
        for (; i < vocab; ++i) residual[i] /= total;
    } else {
        memcpy(residual, p, (size_t)vocab * sizeof(double));
    }
    return head_draw(residual, vocab, u, ids);
}

/* The k most likely tokens of a float64 row into ids (most likely first, ties by id), one pass keeping a sorted list
 * of k: a speculative round's chart names the residual's, p's and q's top tokens (torch's topk cost ~50 us a row
 * right after a pass). Returns how many (k, or vocab if smaller). */
int64_t top_tokens(const double *values, int64_t vocab, int64_t k, int64_t *ids) {
    if (k > vocab) k = vocab;
    int64_t count = 0;
    for (int64_t i = 0; i < vocab; ++i) {
        if (count == k && !(values[i] > values[ids[k - 1]])) continue;
        int64_t at = count < k ? count++ : k - 1;  /* the last place, then moved up past smaller values */
        while (at > 0 && values[i] > values[ids[at - 1]]) {
            ids[at] = ids[at - 1];
            --at;
        }
        ids[at] = i;
    }
    return count;
}

/* The residual's most likely tokens for a round's chart (`run._residual_top`): the k most likely under the residual,
 * then p, then q (`top_tokens` each), those of positive probability, each once in that order; then ranked by residual,
 * then p, both descending, ties in that order (Python's stable sort); the first k. Into top_ids [k] and top_values
 * [3 k] (p, q, residual of each); ids: 2 * vocab scratch. Returns how many. */
static int64_t residual_top(const double *residual, const double *p, const double *q, int64_t vocab, int64_t k,
                            int64_t *ids, int64_t *top_ids, double *top_values) {
    const double *rows[3] = {residual, p, q};
    int64_t *picks = ids + vocab, count = 0;
    for (int r = 0; r < 3; ++r) {
        const int64_t found = top_tokens(rows[r], vocab, k, ids);
        for (int64_t j = 0; j < found; ++j) {
            int64_t token = ids[j], seen = 0;
            for (int64_t m = 0; m < count; ++m) seen |= picks[m] == token;
            if (!seen && rows[r][token] > 0.0) picks[count++] = token;
        }
    }
    for (int64_t i = 1; i < count; ++i) { /* insertion sort: stable */
        const int64_t token = picks[i];
        int64_t at = i;
        while (at > 0 && (residual[token] > residual[picks[at - 1]] ||
                          (residual[token] == residual[picks[at - 1]] && p[token] > p[picks[at - 1]]))) {
            picks[at] = picks[at - 1];
            --at;
        }
        picks[at] = token;
    }
    if (count > k) count = k;
    for (int64_t i = 0; i < count; ++i) {
        top_ids[i] = picks[i];
        top_values[3 * i] = p[picks[i]];
        top_values[3 * i + 1] = q[picks[i]];
        top_values[3 * i + 2] = residual[picks[i]];
    }
    return count;
}

/* Speculative sampling's check of one round (`run.verify_sampled` on `probs_for_draw`'s rows, and what the round's
 * record reads from them) in one call, where temperature is the only stage acting and vocab > SHORT_ROW. After the
 * verify pass every torch or numpy operation finds cold caches: each cost ~30-300 us there on the Intel Xeon VM
 * (2026-12-03) against a few warm, and the check with its record took ~15 of them. The same numbers as that path: p
 * rows by `temperature_softmax`, the same p / q in double, the residual and its draw by `residual_draw`, the bonus by
 * `head_draw`, the chart's tokens as `_residual_top` picks them.
 *
 * logits [n + 1, vocab] float32, q [n, vocab] float64, drafted [n]; uniforms: at least n + 1, read in order (one a
 * checked token, then one for the residual or bonus draw). Out: p [n + 1, vocab] (every row), p_drafted and
 * q_drafted [n] (p and q of each drafted token: the record shows them all), ratios [n] (p / q of each checked
 * token), residual [vocab] (on a rejection), top_ids [k] and top_values [3 k] (the residual's chart, on a rejection),
 * ids 2 * vocab scratch;
 * result = {accepted, token, uniforms used, chart tokens}. The token is -1 where no head decides its draw (the caller
 * orders the whole row). */
void verify_round(const float *logits, int64_t n, int64_t vocab, float temperature, const double *q,
                  const int64_t *drafted, const double *uniforms, int64_t k, double *p, double *p_drafted,
                  double *q_drafted, double *ratios, double *residual, int64_t *top_ids, double *top_values,
                  int64_t *ids, int64_t *result) {
    temperature_softmax(logits, n + 1, vocab, temperature, p);
    for (int64_t i = 0; i < n; ++i) {
        p_drafted[i] = p[i * vocab + drafted[i]];
        q_drafted[i] = q[i * vocab + drafted[i]];
    }
    int64_t used = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double ratio = q_drafted[i] > 0.0 ? p_drafted[i] / q_drafted[i] : INFINITY;
        ratios[i] = ratio;
        if (uniforms[used++] > ratio) {
            const double *p_row = p + i * vocab, *q_row = q + i * vocab;
            result[0] = i;
            result[1] = residual_draw(p_row, q_row, vocab, uniforms[used++], residual, ids);
            result[2] = used;
            result[3] = residual_top(residual, p_row, q_row, vocab, k, ids, top_ids, top_values);
            return;
        }
    }
    result[0] = n;
    result[1] = head_draw(p + n * vocab, vocab, uniforms[used++], ids);
    result[2] = used;
    result[3] = 0;
}
