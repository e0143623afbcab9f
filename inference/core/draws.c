/* The speculative rounds' inverse-CDF draw (`inference.lessons.speculative.run.sample_index`) in C: the same head
 * of the display order, the same running sums, the same token, for a fraction of numpy's cost inside a round.
 *
 * Display order: most likely first, ties by id. The head is every token at least as likely as the `head`-th most
 * likely (ties across the cut included), which is exactly the start of that order; its running sum, added left to
 * right in double as numpy's cumsum adds, decides the draw when it passes u. Returns the token, or -1 when the head's
 * sum does not pass u (the caller then orders the whole vocabulary). */
#include <stdint.h>
#include <string.h>

static void swap_values(double *a, double *b) {
    double t = *a;
    *a = *b;
    *b = t;
}

/* The k-th largest value (k from 1) of values[0 .. n - 1], which it reorders: quickselect with a three-way
 * partition, so a row of many equal values (the zeros top-k leaves) takes one pass. */
static double kth_largest(double *values, int64_t n, int64_t k) {
    int64_t low = 0, high = n - 1, want = k - 1; /* index in descending order */
    while (low < high) {
        double pivot = values[low + (high - low) / 2];
        int64_t lt = low, i = low, gt = high; /* [low, lt): > pivot, [lt, i): == pivot, (gt, high]: < pivot */
        while (i <= gt) {
            if (values[i] > pivot) swap_values(&values[lt++], &values[i++]);
            else if (values[i] < pivot) swap_values(&values[i], &values[gt--]);
            else ++i;
        }
        if (want < lt) high = lt - 1;
        else if (want > gt) low = gt + 1;
        else return pivot;
    }
    return values[low];
}

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

/* probs [vocab] (float64), u in [0, 1), scratch: vocab doubles; ids: 2 * vocab int64s. */
int64_t head_draw(const double *probs, int64_t vocab, double u, int64_t head, double *scratch, int64_t *ids) {
    if (vocab <= 0 || head <= 0 || head > vocab) return -1;
    memcpy(scratch, probs, (size_t)vocab * sizeof(double));
    double threshold = kth_largest(scratch, vocab, head);
    int64_t count = 0;
    for (int64_t i = 0; i < vocab; ++i)
        if (probs[i] >= threshold) ids[count++] = i;
    sort_display_order(ids, ids + vocab, count, probs);
    double total = 0.0;
    for (int64_t r = 0; r < count; ++r) {
        total += probs[ids[r]];
        if (total > u) return ids[r];
    }
    return -1;
}
