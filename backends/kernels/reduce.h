// Block reductions of the GPU row kernels (backends/gpusource.py): warp (simdgroup) shuffles,
// then one value per warp through shared (threadgroup) memory, then warp 0; every thread gets
// the result. argmax/argmin keep the first index of the extreme, NaN wins. Reduction operators
// are function objects (MSL has no lambdas). Written in the vocabulary of cuda_prelude.h and
// metal_prelude.h (BZ_SHARED, BZ_THREAD, BZ_BARRIER, BZ_DEV, bz_shfl).
#define BZ_OP(name, expr)                     \
    struct name {                             \
        template <class T>                    \
        BZ_DEV T operator()(T a, T b) const { \
            return expr;                      \
        }                                     \
    }
BZ_OP(bz_add_op, (T)(a + b));
BZ_OP(bz_mul_op, (T)(a * b));
BZ_OP(bz_or_op, (T)(a | b));
BZ_OP(bz_and_op, (T)(a & b));
BZ_OP(bz_max_op, b > a ? b : a);
BZ_OP(bz_min_op, b < a ? b : a);
BZ_OP(bz_fmax_op, a != a ? a : (b != b ? b : (b > a ? b : a)));  // NaN wins
BZ_OP(bz_fmin_op, a != a ? a : (b != b ? b : (b < a ? b : a)));
template <class T, class F>
BZ_FN T bz_block_reduce(T v, T id, F f, BZ_SHARED T* sm, int64_t tid, int64_t nt) {
    for (int o = 16; o > 0; o >>= 1) v = f(v, bz_shfl(v, o));
    BZ_BARRIER
    if ((tid & 31) == 0) sm[tid >> 5] = v;
    BZ_BARRIER
    if (tid < 32) {
        v = tid < (nt >> 5) ? sm[tid] : id;
        for (int o = 16; o > 0; o >>= 1) v = f(v, bz_shfl(v, o));
        if (tid == 0) sm[0] = v;
    }
    BZ_BARRIER
    return sm[0];
}
template <class T, bool MAX>
BZ_FN void bz_arg_comb(BZ_THREAD T& bv, BZ_THREAD int64_t& bi, T v, int64_t i) {
    if (i < 0) return;
    if (bi < 0) {
        bv = v;
        bi = i;
        return;
    }
    const bool bn = bv != bv, vn = v != v;
    if (bn || vn) {
        if (vn && (!bn || i < bi)) {
            bv = v;
            bi = i;
        }
        return;
    }
    if (MAX ? v > bv : v < bv) {
        bv = v;
        bi = i;
    } else if (v == bv && i < bi) {
        bi = i;
    }
}
template <class T, bool MAX>
BZ_FN int64_t bz_block_arg(T bv, int64_t bi, BZ_SHARED T* sv, BZ_SHARED int64_t* si, int64_t tid,
                           int64_t nt) {
    for (int o = 16; o > 0; o >>= 1) {
        T ov = bz_shfl(bv, o);
        int64_t oi = bz_shfl(bi, o);
        bz_arg_comb<T, MAX>(bv, bi, ov, oi);
    }
    BZ_BARRIER
    if ((tid & 31) == 0) {
        sv[tid >> 5] = bv;
        si[tid >> 5] = bi;
    }
    BZ_BARRIER
    if (tid < 32) {
        bi = -1;
        if (tid < (nt >> 5)) {
            bv = sv[tid];
            bi = si[tid];
        }
        for (int o = 16; o > 0; o >>= 1) {
            T ov = bz_shfl(bv, o);
            int64_t oi = bz_shfl(bi, o);
            bz_arg_comb<T, MAX>(bv, bi, ov, oi);
        }
        if (tid == 0) si[0] = bi;
    }
    BZ_BARRIER
    return si[0];
}
