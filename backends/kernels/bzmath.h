// braze's own transcendental functions, float and double: the same bits wherever they run.
//
// The generated CPU kernels call these (backends/cpu/codegen.py OWN_MATH) and so does the
// numpy tier, through braze._core (csrc/vmath.cpp, graph/ops/libm.py): a program gives the
// same result whether its first sight runs op by op, a compiled kernel runs it, at any thread
// count, at any ISA level and in the vector body or the scalar tail of a loop. That holds
// because every step is an exactly rounded IEEE operation (+ - * / sqrt and explicit fma on
// float or double, comparisons, bit moves), compiled with -ffp-contract=off (no contraction
// the compiler chooses), no libm call, no lookup by a computed index; branch-free (selects)
// so that `omp simd` loops vectorize them. The polynomials are truncated Taylor series
// (exact rational coefficients) on reduced arguments, and one minimax fit (float tanh);
// the error bounds are measured against numpy's float64/longdouble in tests/test_libm.py.
//
// The float exp, expm1, log, log1p and tanh compute in float with FMAs (about 1 ulp); the
// other float functions compute in double with the double cores and round once (correctly
// rounded but in near-ties). Written in the vocabulary of cpu_prelude.h (BZ_FN, bz_dbits,
// bz_dfrom, bz_fbits, bz_ffrom).

// 2^k for an integer-valued double k in [-1022, 1023]: k + 1023 lands in the low bits of
// 2^52 + k + 1023, and the shift moves them into the exponent field (no double -> int64
// conversion: AVX2 and SSE2 have none in vector form)
BZ_FN double bzm_pow2i(double k) { return bz_dfrom(bz_dbits(k + 4503599627371519.0) << 52); }
// the value of the integer u < 2^52 as a double (the same trick the other way round)
BZ_FN double bzm_u2d(uint64_t u) {
    return bz_dfrom(u | 0x4330000000000000ull) - 4503599627370496.0;
}
// the integer nearest x for |x| < 2^51, as a double (adding 1.5 * 2^52 rounds to nearest)
BZ_FN double bzm_round(double x) { return (x + 6755399441055744.0) - 6755399441055744.0; }

#define BZM_LN2_HI 6.93147180369123816490e-01  // ln 2 in 32 bits: k * LN2_HI is exact
#define BZM_LN2_LO 1.90821492927058770002e-10  // ln 2 - LN2_HI
#define BZM_LN2 0.693147180559945309417232121458176568
#define BZM_LOG2E 1.44269504088896340735992468100189214

// exp(r) - 1 - r for |r| <= ln(2) / 2 as r^2 (1/2! + r/3! + ... + r^(N-2)/N!), Horner
template <int N>
BZ_FN double bzm_expm1_tail(double r) {
    double q = 1.0;
    double c = 1.0;
    for (int n = 2; n <= N; n++) c *= n;  // N! (constant-folded)
    q = 1.0 / c;
    for (int n = N - 1; n >= 2; n--) {
        c /= n + 1;  // n!
        q = q * r + 1.0 / c;
    }
    return r * r * q;
}

// exp: x = k ln2 + r, exp(x) = 2^k (1 + r + tail(r)); N: the series' degree. With `exact`,
// the sums 1 + (r + tail) carry their rounding errors (Fast2Sum: |a| >= |b|, s = a + b,
// err = b - (s - a)), so only the last addition rounds: within 0.52 ulp (exp(1) is e).
template <int N, bool exact>
BZ_FN double bzm_exp_core(double x) {
    const double xc = x != x ? 0.0 : (x < -746.0 ? -746.0 : (x > 710.0 ? 710.0 : x));
    const double kd = bzm_round(xc * BZM_LOG2E);
    const double hi = xc - kd * BZM_LN2_HI, lo = kd * BZM_LN2_LO, r = hi - lo;
    const double t = bzm_expm1_tail<N>(r);
    double y;
    if (exact) {
        const double rc = (hi - r) - lo;                       // r + rc = hi - lo
        const double s = r + t, s_lo = t - (s - r);            // s + s_lo = r + t
        const double y_hi = 1.0 + s, y_lo = s - (y_hi - 1.0);  // y_hi + y_lo = 1 + s
        y = y_hi + (y_lo + (s_lo + rc * (1.0 + s)));
    } else {
        y = 1.0 + (r + t);
    }
    const double k1 = __builtin_floor(kd * 0.5);  // two steps: 2^k for k in [-1076, 1024]
    const double out = y * bzm_pow2i(k1) * bzm_pow2i(kd - k1);
    return x != x ? x : out;
}
BZ_FN double bzm_exp(double x) { return bzm_exp_core<13, true>(x); }

