// braze._core: the native side of braze.
//
// Today it reports the host CPU's instruction-set features (the kernel cache
// key needs them so a shared cache never hands out a SIGILL kernel) and how
// the extension itself was built. Loading and launching generated kernels
// lands here next (one uniform ABI, GIL released).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <thread>
#include <vector>

namespace nb = nanobind;

namespace {

// ISA features the generated C++ kernels may use, as the CPU reports them.
std::vector<std::string> cpu_features() {
    std::vector<std::string> out;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#define BRAZE_FEATURE(name) if (__builtin_cpu_supports(name)) out.emplace_back(name);
    BRAZE_FEATURE("sse2")
    BRAZE_FEATURE("sse4.1")
    BRAZE_FEATURE("sse4.2")
    BRAZE_FEATURE("avx")
    BRAZE_FEATURE("avx2")
    BRAZE_FEATURE("fma")
    BRAZE_FEATURE("f16c")
    BRAZE_FEATURE("avx512f")
    BRAZE_FEATURE("avx512bw")
    BRAZE_FEATURE("avx512vl")
    BRAZE_FEATURE("avx512dq")
    BRAZE_FEATURE("avx512bf16")
    BRAZE_FEATURE("avx512fp16")
#undef BRAZE_FEATURE
#elif defined(__aarch64__)
    out.emplace_back("neon");
#endif
    return out;
}

std::string build_info() {
    std::string s;
#if defined(__clang__)
    s += "clang " __clang_version__;
#elif defined(__GNUC__)
    s += "gcc " __VERSION__;
#else
    s += "unknown compiler";
#endif
    s += "; C++ " + std::to_string(__cplusplus);
    return s;
}

}  // namespace

NB_MODULE(_core, m) {
    m.doc() = "braze native extension: host facts today, kernel loading and launching next.";
    m.def("cpu_features", &cpu_features,
          "ISA features of the host CPU, e.g. ['sse2', 'avx2', 'fma', ...].");
    m.def("build_info", &build_info, "Compiler and language level this extension was built with.");
    m.def("hardware_concurrency", []() { return std::thread::hardware_concurrency(); },
          "Number of hardware threads the OS reports.");
}
