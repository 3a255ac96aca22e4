// The cuda backend's device kernels for an LLM's library ops (backends/cuda/llm.py plans and
// launches them): quantized matmul (4/8-bit affine groups, MLX's layout), rotary embedding,
// scaled dot-product attention over [a key/value cache, the new keys] (batched decoding's
// per-row cache lengths and slots included), row gathers (embeddings) and slab copies
// (concatenation). Follows the CUDA prelude (bz_args, int64_t, bz_shfl) and half.h (bz_h2f).
// Math in float32, as the numpy reference computes these ops.

// ---------------------------------------------------------------- helpers
#define BZ_NEG_INF bz_ffrom(0xff800000u)  // (NVRTC has no <math.h> and no INFINITY)
template <class T>
static __device__ __forceinline__ float bz_ld(const T* p, int64_t i) {
    return (float)p[i];
}
template <>
__device__ __forceinline__ float bz_ld<uint16_t>(const uint16_t* p, int64_t i) {
    return bz_h2f(p[i]);  // float16 stored as its bits
}

static __device__ __forceinline__ float bz_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += bz_shfl(v, o);
    return v;
}

// every thread of the block gets the block's sum (max with IS_MAX); sm: 32 floats
template <bool IS_MAX>
static __device__ __forceinline__ float bz_block_all(float v, float* sm) {
    for (int o = 16; o > 0; o >>= 1) {
        const float w = bz_shfl(v, o);
        v = IS_MAX ? (w > v ? w : v) : v + w;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sm[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < (blockDim.x >> 5) ? sm[threadIdx.x] : (IS_MAX ? BZ_NEG_INF : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            const float w = bz_shfl(v, o);
            v = IS_MAX ? (w > v ? w : v) : v + w;
        }
        if (threadIdx.x == 0) sm[0] = v;
    }
    __syncthreads();
    const float r = sm[0];
    __syncthreads();
    return r;
}

// ---------------------------------------------------------------- quantized matmul
// y (M, N) = x (M, K) @ dequantize(wq, s, b).T: one warp per output element (grid-stride over
// the M x N of them); lane l reads the packed words l, l + 32, ... of the weight row (a word
// holds 32/BITS codes of one group), and the lanes' sums meet through warp shuffles.
// args: (unused), M, N, K, group size
template <int BITS, class S>
static __device__ __forceinline__ void bz_qmm(const float* __restrict__ x,
                                              const uint32_t* __restrict__ wq,
                                              const S* __restrict__ sc, const S* __restrict__ bi,
                                              float* y, const bz_args<5> bz_a) {
    const int64_t M = bz_a.a[1], N = bz_a.a[2], K = bz_a.a[3], gs = bz_a.a[4];
    const int per = 32 / BITS;
    const int64_t words = K / per, groups = K / gs;
    const int64_t lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t o = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); o < M * N;
         o += warps) {
        const int64_t m = o / N, n = o % N;
        const float* xr = x + m * K;
        const uint32_t* wr = wq + n * words;
        float acc = 0.0f;
        for (int64_t w = lane; w < words; w += 32) {
            const uint32_t q = wr[w];
            const int64_t k0 = w * per, g = k0 / gs;
            float dot = 0.0f, xs = 0.0f;
            for (int i = 0; i < per; ++i) {
                const float xv = xr[k0 + i];
                dot += (float)((q >> (i * BITS)) & ((1u << BITS) - 1u)) * xv;
                xs += xv;
            }
            acc += bz_ld(sc, n * groups + g) * dot + bz_ld(bi, n * groups + g) * xs;
        }
        acc = bz_warp_sum(acc);
        if (lane == 0) y[o] = acc;
    }
}