// expm1(x) = 2^k (1 + e) - 1 = (2^k - 1) + 2^k e, e = expm1(r) corrected for r's rounding.
// |x| < 0.7 keeps k = 0 (r = x exactly): with k = +-1 there, (2^k - 1) + 2^k e cancels.
// bzm_expm1_parts gives p = 2^k and e for k <= 56 (tanh uses both); N: the series' degree
template <int N>
BZ_FN double bzm_expm1_parts(double xc, double* p, double* kd) {
    *kd = __builtin_fabs(xc) < 0.7 ? 0.0 : bzm_round(xc * BZM_LOG2E);
    const double hi = xc - *kd * BZM_LN2_HI, lo = *kd * BZM_LN2_LO, r = hi - lo;
    const double c = (hi - r) - lo;  // r + c = hi - lo (c = 0 when k = 0)
    const double e = r + bzm_expm1_tail<N>(r);
    *p = bzm_pow2i(*kd < 1000.0 ? *kd : 1000.0);  // (a k above 56 only selects the far path)
    return e + c * (1.0 + e);
}
template <int N>
BZ_FN double bzm_expm1_core(double x) {
    const double xc = x != x ? 0.0 : (x < -40.0 ? -40.0 : (x > 710.0 ? 710.0 : x));
    double p, kd;
    const double e = bzm_expm1_parts<N>(xc, &p, &kd);
    const double k1 = __builtin_floor(kd * 0.5);
    const double near = (p - 1.0) + p * e;                                    // k <= 56
    const double far = (1.0 + e) * bzm_pow2i(k1) * bzm_pow2i(kd - k1) - 1.0;  // 2^k >> 1
    const double out = kd > 56.0 ? far : near;
    return (x != x || x == 0) ? x : out;  // NaN, and the sign of a zero
}
BZ_FN double bzm_expm1(double x) { return bzm_expm1_core<17>(x); }

// log(1 + f) for 1 + f = m in [sqrt(2)/2, sqrt(2)): with s = f / (2 + f),
// log(1 + f) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R), R = sum_{n=1..N} 2 s^2n / (2n + 1)
template <int N>
BZ_FN double bzm_log1pf_core(double f) {
    const double s = f / (2.0 + f), z = s * s;
    double R = 2.0 / (2 * N + 1);
    for (int n = N - 1; n >= 1; n--) R = R * z + 2.0 / (2 * n + 1);
    R *= z;
    const double hfsq = 0.5 * f * f;
    return f - (hfsq - s * (hfsq + R));
}
// u = 2^k m, m in [sqrt(2)/2, sqrt(2)), for positive finite u (subnormals scaled first)
BZ_FN double bzm_split(double u, double* kd) {
    const bool sub = u < 2.2250738585072014e-308;
    const uint64_t b = bz_dbits(sub ? u * 18014398509481984.0 : u);  // 2^54
    const uint64_t mant = b & 0xFFFFFFFFFFFFFull;
    const bool high = mant > 0x6A09E667F3BCDull;  // m >= sqrt(2): halve m
    *kd = bzm_u2d(b >> 52) - (high ? 1022.0 : 1023.0) - (sub ? 54.0 : 0.0);
    return bz_dfrom(mant | (high ? 0x3FE0000000000000ull : 0x3FF0000000000000ull));
}
// the special values of log and log1p at the argument u (= 1 + x for log1p)
BZ_FN double bzm_log_special(double u, double out) {
    return u != u ? u
                  : (u < 0 ? __builtin_nan("")
                           : (u == 0 ? -__builtin_inf() : (u == __builtin_inf() ? u : out)));
}
template <int N>
BZ_FN double bzm_log_core(double x) {
    double kd;
    const double m = bzm_split(x > 0 && x < __builtin_inf() ? x : 1.0, &kd);
    const double out = kd * BZM_LN2_HI + (bzm_log1pf_core<N>(m - 1.0) + kd * BZM_LN2_LO);
    return bzm_log_special(x, out);
}
BZ_FN double bzm_log(double x) { return bzm_log_core<10>(x); }

