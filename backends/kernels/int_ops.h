// Integer ops with numpy's semantics for the generated kernels (graph/ops/elementwise.py
// names them per op): floor division and remainder with Python's signs and 0 for a zero
// divisor, powers with negative exponents, shifts by the bit width or more. T is the operand
// type, U its unsigned counterpart (arithmetic that wraps). Written in the vocabulary of a
// dialect prelude (cpu_prelude.h, cuda_prelude.h, metal_prelude.h).
template <class T>
BZ_FN T bz_idiv(T a, T b) {
    if (b == 0) return 0;
    if (b == (T)-1) return (T)(-a);
    T q = (T)(a / b);
    if ((T)(a % b) != 0 && ((a < 0) != (b < 0))) q = (T)(q - 1);
    return q;
}
template <class T>
BZ_FN T bz_irem(T a, T b) {
    if (b == 0 || b == (T)-1) return 0;
    T r = (T)(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
    return r;
}
template <class T, class U>
BZ_FN T bz_ipow(T a, T b) {
    if (b < 0) return a == 1 ? (T)1 : (a == (T)-1 ? (T)((b & 1) ? -1 : 1) : (T)0);
    U base = (U)a, r = 1, e = (U)b;
    while (e) {
        if (e & 1) r = (U)(r * base);
        base = (U)(base * base);
        e >>= 1;
    }
    return (T)r;
}
template <class T, class U>
BZ_FN T bz_shl(T a, T b) {
    return (b < 0 || b >= (T)(sizeof(T) * 8)) ? (T)0 : (T)((U)a << b);
}
template <class T>
BZ_FN T bz_shr(T a, T b) {
    return (b < 0 || b >= (T)(sizeof(T) * 8)) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b);
}