extern "C" __global__ void __launch_bounds__(256)
    bz_qmm4_h(const float* __restrict__ b0, const uint32_t* __restrict__ b1,
              const uint16_t* __restrict__ b2, const uint16_t* __restrict__ b3, float* b4,
              const bz_args<5> bz_a) {
    bz_qmm<4, uint16_t>(b0, b1, b2, b3, b4, bz_a);
}
extern "C" __global__ void __launch_bounds__(256)
    bz_qmm8_h(const float* __restrict__ b0, const uint32_t* __restrict__ b1,
              const uint16_t* __restrict__ b2, const uint16_t* __restrict__ b3, float* b4,
              const bz_args<5> bz_a) {
    bz_qmm<8, uint16_t>(b0, b1, b2, b3, b4, bz_a);
}
extern "C" __global__ void __launch_bounds__(256)
    bz_qmm4_f(const float* __restrict__ b0, const uint32_t* __restrict__ b1,
              const float* __restrict__ b2, const float* __restrict__ b3, float* b4,
              const bz_args<5> bz_a) {
    bz_qmm<4, float>(b0, b1, b2, b3, b4, bz_a);
}
extern "C" __global__ void __launch_bounds__(256)
    bz_qmm8_f(const float* __restrict__ b0, const uint32_t* __restrict__ b1,
              const float* __restrict__ b2, const float* __restrict__ b3, float* b4,
              const bz_args<5> bz_a) {
    bz_qmm<8, float>(b0, b1, b2, b3, b4, bz_a);
}

// ---------------------------------------------------------------- rotary embedding
// x, y (R, T, D) float32; the first `dims` features of each row rotate by the angles
// (offset + t) * scale * base**(-2i/dims) (positions and frequencies rounded to float32 first,
// as the reference's tables); one offset, or one per group of R / B rows (per_row).
// args: (unused), R, T, D, dims, traditional, per_row, rows per offset, base (double bits),
// scale (double bits)
template <class O>
static __device__ __forceinline__ void bz_rope(const float* __restrict__ x,
                                               const O* __restrict__ off, float* y,
                                               const bz_args<10> bz_a) {
    const int64_t R = bz_a.a[1], T = bz_a.a[2], D = bz_a.a[3], dims = bz_a.a[4];
    const bool trad = bz_a.a[5] != 0, per_row = bz_a.a[6] != 0;
    const int64_t rpo = bz_a.a[7];
    const double base = bz_dfrom((uint64_t)bz_a.a[8]), scale = bz_dfrom((uint64_t)bz_a.a[9]);
    const int64_t half = dims / 2, total = R * T * D;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d = e % D, t = e / D % T, r = e / (D * T);
        const float* row = x + (e - d);
        if (d >= dims) {
            y[e] = row[d];
            continue;
        }
        const int64_t i = trad ? d / 2 : d % half;
        const bool first = trad ? (d % 2 == 0) : (d < half);
        const float a = trad ? row[2 * i] : row[i], b = trad ? row[2 * i + 1] : row[i + half];
        const int64_t p = (int64_t)off[per_row ? r / rpo : 0] + t;
        const float pos = (float)p * (float)scale;
        const float inv = (float)pow(base, -(double)(2 * i) / (double)dims);
        const float th = pos * inv, c = cosf(th), s = sinf(th);
        y[e] = first ? a * c + b * -s : b * c + a * s;
    }
}
extern "C" __global__ void __launch_bounds__(256)
    bz_rope_i32(const float* __restrict__ b0, const int32_t* __restrict__ b1, float* b2,
                const bz_args<10> bz_a) {
    bz_rope<int32_t>(b0, b1, b2, bz_a);
}
extern "C" __global__ void __launch_bounds__(256)
    bz_rope_i64(const float* __restrict__ b0, const int64_t* __restrict__ b1, float* b2,
                const bz_args<10> bz_a) {
    bz_rope<int64_t>(b0, b1, b2, bz_a);
}