// log1p: u = 1 + x rounded, 1 + x = u + c exactly; log1p(x) = log(u) + c / u
template <int N>
BZ_FN double bzm_log1p_core(double x) {
    const double u = 1.0 + x;
    const double c = u > 2.0 ? 1.0 - (u - x) : x - (u - 1.0);
    double kd;
    const bool ok = u > 0 && u < __builtin_inf();
    const double m = bzm_split(ok ? u : 1.0, &kd);
    const double out =
        kd * BZM_LN2_HI + (bzm_log1pf_core<N>(m - 1.0) + (kd * BZM_LN2_LO + c / (ok ? u : 1.0)));
    return x == 0 ? x : bzm_log_special(u, out);
}
BZ_FN double bzm_log1p(double x) { return bzm_log1p_core<10>(x); }

// tanh |x| from t = expm1(-2|x|) = (p - 1) + p e: -t / (t + 2) for |x| < 0.55, and
// 1 - 2 E / (1 + E) with E = exp(-2|x|) = p + p e above (no cancellation near 1); the sign
// copied back (keeps -0)
template <int N>
BZ_FN double bzm_tanh_core(double x) {
    const double a = __builtin_fabs(x);
    double p, kd;
    const double e = bzm_expm1_parts<N>(-2.0 * (a < 20.0 ? a : 20.0), &p, &kd);
    const double t = (p - 1.0) + p * e, E = p + p * e;
    const double small = -t / (t + 2.0), big = 1.0 - 2.0 * E / (1.0 + E);
    const double y = a < 3.7252902984e-09 ? a : (a < 0.55 ? small : (a > 22.0 ? 1.0 : big));
    return x != x ? x : __builtin_copysign(y, x);
}
BZ_FN double bzm_tanh(double x) { return bzm_tanh_core<17>(x); }

// ---------------------------------------------------------------- float
// The float functions in float arithmetic (16 lanes per AVX-512 vector, where the double
// ones have 8) with fused multiply-adds: exactly rounded by IEEE 754, so the same bits on
// every ISA (an FMA instruction, or the C library's fmaf where the level has none).
// Polynomials: Taylor series of the reduced argument, Horner form.
#define BZM_FMA __builtin_fmaf
BZ_FN float bzm_pow2f(int32_t k) {
    return bz_ffrom((uint32_t)(k + 127) << 23);
}  // k in [-126, 127]
#define BZM_LN2_HIF 0.693145751953125f      // ln 2 in 16 bits: k * LN2_HIF is exact
#define BZM_LN2_LOF 1.428606765330187e-06f  // ln 2 - LN2_HIF

