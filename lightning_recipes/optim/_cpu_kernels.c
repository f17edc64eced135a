/* Multi-tensor CPU kernels for Lion and LAMB: one OpenMP parallel region per optimizer step.
 *
 * Built on first use by lightning_recipes/optim/_native.py with the system C compiler, the CPU's vector ISA
 * and PyTorch's own OpenMP runtime (so these kernels share torch's thread pool), then loaded with ctypes.
 *
 * Every kernel receives arrays of data pointers (contiguous tensors of one dtype) and their element counts.
 * The elements of all tensors form one index space that is split into equal, cache-line aligned shares, one
 * per thread, so small tensors cost no parallel-region start of their own and large ones are split evenly.
 * Arithmetic is in the storage type (float, double) or in float for bfloat16 (rounded to nearest even on
 * store). LAMB's norms add float sums of blocks of BLOCK elements in double, in a fixed order.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SHARE_ALIGN 64       /* elements: a share boundary never splits a cache line (even for bf16) */
#define BLOCK 1024           /* LAMB: elements per block, the unit of work and of norm partial sums */
#define PARALLEL_MIN 32768   /* below this many elements per step, one thread (a parallel start costs more) */

static inline float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                              /* round to nearest even */
    return (uint16_t)(u >> 16);
}

#define IDENT(x) (x)

static inline void thread_share(int64_t total, int threads, int tid, int64_t *begin, int64_t *end) {
    int64_t per = (total + threads - 1) / threads;
    per = (per + SHARE_ALIGN - 1) / SHARE_ALIGN * SHARE_ALIGN;
    int64_t b = per * tid;
    int64_t e = b + per;
    *begin = b < total ? b : total;
    *end = e < total ? e : total;
}

/* An equal share of `total` whole blocks (a block is never split between threads). */
static inline void thread_share_blocks(int64_t total, int threads, int tid, int64_t *begin, int64_t *end) {
    const int64_t per = (total + threads - 1) / threads;
    const int64_t b = per * tid, e = b + per;
    *begin = b < total ? b : total;
    *end = e < total ? e : total;
}

/* The overlap [lo, hi) of a thread's share [begin, end) with the tensor that starts at `base`. */
static inline int overlap(int64_t begin, int64_t end, int64_t base, int64_t numel, int64_t *lo, int64_t *hi) {
    *lo = begin > base ? begin - base : 0;
    *hi = end - base < numel ? end - base : numel;
    return *lo < *hi;
}

/* ---------------------------------------------------------------------------------------------------------
 * Lion (Chen et al. 2023, Algorithm 2), per element:
 *   c = m + w1 (g - m)            (= beta1 m + (1 - beta1) g, w1 = 1 - beta1)
 *   p = p * decay - lr * sign(c)  (decay = 1 - lr * weight_decay)
 *   m = m + w2 (g - m)            (w2 = 1 - beta2)
 * One read of p, g, m and one write of p, m per element. sign(NaN) = 0, as torch.sign.
 * ------------------------------------------------------------------------------------------------------- */