// ---------------------------------------------------------------- attention
// One block per query row (b, h, t) of q (B, Hq, T, D): its scores over [the first n_b rows of
// its cache slot, the S new keys] in shared memory (at most BZ_SDPA_KEYS of them: the planner
// sends longer rows to the host), softmax, then the weighted sum of values, feature by
// feature. Grouped-query heads: head h reads key head h / (Hq / Hkv). n_b: the cache length
// (one, or one per row: per_row), clamped to [0, P]; the slot: idx[b] (clamped) or b. Causal:
// with a cache, new key j is seen by query t when j <= t; without one, key j when
// j <= S - T + t. A row that sees no key gets NaN (the reference's softmax over nothing).
// args: (unused), B, Hq, Hkv, T, S, D, Dv, P, Bp, has_past, per_row, has_idx, causal,
// scale (float bits)
#define BZ_SDPA_KEYS 4096
template <class PT, class LT>
static __device__ __forceinline__ void bz_sdpa(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    const PT* __restrict__ pk, const PT* __restrict__ pv, const LT* __restrict__ lens,
    const LT* __restrict__ idx, float* out, const bz_args<15> bz_a) {
    __shared__ float sc[BZ_SDPA_KEYS];
    __shared__ float sm[32];
    const int64_t B = bz_a.a[1], Hq = bz_a.a[2], Hkv = bz_a.a[3], T = bz_a.a[4], S = bz_a.a[5];
    const int64_t D = bz_a.a[6], Dv = bz_a.a[7], P = bz_a.a[8], Bp = bz_a.a[9];
    const bool has_past = bz_a.a[10] != 0, per_row = bz_a.a[11] != 0, has_idx = bz_a.a[12] != 0;
    const bool causal = bz_a.a[13] != 0;
    const float scale = bz_ffrom((uint32_t)bz_a.a[14]);
    for (int64_t row = blockIdx.x; row < B * Hq * T; row += gridDim.x) {
        const int64_t t = row % T, h = row / T % Hq, b = row / (T * Hq);
        const int64_t kh = h / (Hq / Hkv);
        int64_t n = 0, slot = b;
        if (has_past) {
            n = (int64_t)lens[per_row ? b : 0];
            n = n < 0 ? 0 : (n > P ? P : n);
            if (has_idx) {
                slot = (int64_t)idx[b];
                slot = slot < 0 ? 0 : (slot > Bp - 1 ? Bp - 1 : slot);
            }
        }
        const int64_t L = n + S;
        const float* qr = q + row * D;
        const PT* pkr = pk + (slot * Hkv + kh) * P * D;
        const PT* pvr = pv + (slot * Hkv + kh) * P * Dv;
        const float* kr = k + (b * Hkv + kh) * S * D;
        const float* vr = v + (b * Hkv + kh) * S * Dv;
        float mx = BZ_NEG_INF;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
            bool seen = true;
            if (causal) seen = has_past ? (j < n || j - n <= t) : (j <= S - T + t);
            float s = BZ_NEG_INF;
            if (seen) {
                float acc = 0.0f;
                if (j < n) {
                    for (int64_t d = 0; d < D; ++d) acc += qr[d] * bz_ld(pkr, j * D + d);
                } else {
                    for (int64_t d = 0; d < D; ++d) acc += qr[d] * kr[(j - n) * D + d];
                }
                s = acc * scale;
            }
            sc[j] = s;
            mx = s > mx ? s : mx;
        }
        mx = bz_block_all<true>(mx, sm);
        float den = 0.0f;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
            const float e = expf(sc[j] - mx);
            sc[j] = e;
            den += e;
        }
        den = bz_block_all<false>(den, sm);
        for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
            float acc = 0.0f;
            for (int64_t j = 0; j < L; ++j)
                acc += sc[j] * (j < n ? bz_ld(pvr, j * Dv + d) : vr[(j - n) * Dv + d]);
            out[row * Dv + d] = acc / den;
        }
        __syncthreads();  // (sc is rewritten by the block's next row)
    }
}
extern "C" __global__ void __launch_bounds__(128)
    bz_sdpa_f_i32(const float* __restrict__ b0, const float* __restrict__ b1,
                  const float* __restrict__ b2, const float* __restrict__ b3,
                  const float* __restrict__ b4, const int32_t* __restrict__ b5,
                  const int32_t* __restrict__ b6, float* b7, const bz_args<15> bz_a) {
    bz_sdpa<float, int32_t>(b0, b1, b2, b3, b4, b5, b6, b7, bz_a);
}
extern "C" __global__ void __launch_bounds__(128)
    bz_sdpa_f_i64(const float* __restrict__ b0, const float* __restrict__ b1,
                  const float* __restrict__ b2, const float* __restrict__ b3,
                  const float* __restrict__ b4, const int64_t* __restrict__ b5,
                  const int64_t* __restrict__ b6, float* b7, const bz_args<15> bz_a) {
    bz_sdpa<float, int64_t>(b0, b1, b2, b3, b4, b5, b6, b7, bz_a);
}
extern "C" __global__ void __launch_bounds__(128)
    bz_sdpa_h_i32(const float* __restrict__ b0, const float* __restrict__ b1,
                  const float* __restrict__ b2, const uint16_t* __restrict__ b3,
                  const uint16_t* __restrict__ b4, const int32_t* __restrict__ b5,
                  const int32_t* __restrict__ b6, float* b7, const bz_args<15> bz_a) {
    bz_sdpa<uint16_t, int32_t>(b0, b1, b2, b3, b4, b5, b6, b7, bz_a);
}
extern "C" __global__ void __launch_bounds__(128)
    bz_sdpa_h_i64(const float* __restrict__ b0, const float* __restrict__ b1,
                  const float* __restrict__ b2, const uint16_t* __restrict__ b3,
                  const uint16_t* __restrict__ b4, const int64_t* __restrict__ b5,
                  const int64_t* __restrict__ b6, float* b7, const bz_args<15> bz_a) {
    bz_sdpa<uint16_t, int64_t>(b0, b1, b2, b3, b4, b5, b6, b7, bz_a);
}