// expm1(r) - r for |r| <= 0.7: r^2 (1/2 + r/6 + ... + r^9/11!)
BZ_FN float bzm_expm1_tailf(float r) {
    float q = 2.5052108385e-08f;  // 1/11!
    q = BZM_FMA(q, r, 2.7557319224e-07f);
    q = BZM_FMA(q, r, 2.7557319224e-06f);
    q = BZM_FMA(q, r, 2.4801587302e-05f);
    q = BZM_FMA(q, r, 1.9841269841e-04f);
    q = BZM_FMA(q, r, 1.3888888889e-03f);
    q = BZM_FMA(q, r, 8.3333333333e-03f);
    q = BZM_FMA(q, r, 4.1666666667e-02f);
    q = BZM_FMA(q, r, 1.6666666667e-01f);
    q = BZM_FMA(q, r, 0.5f);
    return r * r * q;
}
// x = k ln 2 + r (|r| <= ln 2 / 2, or k = 0 for |x| < 0.7 when `wide`): r and k
BZ_FN float bzm_reduce_ln2f(float x, int32_t* k, bool wide) {
    const float kf = (wide && __builtin_fabsf(x) < 0.7f) ? 0.0f : __builtin_rintf(x * 1.44269504f);
    *k = (int32_t)kf;
    return BZM_FMA(kf, -BZM_LN2_LOF, BZM_FMA(kf, -BZM_LN2_HIF, x));
}
BZ_FN float bzm_exp(float x) {
    const float xc = x != x ? 0.0f : (x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x));
    int32_t k;
    const float r = bzm_reduce_ln2f(xc, &k, false);
    const float y = 1.0f + (r + bzm_expm1_tailf(r));
    const int32_t k1 = k >> 1;  // two steps: 2^k for k in [-150, 129]
    const float out = y * bzm_pow2f(k1) * bzm_pow2f(k - k1);
    return x != x ? x : out;
}
BZ_FN float bzm_expm1(float x) {
    const float xc = x != x ? 0.0f : (x < -40.0f ? -40.0f : (x > 89.0f ? 89.0f : x));
    int32_t k;
    const float r = bzm_reduce_ln2f(xc, &k, true);
    const float e = r + bzm_expm1_tailf(r);
    const int32_t k1 = k >> 1;
    const float p = bzm_pow2f(k < 100 ? k : 100);
    const float near = (p - 1.0f) + p * e;                                    // k <= 25
    const float far = (1.0f + e) * bzm_pow2f(k1) * bzm_pow2f(k - k1) - 1.0f;  // 2^k >> 1
    const float out = k > 25 ? far : near;
    return (x != x || x == 0) ? x : out;
}
// log(1 + f), f in [sqrt(2)/2 - 1, sqrt(2) - 1]: f - f^2/2 + s (f^2/2 + R), s = f / (2 + f)
BZ_FN float bzm_log1pf_coref(float f) {
    const float s = f / (2.0f + f), z = s * s;
    float R = 2.0f / 11.0f;
    R = BZM_FMA(R, z, 2.0f / 9.0f);
    R = BZM_FMA(R, z, 2.0f / 7.0f);
    R = BZM_FMA(R, z, 2.0f / 5.0f);
    R = BZM_FMA(R, z, 2.0f / 3.0f);
    R *= z;
    const float hfsq = 0.5f * f * f;
    return f - (hfsq - s * (hfsq + R));
}
// u = 2^k m, m in [sqrt(2)/2, sqrt(2)), for positive finite u (subnormals scaled first)
BZ_FN float bzm_splitf(float u, int32_t* k) {
    const bool sub = u < 1.17549435e-38f;
    const uint32_t b = bz_fbits(sub ? u * 16777216.0f : u);  // 2^24
    const uint32_t mant = b & 0x7FFFFFu;
    const bool high = mant > 0x3504F3u;  // m >= sqrt(2): halve m
    *k = (int32_t)(b >> 23) - (high ? 126 : 127) - (sub ? 24 : 0);
    return bz_ffrom(mant | (high ? 0x3F000000u : 0x3F800000u));
}
BZ_FN float bzm_log_specialf(float u, float out) {
    return u != u ? u
                  : (u < 0 ? __builtin_nanf("")
                           : (u == 0 ? -__builtin_inff() : (u == __builtin_inff() ? u : out)));
}
BZ_FN float bzm_log(float x) {
    int32_t k;
    const float m = bzm_splitf(x > 0 && x < __builtin_inff() ? x : 1.0f, &k);
    const float kf = (float)k;
    const float out =
        BZM_FMA(kf, BZM_LN2_HIF, BZM_FMA(kf, BZM_LN2_LOF, bzm_log1pf_coref(m - 1.0f)));
    return bzm_log_specialf(x, out);
}
BZ_FN float bzm_log1p(float x) {
    const float u = 1.0f + x;
    const float c = u > 2.0f ? 1.0f - (u - x) : x - (u - 1.0f);  // 1 + x = u + c exactly
    const bool ok = u > 0 && u < __builtin_inff();
    int32_t k;
    const float m = bzm_splitf(ok ? u : 1.0f, &k);
    const float kf = (float)k;
    const float out =
        BZM_FMA(kf, BZM_LN2_HIF,
                BZM_FMA(kf, BZM_LN2_LOF, bzm_log1pf_coref(m - 1.0f) + c / (ok ? u : 1.0f)));
    return x == 0 ? x : bzm_log_specialf(u, out);
}
// tanh: an odd polynomial below 0.625 (the minimax fit of shared/recipes/
// vector-math-example.cpp), 1 - 2 E / (1 + E) with E = exp(-2|x|) above; the sign copied back
BZ_FN float bzm_tanh(float x) {
    const float a = __builtin_fabsf(x), z = a * a;
    float q = -5.70498872745e-3f;
    q = BZM_FMA(q, z, 2.06390887954e-2f);
    q = BZM_FMA(q, z, -5.37397155531e-2f);
    q = BZM_FMA(q, z, 1.33314422036e-1f);
    q = BZM_FMA(q, z, -3.33332819422e-1f);
    const float small = BZM_FMA(q * z, a, a);
    int32_t k;
    const float r = bzm_reduce_ln2f(-2.0f * (a < 10.0f ? a : 10.0f), &k, false);
    const float E = bzm_pow2f(k) * (1.0f + (r + bzm_expm1_tailf(r)));
    const float big = 1.0f - 2.0f * E / (1.0f + E);
    const float y = a < 0.625f ? small : (a > 9.0f ? 1.0f : big);
    return x != x ? x : __builtin_copysignf(y, x);
}

