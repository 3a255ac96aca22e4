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

// the array loops of braze's functions, one per function and type: y = bzm_<fn>(x)
#define BZ_MAP_OWN(fn, T)                                                           \
    BZ_CLONES void map_own_##fn(const T* __restrict x, T* __restrict y, size_t n) { \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) y[i] = bzm_##fn(x[i]);   \
    }
#define BZ_MAP_OWN_BOTH(fn) \
    BZ_MAP_OWN(fn, float)   \
    BZ_MAP_OWN(fn, double)
BZ_MAP_OWN_BOTH(exp)
BZ_MAP_OWN_BOTH(expm1)
BZ_MAP_OWN_BOTH(log)
BZ_MAP_OWN_BOTH(log1p)
BZ_MAP_OWN_BOTH(tanh)
BZ_MAP_OWN(sin, float)
BZ_MAP_OWN(cos, float)
BZ_MAP_OWN(tan, float)
BZ_MAP_OWN(asin, float)
BZ_MAP_OWN(acos, float)
BZ_MAP_OWN(atan, float)
BZ_MAP_OWN(sinh, float)
BZ_MAP_OWN(cosh, float)
BZ_MAP_OWN(asinh, float)
BZ_MAP_OWN(acosh, float)
BZ_MAP_OWN(atanh, float)
BZ_MAP_OWN(exp2, float)
BZ_MAP_OWN(log2, float)
BZ_MAP_OWN(log10, float)
// ... and of the float functions of two operands
#define BZ_MAP_OWN2(fn)                                                                 \
    BZ_CLONES void map_own_##fn(const float* __restrict x, const float* __restrict z,   \
                                float* __restrict y, size_t n) {                        \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) y[i] = bzm_##fn(x[i], z[i]); \
    }
BZ_MAP_OWN2(pow)
BZ_MAP_OWN2(atan2)
BZ_MAP_OWN2(hypot)

template <class T>
void map_libm1(Fn1<T> f, const T* x, T* y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = f(x[i]);
}
template <class T>
void map_libm2(Fn2<T> f, const T* x, const T* z, T* y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = f(x[i], z[i]);
}

using OwnF = void (*)(const float*, float*, size_t);
using OwnD = void (*)(const double*, double*, size_t);
using OwnF2 = void (*)(const float*, const float*, float*, size_t);

struct Entry {
    int arity;
    OwnF own_f;  // bzmath.h's float function (null: the C library's f1/f2)
    OwnD own_d;  // bzmath.h's double function (null: d1/d2)
    Fn1<float> f1;
    Fn1<double> d1;
    Fn2<float> f2;
    Fn2<double> d2;
    OwnF2 own_f2 = nullptr;  // bzmath.h's float function of two operands
};

Entry libm1(Fn1<float> f, Fn1<double> d) { return {1, nullptr, nullptr, f, d, nullptr, nullptr}; }
Entry libm2(Fn2<float> f, Fn2<double> d) { return {2, nullptr, nullptr, nullptr, nullptr, f, d}; }
Entry own2(OwnF2 f, Fn2<double> libm_d) {
    return {2, nullptr, nullptr, nullptr, nullptr, nullptr, libm_d, f};
}
Entry own(OwnF f, OwnD d, Fn1<double> libm_d = nullptr) {
    return {1, f, d, nullptr, libm_d, nullptr, nullptr};
}

// by the names the op records' libm entries use
const std::map<std::string, Entry>& table() {
    static const std::map<std::string, Entry> t = {
        {"exp", own(map_own_exp, map_own_exp)},
        {"expm1", own(map_own_expm1, map_own_expm1)},
        {"log", own(map_own_log, map_own_log)},
        {"log1p", own(map_own_log1p, map_own_log1p)},
        {"tanh", own(map_own_tanh, map_own_tanh)},
        {"sin", own(map_own_sin, nullptr, ::sin)},
        {"cos", own(map_own_cos, nullptr, ::cos)},
        {"acos", own(map_own_acos, nullptr, ::acos)},
        {"acosh", own(map_own_acosh, nullptr, ::acosh)},
        {"asin", own(map_own_asin, nullptr, ::asin)},
        {"asinh", own(map_own_asinh, nullptr, ::asinh)},
        {"atan", own(map_own_atan, nullptr, ::atan)},
        {"atanh", own(map_own_atanh, nullptr, ::atanh)},
        {"cosh", own(map_own_cosh, nullptr, ::cosh)},
        {"exp2", own(map_own_exp2, nullptr, ::exp2)},
        {"log10", own(map_own_log10, nullptr, ::log10)},
        {"log2", own(map_own_log2, nullptr, ::log2)},
        {"sinh", own(map_own_sinh, nullptr, ::sinh)},
        {"tan", own(map_own_tan, nullptr, ::tan)},
        {"atan2", own2(map_own_atan2, ::atan2)},
        {"hypot", own2(map_own_hypot, ::hypot)},
        {"pow", own2(map_own_pow, ::pow)},
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
        if (e.own_f)
            e.own_f(data_of<float>(args[0]), y, n);
        else if (e.own_f2)
            e.own_f2(data_of<float>(args[0]), data_of<float>(args[1]), y, n);
        else if (e.arity == 1)
            map_libm1(e.f1, data_of<float>(args[0]), y, n);
        else
            map_libm2(e.f2, data_of<float>(args[0]), data_of<float>(args[1]), y, n);
    } else {
        double* y = static_cast<double*>(out.data());
        if (e.own_d)
            e.own_d(data_of<double>(args[0]), y, n);
        else if (e.arity == 1)
            map_libm1(e.d1, data_of<double>(args[0]), y, n);
        else
            map_libm2(e.d2, data_of<double>(args[0]), data_of<double>(args[1]), y, n);
    }
}

