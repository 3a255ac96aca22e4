// braze._core: the native side of braze.
//
// * Host facts: the CPU's instruction-set features (the kernel cache key needs
//   them, so a shared cache never hands out a SIGILL kernel), how this extension
//   was built, the number of hardware threads.
// * Generated kernels: `load_kernel(path, symbol)` dlopens a kernel library built
//   by braze.backends.cpu.build and returns a small integer handle;
//   `launch(handle, arrays, args)` calls the kernel with the GIL released.
//
// Every generated CPU kernel has one ABI (see braze/backends/cpu/codegen.py):
//
//     extern "C" void kernel(void** bufs, const int64_t* args);
//
// `bufs[i]` is the data pointer of `arrays[i]` (the kernel's distinct buffer slots,
// in the order codegen documents); `args` holds the thread count, the iteration
// shape, every view's offset and strides and the kernel's constants.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
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

// ---------------------------------------------------------------- kernels
using KernelFn = void (*)(void**, const int64_t*);

struct LoadedKernel {
    KernelFn fn;
    std::string path, symbol;
};

// Loaded kernels, indexed by handle. Libraries are never closed: a kernel may be
// running on another thread, and a process loads a bounded number of them.
std::vector<LoadedKernel> g_kernels;
std::mutex g_kernels_mutex;

int64_t load_kernel(const std::string &path, const std::string &symbol) {
    std::lock_guard<std::mutex> lock(g_kernels_mutex);
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        throw std::runtime_error("braze: cannot load kernel library '" + path +
                                 "': " + (err ? err : "unknown dlopen error"));
    }
    dlerror();
    void *sym = dlsym(lib, symbol.c_str());
    const char *err = dlerror();
    if (err || !sym) {
        std::string msg = "braze: kernel library '" + path + "' has no symbol '" + symbol +
                          "': " + (err ? err : "null symbol");
        dlclose(lib);
        throw std::runtime_error(msg);
    }
    g_kernels.push_back({reinterpret_cast<KernelFn>(sym), path, symbol});
    return (int64_t) g_kernels.size() - 1;
}

KernelFn kernel_fn(int64_t handle) {
    std::lock_guard<std::mutex> lock(g_kernels_mutex);
    if (handle < 0 || (size_t) handle >= g_kernels.size())
        throw std::out_of_range("braze: invalid kernel handle " + std::to_string(handle));
    return g_kernels[(size_t) handle].fn;
}

// Any dtype, read-only accepted (outputs are arrays braze allocated itself), but
// C-contiguous and on the CPU: with noconvert, nanobind never copies, so a write
// can never land in a temporary.
using Buffer = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Args = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

constexpr size_t kMaxInline = 32;

void launch(int64_t handle, nb::list arrays, const Args &args) {
    KernelFn fn = kernel_fn(handle);
    size_t n = nb::len(arrays);
    void *inline_ptrs[kMaxInline];
    std::vector<void *> heap_ptrs;
    void **ptrs = inline_ptrs;
    if (n > kMaxInline) {
        heap_ptrs.resize(n);
        ptrs = heap_ptrs.data();
    }
    for (size_t i = 0; i < n; ++i) {
        Buffer b;
        if (!nb::try_cast<Buffer>(arrays[i], b, /*convert=*/false))
            throw nb::type_error(("braze.launch: buffer " + std::to_string(i) +
                                  " is not a C-contiguous CPU array of a plain dtype")
                                     .c_str());
        ptrs[i] = const_cast<void *>(b.data());
    }
    const int64_t *a = args.data();
    {
        nb::gil_scoped_release release;
        fn(ptrs, a);
    }
}

}  // namespace

NB_MODULE(_core, m) {
    m.doc() = "braze native extension: host facts, generated-kernel loading and launching.";
    m.def("cpu_features", &cpu_features,
          "ISA features of the host CPU, e.g. ['sse2', 'avx2', 'fma', ...].");
    m.def("build_info", &build_info, "Compiler and language level this extension was built with.");
    m.def("hardware_concurrency", []() { return std::thread::hardware_concurrency(); },
          "Number of hardware threads the OS reports.");
    m.def("load_kernel", &load_kernel, nb::arg("path"), nb::arg("symbol"),
          "dlopen a generated kernel library and resolve `symbol`; returns a handle.\n"
          "Raises RuntimeError naming the path and the loader's message on failure.");
    m.def("launch", &launch, nb::arg("handle"), nb::arg("arrays"), nb::arg("args").noconvert(),
          "Call kernel `handle` as kernel(bufs, args) with the GIL released; bufs are the\n"
          "data pointers of `arrays` (C-contiguous numpy arrays, never copied) and args an\n"
          "int64 array.");
}