// sin and cos of a float, computed in double. x = n pi/2 + r, |r| <= pi/4 (a little more):
// below 2^27 by three FMAs with pi/2 in three doubles (exact enough for every float there);
// above, Payne-Hanek: |x| = M 2^E (M < 2^24) times 2/pi's bits in 24-bit chunks from the
// first one that matters mod 4, each product exact, the sum taken mod 4 exactly and then
// to the reduced fraction (its roundings relative to it). Both ways for every lane (no
// branch: vectorizes), the one that applies selected.
// 2/pi in 24-bit chunks: 2/pi = sum_i c_i 2^(-24 (i + 1))
static const double bzm_2opi[10] = {10680707.0, 7228996.0, 1387004.0, 2578385.0,  16069853.0,
                                    12639074.0, 9804092.0, 4427841.0, 16666979.0, 11263675.0};
// chunk i0 + j for i0 in [0, 4], by selects of constants (a table lookup by i0 would be a
// gather, which GCC does not vectorize here on AVX2)
template <int j>
BZ_FN double bzm_2opi_at(double i0) {  // (i0 as a double: masks of one width)
    return i0 == 0 ? bzm_2opi[j]
                   : (i0 == 1 ? bzm_2opi[j + 1]
                              : (i0 == 2 ? bzm_2opi[j + 2]
                                         : (i0 == 3 ? bzm_2opi[j + 3] : bzm_2opi[j + 4])));
}
#define BZM_PIO2_1 1.5707963267948966
#define BZM_PIO2_2 6.123233995736766e-17
#define BZM_PIO2_3 -1.4973849048591698e-33
// n mod 4 (as a double in {0, 1, 2, 3}) and r for a = |x| (finite float)
BZ_FN double bzm_rem_pio2f(float a, double* q) {
    const double xd = a;
    // small: Cody-Waite
    const double ns = __builtin_rint(xd * 0.63661977236758134);
    double rs = __builtin_fma(-ns, BZM_PIO2_1, xd);
    rs = __builtin_fma(-ns, BZM_PIO2_2, rs);
    rs = __builtin_fma(-ns, BZM_PIO2_3, rs);
    // large: Payne-Hanek (computed on a placeholder below 2^27)
    const uint32_t b = bz_fbits(a >= 134217728.0f ? a : 134217728.0f);
    const double E = (double)(int32_t)(b >> 23) - 150.0;  // a = M 2^E, E in [4, 104]
    const double M = (double)(int32_t)((b & 0x7FFFFFu) | 0x800000u);
    const double i0 = __builtin_floor((E - 2.0) / 24.0);  // the first chunk not 0 mod 4
    const double w0 = bzm_pow2i(E - 24.0 * (i0 + 1.0));   // 2^s0, s0 in [-22, 1]
    const double sc = 5.9604644775390625e-08;             // 2^-24; every product below is exact
    const double t0 = M * bzm_2opi_at<0>(i0) * w0;
    const double t1 = M * bzm_2opi_at<1>(i0) * (w0 * sc);
    const double t2 = M * bzm_2opi_at<2>(i0) * (w0 * (sc * sc));
    const double t3 = M * bzm_2opi_at<3>(i0) * (w0 * (sc * sc * sc));
    const double t4 = M * bzm_2opi_at<4>(i0) * (w0 * (sc * sc * sc * sc));
    const double t5 = M * bzm_2opi_at<5>(i0) * (w0 * (sc * sc * sc * sc * sc));
    const double f0 = t0 - 4.0 * __builtin_floor(t0 * 0.25);
    const double f1 = t1 - 4.0 * __builtin_floor(t1 * 0.25);
    double S = f0 + f1;  // exact: < 8, bits from 2^2 down to 2^-46
    S = S - 4.0 * __builtin_floor(S * 0.25);
    const double nl = __builtin_rint(S + t2);
    const double fr = ((((S - nl) + t2) + t3) + t4) + t5;
    const double rl = fr * BZM_PIO2_1;
    const bool big = a >= 134217728.0f;
    const double n = big ? nl : ns;
    *q = n - 4.0 * __builtin_floor(n * 0.25);
    return big ? rl : rs;
}
// sin r and cos r for |r| <= pi/4 + a little (Taylor, double; float accuracy)
BZ_FN double bzm_sin_poly(double r) {
    const double z = r * r;
    double p = -2.5052108385441720e-08;  // -1/11!
    p = p * z + 2.7557319223985893e-06;
    p = p * z - 1.9841269841269841e-04;
    p = p * z + 8.3333333333333333e-03;
    p = p * z - 1.6666666666666667e-01;
    return r + r * z * p;
}
BZ_FN double bzm_cos_poly(double r) {
    const double z = r * r;
    double p = 2.0876756987868099e-09;  // 1/12!
    p = p * z - 2.7557319223985888e-07;
    p = p * z + 2.4801587301587302e-05;
    p = p * z - 1.3888888888888889e-03;
    p = p * z + 4.1666666666666667e-02;
    p = p * z - 0.5;
    return 1.0 + z * p;
}
BZ_FN float bzm_sin(float x) {
    const float a = __builtin_fabsf(x);
    double q;
    const double r = bzm_rem_pio2f(a < __builtin_inff() ? a : 0.0f, &q);
    const double s = bzm_sin_poly(r), c = bzm_cos_poly(r);
    const double y = q == 0 ? s : (q == 1 ? c : (q == 2 ? -s : -c));
    const float out = (float)(x < 0 ? -y : y);
    return x == 0 ? x : (a < __builtin_inff() ? out : x - x);  // +-0; inf, NaN -> NaN
}
BZ_FN float bzm_cos(float x) {
    const float a = __builtin_fabsf(x);
    double q;
    const double r = bzm_rem_pio2f(a < __builtin_inff() ? a : 0.0f, &q);
    const double s = bzm_sin_poly(r), c = bzm_cos_poly(r);
    const double y = q == 0 ? c : (q == 1 ? -s : (q == 2 ? -c : s));
    return a < __builtin_inff() ? (float)y : x - x;
}