std::map<std::string, std::tuple<int, std::vector<std::string>>> vmath_functions() {
    std::map<std::string, std::tuple<int, std::vector<std::string>>> out;
    for (const auto& [name, e] : table()) {
        std::vector<std::string> own;
        if (e.own_f || e.own_f2) own.push_back("float32");
        if (e.own_d) own.push_back("float64");
        out[name] = {e.arity, own};
    }
    return out;
}

// One value through the table's array functions (a numpy scalar's type back: np.float32's
// constructor rounds nothing, the value is a float already)
template <class T>
T apply_one(const Entry& e, T x, T z) {
    T y;
    if constexpr (sizeof(T) == 4) {
        if (e.own_f)
            e.own_f(&x, &y, 1);
        else if (e.own_f2)
            e.own_f2(&x, &z, &y, 1);
        else
            y = e.arity == 1 ? e.f1(x) : e.f2(x, z);
    } else {
        if (e.own_d)
            e.own_d(&x, &y, 1);
        else
            y = e.arity == 1 ? e.d1(x) : e.d2(x, z);
    }
    return y;
}

nb::object vmath_scalar(const std::string& name, bool is_double) {
    const auto& t = table();
    auto it = t.find(name);
    if (it == t.end()) throw nb::value_error(("braze.vmath_scalar: no function " + name).c_str());
    const Entry* e = &it->second;
    auto value = [](nb::handle h) {
        const double v = PyFloat_AsDouble(h.ptr());
        if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
        return v;
    };
    auto wrap = [](nb::handle like, double y) {
        PyObject* f = PyFloat_FromDouble(y);
        if (!f) throw nb::python_error();
        PyObject* out = PyObject_CallOneArg((PyObject*)Py_TYPE(like.ptr()), f);
        Py_DECREF(f);
        if (!out) throw nb::python_error();
        return nb::steal(out);
    };
    if (e->arity == 1) {
        if (is_double)
            return nb::cpp_function([e, value, wrap](nb::handle x) {
                return wrap(x, apply_one<double>(*e, value(x), 0.0));
            });
        return nb::cpp_function([e, value, wrap](nb::handle x) {
            return wrap(x, apply_one<float>(*e, (float)value(x), 0.0f));
        });
    }
    if (is_double)
        return nb::cpp_function([e, value, wrap](nb::handle x, nb::handle z) {
            return wrap(x, apply_one<double>(*e, value(x), value(z)));
        });
    return nb::cpp_function([e, value, wrap](nb::handle x, nb::handle z) {
        return wrap(x, apply_one<float>(*e, (float)value(x), (float)value(z)));
    });
}

}  // namespace

void register_vmath(nb::module_& m) {
    m.def("vmath_scalar", &vmath_scalar, nb::arg("name"), nb::arg("is_double"),
          "A native function computing `name` of numpy scalars of one float dtype as\n"
          "vmath_apply does (the result: a scalar of the first operand's type).");
    m.def("vmath_apply", &vmath_apply, nb::arg("name"), nb::arg("args"), nb::arg("out").noconvert(),
          "out = name(*args) elementwise: C-contiguous float32/float64 arrays of out's dtype\n"
          "and size; braze's own function (bzmath.h) or the C library's, as the CPU kernels.");
    m.def("vmath_functions", &vmath_functions,
          "{name: (arity, dtypes)}: the functions vmath_apply computes; dtypes: those braze's\n"
          "bzmath.h computes (the C library's function the others).");
}
