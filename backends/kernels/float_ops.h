// Float ops with numpy's semantics for the generated kernels (graph/ops/elementwise.py names
// them per op), for T = float and double (Metal: float): templates over the prelude's
// overloaded math (bz_exp, bz_log1p, bz_fabs, bz_floor, bz_fmod, bz_copysign, bz_isinf).
// Written in the vocabulary of a dialect prelude (cpu_prelude.h, cuda_prelude.h, ...).
template <class T>
BZ_FN T bz_sigmoid(T x) {
    const T e = bz_exp(-bz_fabs(x));
    return x >= 0 ? (T)1 / ((T)1 + e) : e / ((T)1 + e);
}
// x ** y with the answers of the exponents braze's identities rewrite (x * x, 1, 1 / x:
// graph/passes/identities.py), so a rewrite never changes a result (libm's pow(sNaN, 0) is
// NaN, and powf is not always correctly rounded)
template <class T>
BZ_FN T bz_fpow(T x, T y) {  // (pow called unconditionally: a conditional call stays scalar)
    const T p = bz_pow(x, y);
    return y == 0 ? (T)1 : (y == 2 ? x * x : (y == -1 ? (T)1 / x : p));
}
template <class T>
BZ_FN T bz_fsign(T x) {
    return x > 0 ? (T)1 : (x < 0 ? (T)-1 : (x == 0 ? (T)0 : x));
}
// a comparison of the bits: gcc 12 ICEs vectorizing the shift __builtin_signbit becomes on
// values loaded from bfloat16
BZ_FN bool bz_signbit(float x) { return (int32_t)bz_fbits(x) < 0; }
#if BZ_HAS_DOUBLE
BZ_FN bool bz_signbit(double x) { return (int64_t)bz_dbits(x) < 0; }
#endif
// a when it is NaN, else m. float and double select by bit masks (the same results): as a
// conditional, gcc 12 merges a chain of them (a max pool's nine values) into a tangle of mask
// moves and blends; other types keep the select.
template <class T>
BZ_FN T bz_nan_or(T a, T m) {
    return a != a ? a : m;
}
BZ_FN float bz_nan_or(float a, float m) {
    const uint32_t k = 0u - (uint32_t)(a != a);
    return bz_ffrom((bz_fbits(a) & k) | (bz_fbits(m) & ~k));
}
#if BZ_HAS_DOUBLE
BZ_FN double bz_nan_or(double a, double m) {
    const uint64_t k = 0ull - (uint64_t)(a != a);
    return bz_dfrom((bz_dbits(a) & k) | (bz_dbits(m) & ~k));
}
#endif
// NaN wins. Two selects, not a nested conditional: gcc 12 vectorizes neither
// ``a != a ? a : (a > b ? a : b)`` nor ``(a > b || a != a) ? a : b`` (every ReLU and max
// pool ran scalar), and does this one.
template <class T>
BZ_FN T bz_fmax(T a, T b) {
    return bz_nan_or(a, a > b ? a : b);
}
template <class T>
BZ_FN T bz_fmin(T a, T b) {
    return bz_nan_or(a, a < b ? a : b);
}
template <class T>
BZ_FN T bz_logaddexp(T x, T y) {
    if (x == y) return x + (T)0.693147180559945309417232121458176568;
    const T t = x - y;
    if (t > 0) return x + bz_log1p(bz_exp(-t));
    if (t <= 0) return y + bz_log1p(bz_exp(t));
    return t;
}
// numpy's npy_floor_divide / npy_divmod, with the standard's infinity cases
// (graph/ops/elementwise.py: inf // finite, finite // inf = x / y)
template <class T>
BZ_FN T bz_floordiv(T a, T b) {
    if (bz_isinf(a) != bz_isinf(b)) return (a != a || b != b) ? a + b : a / b;
    if (b == 0) return a / b;
    const T mod = bz_fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div != 0) {
        T fl = bz_floor(div);
        if (div - fl > (T)0.5) fl += 1;
        return fl;
    }
    return bz_copysign((T)0, a / b);
}
template <class T>
BZ_FN T bz_pymod(T a, T b) {  // numpy's npy_remainder
    T mod = bz_fmod(a, b);
    if (b == 0) return mod;
    if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = bz_copysign((T)0, b);
    }
    return mod;
}