// pow of floats, computed in double: exp(y log |x|) with double's 53 bits is within a hair
// of the float result; the sign and the special cases are C99's (F.10.4.4)
// (the double cores at float accuracy: y log|x| to ~2^-40; conditions as doubles, which GCC 12
// vectorizes)
BZ_FN float bzm_pow(float xf, float yf) {
    const double x = xf, y = yf, ax = __builtin_fabs(x), ay = __builtin_fabs(y);
    // -1 for a negative x (-0 too) and an odd integer y (every float above 2^24 is even)
    const double sign = (__builtin_copysign(1.0, x) < 0 && __builtin_floor(y) == y &&
                         ay < 16777216.0 && __builtin_floor(y * 0.5) * 2.0 != y)
                            ? -1.0
                            : 1.0;
    const double mag_f =
        bzm_exp_core<10, false>(y * bzm_log_core<7>(ax > 0 && ax < __builtin_inf() ? ax : 1.0));
    // |x| = 0 or inf: 0^y = inf^-y
    const double mag_e = ((ax == 0 && y < 0) || (ax != 0 && y > 0)) ? __builtin_inf() : 0.0;
    double mag = (ax > 0 && ax < __builtin_inf()) ? mag_f : mag_e;
    mag = (ax == 1 && ay == __builtin_inf()) ? 1.0 : mag;
    double out = sign * mag;
    out = (x < 0 && ax < __builtin_inf() && __builtin_floor(y) != y) ? __builtin_nan("") : out;
    out = (x != x || y != y) ? __builtin_nan("") : out;
    out = (y == 0 || x == 1) ? 1.0 : out;
    return (float)out;
}