// ---------------------------------------------------------------- data movement
// y[i] = x[idx[i]] for rows of `row` bytes (indices checked and wrapped on the host first);
// args: (unused), rows of y, bytes per row, rows of x
template <class I>
static __device__ __forceinline__ void bz_gather_rows(const uint8_t* __restrict__ x,
                                                      const I* __restrict__ idx, uint8_t* y,
                                                      const bz_args<4> bz_a) {
    const int64_t n = bz_a.a[1], row = bz_a.a[2], rows = bz_a.a[3];
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n * row;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = (int64_t)idx[e / row];
        r = r < 0 ? r + rows : r;
        y[e] = x[r * row + e % row];
    }
}
extern "C" __global__ void __launch_bounds__(256)
    bz_gather_rows_i32(const uint8_t* __restrict__ b0, const int32_t* __restrict__ b1, uint8_t* b2,
                       const bz_args<4> bz_a) {
    bz_gather_rows<int32_t>(b0, b1, b2, bz_a);
}
extern "C" __global__ void __launch_bounds__(256)
    bz_gather_rows_i64(const uint8_t* __restrict__ b0, const int64_t* __restrict__ b1, uint8_t* b2,
                       const bz_args<4> bz_a) {
    bz_gather_rows<int64_t>(b0, b1, b2, bz_a);
}

// dst[o, at + i] = src[o, i] over `outer` slabs (bytes): one operand of a concatenation.
// args: (unused), outer, bytes per slab of src, bytes per slab of dst, byte offset in dst
extern "C" __global__ void __launch_bounds__(256)
    bz_copy_slabs(const uint8_t* __restrict__ b0, uint8_t* b1, const bz_args<5> bz_a) {
    const int64_t outer = bz_a.a[1], inner = bz_a.a[2], stride = bz_a.a[3], at = bz_a.a[4];
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < outer * inner;
         e += (int64_t)gridDim.x * blockDim.x)
        b1[e / inner * stride + at + e % inner] = b0[e];
}

