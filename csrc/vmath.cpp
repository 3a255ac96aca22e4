// braze._core.vmath_apply / vmath_functions: the transcendental functions of braze's numpy
// tier, computed by the same code as the generated CPU kernels, so a program's first sight
// (op by op) and its compiled kernels give the same bits (graph/ops/libm.py).
//
// braze's own functions (backends/kernels/bzmath.h) are exact IEEE operations compiled with
// -ffp-contract=off (CMakeLists.txt): the same bits in any ISA clone below and in a kernel
// built for any -march. The others are the C library's scalar functions, which the kernels
// call too (backends/cpu/codegen.py declares them without vector variants): the same symbol
// in the same process.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "registry.h"

#define BZ_FN static inline
// clang-format off
#include "../backends/kernels/cpu_bits.h"
#include "../backends/kernels/bzmath.h"
// clang-format on

namespace nb = nanobind;

namespace {

// Vector clones for the common x86-64 levels (the extension itself targets baseline x86-64):
// bzmath.h needs SSE4.1's round and SSE4.2's 64-bit compares to vectorize.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define BZ_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BZ_CLONES
#endif

template <class T>
using Fn1 = T (*)(T);
template <class T>
using Fn2 = T (*)(T, T);

template <class T>
BZ_CLONES void map_own_exp(const T* __restrict x, T* __restrict y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bzm_exp(x[i]);
}
template <class T>
BZ_CLONES void map_own_expm1(const T* __restrict x, T* __restrict y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bzm_expm1(x[i]);
}
template <class T>
BZ_CLONES void map_own_log(const T* __restrict x, T* __restrict y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bzm_log(x[i]);
}
template <class T>
BZ_CLONES void map_own_log1p(const T* __restrict x, T* __restrict y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bzm_log1p(x[i]);
}
template <class T>
BZ_CLONES void map_own_tanh(const T* __restrict x, T* __restrict y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bzm_tanh(x[i]);
}

template <class T>
void map_libm1(Fn1<T> f, const T* x, T* y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = f(x[i]);
}
template <class T>
void map_libm2(Fn2<T> f, const T* x, const T* z, T* y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = f(x[i], z[i]);
}

struct Entry {
    int arity;
    bool own;  // bzmath.h's (else the C library's)
    void (*own_f)(const float*, float*, size_t);
    void (*own_d)(const double*, double*, size_t);
    Fn1<float> f1;
    Fn1<double> d1;
    Fn2<float> f2;
    Fn2<double> d2;
};

// the C library's functions by name (the names the op records' libm entries use)
#define BZ_LIBM1(name)                                                             \
    {                                                                              \
        #name, { 1, false, nullptr, nullptr, ::name##f, ::name, nullptr, nullptr } \
    }
#define BZ_LIBM2(name)                                                             \
    {                                                                              \
        #name, { 2, false, nullptr, nullptr, nullptr, nullptr, ::name##f, ::name } \
    }
#define BZ_OWN(name)                                                                           \
    {                                                                                          \
        #name, {                                                                               \
            1, true, map_own_##name<float>, map_own_##name<double>, nullptr, nullptr, nullptr, \
                nullptr                                                                        \
        }                                                                                      \
    }

const std::map<std::string, Entry>& table() {
    static const std::map<std::string, Entry> t = {
        BZ_OWN(exp),     BZ_OWN(expm1),   BZ_OWN(log),    BZ_OWN(log1p),   BZ_OWN(tanh),
        BZ_LIBM1(acos),  BZ_LIBM1(acosh), BZ_LIBM1(asin), BZ_LIBM1(asinh), BZ_LIBM1(atan),
        BZ_LIBM1(atanh), BZ_LIBM1(cos),   BZ_LIBM1(cosh), BZ_LIBM1(exp2),  BZ_LIBM1(log10),
        BZ_LIBM1(log2),  BZ_LIBM1(sin),   BZ_LIBM1(sinh), BZ_LIBM1(tan),   BZ_LIBM2(atan2),
        BZ_LIBM2(hypot), BZ_LIBM2(pow),
    };
    return t;
}

using In = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Out = nb::ndarray<nb::c_contig, nb::device::cpu>;

template <class T>
const T* data_of(const In& a) {
    return static_cast<const T*>(a.data());
}

void vmath_apply(const std::string& name, const std::vector<In>& args, Out out) {
    const auto& t = table();
    auto it = t.find(name);
    if (it == t.end()) throw nb::value_error(("braze.vmath_apply: no function " + name).c_str());
    const Entry& e = it->second;
    if ((int)args.size() != e.arity)
        throw nb::value_error(("braze.vmath_apply: " + name + " takes " + std::to_string(e.arity) +
                               " operands, got " + std::to_string(args.size()))
                                  .c_str());
    const size_t n = out.size();
    const bool is_f = out.dtype() == nb::dtype<float>(), is_d = out.dtype() == nb::dtype<double>();
    if (!is_f && !is_d) throw nb::type_error("braze.vmath_apply: float32 or float64 output only");
    for (const In& a : args)
        if (a.dtype() != out.dtype() || a.size() != n)
            throw nb::type_error(
                ("braze.vmath_apply: " + name + ": operands must have the output's dtype and size")
                    .c_str());
    nb::gil_scoped_release release;
    if (is_f) {
        float* y = static_cast<float*>(out.data());
        if (e.own)
            e.own_f(data_of<float>(args[0]), y, n);
        else if (e.arity == 1)
            map_libm1(e.f1, data_of<float>(args[0]), y, n);
        else
            map_libm2(e.f2, data_of<float>(args[0]), data_of<float>(args[1]), y, n);
    } else {
        double* y = static_cast<double*>(out.data());
        if (e.own)
            e.own_d(data_of<double>(args[0]), y, n);
        else if (e.arity == 1)
            map_libm1(e.d1, data_of<double>(args[0]), y, n);
        else
            map_libm2(e.d2, data_of<double>(args[0]), data_of<double>(args[1]), y, n);
    }
}

std::map<std::string, std::tuple<int, bool>> vmath_functions() {
    std::map<std::string, std::tuple<int, bool>> out;
    for (const auto& [name, e] : table()) out[name] = {e.arity, e.own};
    return out;
}

}  // namespace

void register_vmath(nb::module_& m) {
    m.def("vmath_apply", &vmath_apply, nb::arg("name"), nb::arg("args"), nb::arg("out").noconvert(),
          "out = name(*args) elementwise: C-contiguous float32/float64 arrays of out's dtype\n"
          "and size; braze's own function (bzmath.h) or the C library's, as the CPU kernels.");
    m.def("vmath_functions", &vmath_functions,
          "{name: (arity, own)}: the functions vmath_apply computes; own: braze's bzmath.h.");
}