#define DEFINE_LION(SUFFIX, ST, CT, LOAD, STORE)                                                           \
    void lion_##SUFFIX(int64_t n, ST *const *p, ST *const *g, ST *const *m, const int64_t *numel,           \
                       double lr, double decay, double w1, double w2, int threads) {                       \
        int64_t total = 0;                                                                                  \
        for (int64_t i = 0; i < n; i++) total += numel[i];                                                  \
        const CT lr_ = (CT)lr, decay_ = (CT)decay, w1_ = (CT)w1, w2_ = (CT)w2;                              \
        _Pragma("omp parallel num_threads(threads) if(total >= PARALLEL_MIN)")                            \
        {                                                                                                   \
            int64_t begin, end, lo, hi, base = 0;                                                           \
            thread_share(total, omp_get_num_threads(), omp_get_thread_num(), &begin, &end);                 \
            for (int64_t i = 0; i < n && base < end; base += numel[i], i++) {                               \
                if (!overlap(begin, end, base, numel[i], &lo, &hi)) continue;                               \
                ST *restrict pp = p[i];                                                                     \
                const ST *restrict gg = g[i];                                                               \
                ST *restrict mm = m[i];                                                                     \
                _Pragma("omp simd")                                                                         \
                for (int64_t j = lo; j < hi; j++) {                                                         \
                    const CT mj = LOAD(mm[j]), gj = LOAD(gg[j]);                                            \
                    const CT c = mj + w1_ * (gj - mj);                                                      \
                    const CT s = (CT)(c > (CT)0) - (CT)(c < (CT)0);                                         \
                    pp[j] = STORE(LOAD(pp[j]) * decay_ - lr_ * s);                                          \
                    mm[j] = STORE(mj + w2_ * (gj - mj));                                                    \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
    }

DEFINE_LION(f32, float, float, IDENT, IDENT)
DEFINE_LION(f64, double, double, IDENT, IDENT)
DEFINE_LION(bf16, uint16_t, float, bf16_to_float, float_to_bf16)

/* ---------------------------------------------------------------------------------------------------------
 * LAMB (You et al. 2019, Algorithm 2 with Adam's bias correction), per tensor with step t = step + 1:
 *   m = m + (1 - beta1) (g - m);   v = beta2 v + (1 - beta2) g^2
 *   u = (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^t) + eps) + wd p
 *   r = ||p|| / ||u|| if both > 0 else 1;  r = min(r, clip);   (r = 1 without layer adaptation)
 *   p = p - lr r u;   step = step + 1
 * Every tensor is cut into blocks of BLOCK elements (its last block may be shorter), and threads share out
 * whole blocks, so a block is always summed by one thread in one order: the norms, and so the whole step, are
 * bitwise the same for any number of threads. Tensors are processed in batches of consecutive tensors of about
 * `batch_numel` elements. With layer adaptation, pass A updates m and v and stores each block's sums of p^2
 * and u^2; after a barrier, pass B adds a tensor's block sums in block order, takes the trust ratio and
 * recomputes u to update p while the batch is still in cache (in reverse, so that the part of a tensor too
 * large for the cache that pass A touched last is read first). Without it, one pass does everything.
 * ------------------------------------------------------------------------------------------------------- */
/* Element j: update m and v, store them, and leave in mj, vj the stored values (what pass B will read). */
#define LAMB_MOMENTS(CT, LOAD, STORE)                \
    const CT gj = LOAD(gg[j]), pj = LOAD(pp[j]);     \
    CT mj = LOAD(mm[j]), vj = LOAD(vv[j]);           \
    mj = mj + w1_ * (gj - mj);                       \
    vj = b2_ * vj + w2_ * gj * gj;                   \
    mm[j] = STORE(mj);                               \
    vv[j] = STORE(vj);                               \
    mj = LOAD(mm[j]);                                \
    vj = LOAD(vv[j]);

#define LAMB_DIRECTION(SQRT, mj, vj, pj, i) ((mj) * ibc1[i] / (SQRT(vj) * ibc2s[i] + eps_) + wd_ * (pj))

#define DEFINE_LAMB(SUFFIX, ST, CT, LOAD, STORE, SQRT)                                                       \
    int lamb_##SUFFIX(int64_t n, ST *const *p, ST *const *g, ST *const *m, ST *const *v, float *const *step, \
                      const int64_t *numel, double lr, double beta1, double beta2, double eps, double wd,    \
                      int adapt, double clip, int threads, int64_t batch_numel) {                           \
        const size_t count = (size_t)(n > 0 ? n : 1);                                                       \
        int64_t total = 0;                                                                                  \
        int64_t *first_block = (int64_t *)malloc((count + 1) * sizeof(int64_t));                            \
        CT *ibc1 = (CT *)malloc(count * sizeof(CT));                                                        \
        CT *ibc2s = (CT *)malloc(count * sizeof(CT));                                                       \
        double *sums = NULL;                                                                                \
        if (first_block) {                                                                                  \
            first_block[0] = 0;                                                                             \
            for (int64_t i = 0; i < n; i++) {                                                               \
                total += numel[i];                                                                          \
                first_block[i + 1] = first_block[i] + (numel[i] + BLOCK - 1) / BLOCK;                       \
            }                                                                                               \
            sums = (double *)malloc((size_t)(first_block[n] > 0 ? first_block[n] : 1) * 2 * sizeof(double)); \
        }                                                                                                   \
        if (!first_block || !ibc1 || !ibc2s || !sums) {                                                     \
            free(first_block);                                                                              \
            free(ibc1);                                                                                     \
            free(ibc2s);                                                                                    \
            free(sums);                                                                                     \
            return 1;                                                                                       \
        }                                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                                   \
            const double t = (double)*step[i] + 1.0;                                                        \
            ibc1[i] = (CT)(1.0 / (1.0 - pow(beta1, t)));                                                    \
            ibc2s[i] = (CT)(1.0 / sqrt(1.0 - pow(beta2, t)));                                               \
        }                                                                                                   \
        const CT w1_ = (CT)(1.0 - beta1), b2_ = (CT)beta2, w2_ = (CT)(1.0 - beta2), eps_ = (CT)eps,          \
                 wd_ = (CT)wd;                                                                              \
        if (threads < 1) threads = 1;                                                                       \
        _Pragma("omp parallel num_threads(threads) if(total >= PARALLEL_MIN)")                            \
        {                                                                                                   \
            const int nt = omp_get_num_threads(), tid = omp_get_thread_num();                               \
            int64_t first = 0;                                                                              \
            while (first < n) {                                                                             \
                int64_t last = first, batch = 0;                                                            \
                do {                                                                                        \
                    batch += numel[last];                                                                   \
                    last++;                                                                                 \
                } while (last < n && batch + numel[last] <= batch_numel);                                   \
                int64_t begin, end, lo_b, hi_b;                                                             \
                thread_share_blocks(first_block[last] - first_block[first], nt, tid, &begin, &end);         \
                begin += first_block[first];                                                                \
                end += first_block[first];                                                                  \
                for (int64_t i = first; i < last; i++) {                                                    \
                    if (!overlap(begin, end, first_block[i], first_block[i + 1] - first_block[i],     \
                                       &lo_b, &hi_b))                                                       \
                        continue;                                                                           \
                    ST *restrict pp = p[i];                                                                 \
                    const ST *restrict gg = g[i];                                                           \
                    ST *restrict mm = m[i];                                                                 \
                    ST *restrict vv = v[i];                                                                 \
                    for (int64_t k = lo_b; k < hi_b; k++) {                                                 \
                        const int64_t b0 = k * BLOCK;                                                       \
                        const int64_t b1 = b0 + BLOCK < numel[i] ? b0 + BLOCK : numel[i];                   \
                        if (!adapt) {                                                                       \
                            const CT step_ = (CT)lr;                                                        \
                            _Pragma("omp simd")                                                             \
                            for (int64_t j = b0; j < b1; j++) {                                             \
                                LAMB_MOMENTS(CT, LOAD, STORE)                                               \
                                pp[j] = STORE(pj - step_ * LAMB_DIRECTION(SQRT, mj, vj, pj, i));            \
                            }                                                                               \
                            continue;                                                                       \
                        }                                                                                   \
                        CT block_p = (CT)0, block_u = (CT)0;                                                \
                        _Pragma("omp simd reduction(+ : block_p, block_u)")                                 \
                        for (int64_t j = b0; j < b1; j++) {                                                 \
                            LAMB_MOMENTS(CT, LOAD, STORE)                                                   \
                            const CT uj = LAMB_DIRECTION(SQRT, mj, vj, pj, i);                              \
                            block_p += pj * pj;                                                             \
                            block_u += uj * uj;                                                             \
                        }                                                                                   \
                        sums[(first_block[i] + k) * 2] = (double)block_p;                                   \
                        sums[(first_block[i] + k) * 2 + 1] = (double)block_u;                               \
                    }                                                                                       \
                }                                                                                           \
                if (adapt) {                                                                                \
                    _Pragma("omp barrier")                                                                  \
                    for (int64_t i = first; i < last; i++) {                                                \
                        if (!overlap(begin, end, first_block[i], first_block[i + 1] - first_block[i], \
                                           &lo_b, &hi_b))                                                   \
                            continue;                                                                       \
                        double sum_p = 0.0, sum_u = 0.0;                                                    \
                        for (int64_t k = first_block[i]; k < first_block[i + 1]; k++) {                     \
                            sum_p += sums[k * 2];                                                           \
                            sum_u += sums[k * 2 + 1];                                                       \
                        }                                                                                   \
                        const double w_norm = sqrt(sum_p), u_norm = sqrt(sum_u);                            \
                        double ratio = (w_norm > 0.0 && u_norm > 0.0) ? w_norm / u_norm : 1.0;              \
                        if (ratio > clip) ratio = clip;                                                     \
                        const CT step_ = (CT)(lr * ratio);                                                  \
                        ST *restrict pp = p[i];                                                             \
                        const ST *restrict mm = m[i];                                                       \
                        const ST *restrict vv = v[i];                                                       \
                        for (int64_t k = hi_b - 1; k >= lo_b; k--) {                                        \
                            const int64_t b0 = k * BLOCK;                                                   \
                            const int64_t b1 = b0 + BLOCK < numel[i] ? b0 + BLOCK : numel[i];               \
                            _Pragma("omp simd")                                                             \
                            for (int64_t j = b0; j < b1; j++) {                                             \
                                const CT pj = LOAD(pp[j]), mj = LOAD(mm[j]), vj = LOAD(vv[j]);              \
                                pp[j] = STORE(pj - step_ * LAMB_DIRECTION(SQRT, mj, vj, pj, i));            \
                            }                                                                               \
                        }                                                                                   \
                    }                                                                                       \
                }                                                                                           \
                first = last;                                                                               \
            }                                                                                               \
        }                                                                                                   \
        for (int64_t i = 0; i < n; i++) *step[i] += 1.0f;                                                   \
        free(first_block);                                                                                  \
        free(ibc1);                                                                                         \
        free(ibc2s);                                                                                        \
        free(sums);                                                                                         \
        return 0;                                                                                           \
    }

DEFINE_LAMB(f32, float, float, IDENT, IDENT, sqrtf)
DEFINE_LAMB(f64, double, double, IDENT, IDENT, sqrt)
DEFINE_LAMB(bf16, uint16_t, float, bf16_to_float, float_to_bf16, sqrtf)