// y = x seen through a strided view (up to 8 dims; strides and offset in elements of `item`
// bytes): a view the device cannot take as a pointer (a transpose, heads split out of rows)
// materialized on the device. args: (unused), dims, elements, item bytes, offset, shape[8],
// strides[8]
extern "C" __global__ void __launch_bounds__(256)
    bz_strided_copy(const uint8_t* __restrict__ b0, uint8_t* b1, const bz_args<21> bz_a) {
    const int64_t nd = bz_a.a[1], total = bz_a.a[2], item = bz_a.a[3], off = bz_a.a[4];
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t rest = e, src = off;
        for (int64_t d = nd - 1; d >= 0; --d) {
            const int64_t n = bz_a.a[5 + d];
            src += rest % n * bz_a.a[13 + d];
            rest /= n;
        }
        if (item == 4) {
            ((uint32_t*)b1)[e] = ((const uint32_t*)b0)[src];
        } else if (item == 2) {
            ((uint16_t*)b1)[e] = ((const uint16_t*)b0)[src];
        } else if (item == 8) {
            ((uint64_t*)b1)[e] = ((const uint64_t*)b0)[src];
        } else {
            for (int64_t i = 0; i < item; ++i) b1[e * item + i] = b0[src * item + i];
        }
    }
}

// y[i] = start + i * step (an arange leaf: a position table), integers exact in int64 then
// narrowed, floats in double then rounded (the reference's order). args: (unused), n, kind
// (0: int32, 1: int64, 2: float32, 3: float64), start and step (int64, or double bits)
extern "C" __global__ void __launch_bounds__(256) bz_arange(uint8_t* b0, const bz_args<5> bz_a) {
    const int64_t n = bz_a.a[1], kind = bz_a.a[2];
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (kind < 2) {
            const int64_t v = bz_a.a[3] + i * bz_a.a[4];
            if (kind == 0)
                ((int32_t*)b0)[i] = (int32_t)v;
            else
                ((int64_t*)b0)[i] = v;
        } else {
            const double v =
                bz_dfrom((uint64_t)bz_a.a[3]) + (double)i * bz_dfrom((uint64_t)bz_a.a[4]);
            if (kind == 2)
                ((float*)b0)[i] = (float)v;
            else
                ((double*)b0)[i] = v;
        }
    }
}

// ---------------------------------------------------------------- pooling
// (a convolutional network's, beside the LLM's ops) One output element per thread of a
// channels-last float32 x (N, D0, D1, D2, C) (fewer spatial dims padded with size-1 dims in
// front), the taps in row-major order (the cpu kernel's rules: the reference's bits): max
// (mode 0) from -inf as numpy's maximum (v > m or v NaN: v), padded taps skipped; sum (mode 1)
// from -0.0, a padded tap adding +0.0. args: (unused), N, C, in[3], k[3], out[3], stride[3],
// dilation[3], pad_lo[3], mode
extern "C" __global__ void __launch_bounds__(256)
    bz_pool_f32(const float* __restrict__ b0, float* b1, const bz_args<22> bz_a) {
    const int64_t N = bz_a.a[1], C = bz_a.a[2];
    const int64_t *in = bz_a.a + 3, *k = bz_a.a + 6, *out = bz_a.a + 9, *st = bz_a.a + 12;
    const int64_t *dil = bz_a.a + 15, *lo = bz_a.a + 18;
    const bool sum = bz_a.a[21] == 1;
    const int64_t total = N * out[0] * out[1] * out[2] * C;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = e % C, o2 = e / C % out[2], o1 = e / C / out[2] % out[1];
        const int64_t o0 = e / C / out[2] / out[1] % out[0], b = e / C / out[2] / out[1] / out[0];
        float m = sum ? -0.0f : -bz_inf();
        for (int64_t k0 = 0; k0 < k[0]; ++k0) {
            const int64_t i0 = o0 * st[0] + k0 * dil[0] - lo[0];
            for (int64_t k1 = 0; k1 < k[1]; ++k1) {
                const int64_t i1 = o1 * st[1] + k1 * dil[1] - lo[1];
                for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i2 = o2 * st[2] + k2 * dil[2] - lo[2];
                    const bool inside =
                        i0 >= 0 && i0 < in[0] && i1 >= 0 && i1 < in[1] && i2 >= 0 && i2 < in[2];
                    if (!inside) {
                        if (sum) m = m + 0.0f;
                        continue;
                    }
                    const float v = b0[(((b * in[0] + i0) * in[1] + i1) * in[2] + i2) * C + c];
                    m = sum ? m + v : (m > v || m != m ? m : v);  // numpy's maximum(m, v)
                }
            }
        }
        b1[e] = m;
    }
}