// ---------------------------------------------------------------- more float functions
// Computed in double with the double cores at float accuracy (errors near 2^-40, so the
// float result is the correctly rounded one but in rare near-ties), then rounded once.
BZ_FN float bzm_exp2(float xf) {
    const double x = xf != xf ? 0.0 : (xf < -160.0f ? -160.0 : (xf > 130.0f ? 130.0 : xf));
    const double k = __builtin_rint(x), k1 = __builtin_floor(k * 0.5);
    const double y = bzm_exp_core<10, false>((x - k) * BZM_LN2);  // (x - k exact)
    return xf != xf ? xf : (float)(y * bzm_pow2i(k1) * bzm_pow2i(k - k1));
}
BZ_FN float bzm_log2(float xf) {  // k + log2(m): exact at powers of two
    const double x = xf;
    double kd;
    const double m = bzm_split(x > 0 && x < __builtin_inf() ? x : 1.0, &kd);
    return (float)bzm_log_special(x, kd + bzm_log1pf_core<7>(m - 1.0) * BZM_LOG2E);
}
BZ_FN float bzm_log10(float xf) {
    return (float)(bzm_log_core<7>((double)xf) * 0.43429448190325182765);
}
BZ_FN float bzm_sinh(float xf) {  // (e + e / (e + 1)) / 2, e = expm1(|x|); exp(|x|) / 2 above 20
    const double a = __builtin_fabs((double)xf);
    const double e = bzm_expm1_core<13>(a);  // (it clamps; a clamp here stops GCC vectorizing)
    const double y = a < 20.0 ? 0.5 * (e + e / (e + 1.0)) : 0.5 * bzm_exp_core<10, false>(a);
    return xf != xf ? xf : (float)__builtin_copysign(y, (double)xf);
}
BZ_FN float bzm_cosh(float xf) {
    const double E = bzm_exp_core<10, false>(__builtin_fabs((double)xf));
    return xf != xf ? xf : (float)(0.5 * (E + 1.0 / E));
}
BZ_FN float bzm_asinh(float xf) {  // log1p(a + a^2 / (1 + sqrt(1 + a^2)))
    const double a = __builtin_fabs((double)xf), a2 = a * a;
    const double y = bzm_log1p_core<7>(a + a2 / (1.0 + __builtin_sqrt(1.0 + a2)));
    return (xf != xf || xf == 0 || a == __builtin_inf()) ? xf
                                                         : (float)__builtin_copysign(y, (double)xf);
}
BZ_FN float bzm_acosh(float xf) {  // log1p(t + sqrt(t (t + 2))), t = x - 1 (exact)
    const double t = (double)xf - 1.0;
    const double y = bzm_log1p_core<7>(t + __builtin_sqrt(t * (t + 2.0)));
    return xf != xf ? xf : (xf < 1.0f ? __builtin_nanf("") : (float)y);
}
BZ_FN float bzm_atanh(float xf) {  // log1p(2a / (1 - a)) / 2
    const double a = __builtin_fabs((double)xf);
    const double y = 0.5 * bzm_log1p_core<7>(2.0 * a / (1.0 - a));
    return (xf != xf || xf == 0)
               ? xf
               : (a > 1.0 ? __builtin_nanf("") : (float)__builtin_copysign(y, (double)xf));
}
// atan of a double at float accuracy: 1/|t| above 1 (pi/2 - atan), then (t sqrt(3) - 1) /
// (sqrt(3) + t) above tan(pi/12) (pi/6 + atan), then an odd Taylor series (|u| <= 0.268)
BZ_FN double bzm_atan_d(double t) {
    const double a = __builtin_fabs(t);
    const bool inv = a > 1.0;
    const double b = inv ? 1.0 / a : a;
    const bool red = b > 0.26794919243112270;
    const double u = red ? (b * 1.7320508075688772 - 1.0) / (1.7320508075688772 + b) : b;
    const double z = u * u;
    double p = -1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z - 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z - 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z - 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z - 1.0 / 3.0;
    double y = u + u * z * p;
    y = red ? 0.52359877559829887 + y : y;
    y = inv ? 1.5707963267948966 - y : y;
    return __builtin_copysign(y, t);
}
BZ_FN float bzm_atan(float xf) { return xf != xf ? xf : (float)bzm_atan_d((double)xf); }
BZ_FN float bzm_asin(float xf) {  // atan(x / sqrt((1 - x)(1 + x)))
    const double x = xf;
    const double y = bzm_atan_d(x / __builtin_sqrt((1.0 - x) * (1.0 + x)));
    return (xf != xf || xf == 0) ? xf : (__builtin_fabs(x) > 1.0 ? __builtin_nanf("") : (float)y);
}
BZ_FN float bzm_acos(float xf) {  // 2 atan(sqrt((1 - x) / (1 + x)))
    const double x = xf;
    const double y = 2.0 * bzm_atan_d(__builtin_sqrt((1.0 - x) / (1.0 + x)));
    return xf != xf ? xf : (__builtin_fabs(x) > 1.0 ? __builtin_nanf("") : (float)y);
}
BZ_FN float bzm_tan(float x) {
    const float a = __builtin_fabsf(x);
    double q;
    const double r = bzm_rem_pio2f(a < __builtin_inff() ? a : 0.0f, &q);
    const double s = bzm_sin_poly(r), c = bzm_cos_poly(r);
    const double y = (q == 0 || q == 2) ? s / c : -c / s;
    const float out = (float)(x < 0 ? -y : y);
    return x == 0 ? x : (a < __builtin_inff() ? out : x - x);
}
// atan2 and hypot of floats, in double; the special values are C99's (F.10.1.4, F.10.4.3)
BZ_FN float bzm_atan2(float yf, float xf) {
    const double y = yf, x = xf, ay = __builtin_fabs(y), ax = __builtin_fabs(x);
    const bool both_inf = ay == __builtin_inf() && ax == __builtin_inf();
    const double t = ay / (ax > 0 || ay > 0 ? ax : 1.0);  // (0 / 0 -> 0)
    double a = both_inf ? 0.78539816339744831 : bzm_atan_d(both_inf ? 0.0 : t);
    a = __builtin_copysign(1.0, x) < 0 ? 3.14159265358979323846 - a : a;  // x < 0 or -0
    const double out = __builtin_copysign(a, y);
    return (xf != xf || yf != yf) ? xf + yf : (float)out;
}
BZ_FN float bzm_hypot(float xf, float yf) {  // x^2 + y^2 exact but for one rounding
    const double x = xf, y = yf;
    const double r = __builtin_sqrt(x * x + y * y);
    return (__builtin_fabsf(xf) == __builtin_inff() || __builtin_fabsf(yf) == __builtin_inff())
               ? __builtin_inff()
               : (float)r;
}
