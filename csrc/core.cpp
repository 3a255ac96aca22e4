// braze._core: the native side of braze.
//
// * Host facts: the CPU's instruction-set features (the kernel cache key needs
//   them, so a shared cache never hands out a SIGILL kernel), how this extension
//   was built, the number of hardware threads.
// * NVRTC and the CUDA driver API, both dlopened at run time (never linked): see the
//   "NVRTC" and "CUDA driver API" sections below.
// * Generated kernels: `load_kernel(path, symbol)` dlopens a kernel library built
//   by braze.backends.cpu.build and returns a small integer handle;
//   `launch(handle, arrays, args)` calls the kernel with the GIL released;
//   `Program` runs a prepared schedule's consecutive kernels in one call.
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
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <dlfcn.h>
#if defined(__linux__)
#include <sched.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include "numpy_layout.h"
#include "registry.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace nb = nanobind;

PyObject *g_ndarray_type = nullptr;  // numpy.ndarray once registered (numpy_layout.h)

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
    BRAZE_FEATURE("avx512vnni")
    BRAZE_FEATURE("avxvnni")
#if !defined(__clang__) && __GNUC__ >= 12  // (older compilers do not know these names)
    BRAZE_FEATURE("amx-int8")
    BRAZE_FEATURE("amx-bf16")
#endif
#undef BRAZE_FEATURE
#elif defined(__aarch64__)
    out.emplace_back("neon");
#if defined(__linux__)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) out.emplace_back("asimddp");
#elif defined(__APPLE__)
    int dot = 0;
    size_t len = sizeof dot;
    if (sysctlbyname("hw.optional.arm.FEAT_DotProd", &dot, &len, nullptr, 0) == 0 && dot)
        out.emplace_back("asimddp");
#endif
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

// ---------------------------------------------------------------- thread placement
// An OpenMP worker woken after Python work was sometimes placed on the calling thread's
// CPU and stayed there: every parallel region then shared one core (a loop of 2-thread
// kernels ran 2-5x slower until the OS moved the worker). Once Python has registered the
// workers of the main caller's team (`place_workers`), each native call from that thread
// first checks its CPU (sched_getcpu: no system call) and, when it has moved, allows the
// workers every CPU of the process but that one.
#if defined(__linux__)
std::vector<pid_t> g_workers;
pid_t g_master = 0;
int g_master_cpu = -1;
cpu_set_t g_cpus;

// The first thread to run a kernel, and whether a second one has been warned about: libgomp
// keeps a pool of workers per thread that starts parallel regions, and once it manages more
// threads than there are CPUs its idle workers spin only briefly (gomp_throttled_spin_count)
// and sleep, so every parallel region wakes them through the kernel. A model loaded on the
// main thread and then called from a worker thread (a web app's) ran its 16-sequence decode
// step ~1.5x slower on 2 CPUs. One RuntimeWarning, the first time a second thread runs a
// kernel while the first is alive.
std::atomic<pid_t> g_first_caller{0};
std::atomic<bool> g_second_warned{false};

void forget_workers_in_child() {  // (a fork's child has none of them)
    g_workers.clear();
    g_first_caller = 0;
}

// Called with the GIL held, before a native call. A thread that is not the first decides
// at its first call 50 ms or more after its first one (a thread just joined is still
// exiting -- freeing its pool -- for a moment after Python's join returns).
inline void note_calling_thread() {
    thread_local int state = 0;  // 0: not seen, 1: waiting to decide, 2: decided
    thread_local std::chrono::steady_clock::time_point since;
    if (state == 2) return;
    const pid_t self = (pid_t) syscall(SYS_gettid);
    pid_t first = 0;
    if (state == 0) {
        if (g_first_caller.compare_exchange_strong(first, self) || first == self) {
            state = 2;
            return;
        }
        state = 1;
        since = std::chrono::steady_clock::now();
        return;
    }
    if (std::chrono::steady_clock::now() - since < std::chrono::milliseconds(50)) return;
    state = 2;
    first = g_first_caller.load();
    if (first == self) return;
    if (syscall(SYS_tgkill, getpid(), first, 0) != 0) {  // the first one has exited
        g_first_caller.compare_exchange_strong(first, self);
        return;
    }
    if (g_second_warned.exchange(true)) return;
    const std::string msg =
        "braze: kernels now run on a second thread (Linux thread " + std::to_string(self) +
        ") while the first thread that ran them (" + std::to_string(first) +
        ") is alive: OpenMP keeps a pool of worker threads per calling thread, and with more "
        "workers than CPUs they sleep between parallel regions, so kernels may run ~1.5-2x "
        "slower. Make every braze call of the program (loading a model included) on one "
        "thread, or let the first thread exit.";
    if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) != 0) throw nb::python_error();
}

void place_workers(const std::vector<int64_t> &tids) {
    static bool at_fork = pthread_atfork(nullptr, nullptr, forget_workers_in_child) == 0;
    (void) at_fork;
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return;
    g_cpus = cpus;
    g_workers.assign(tids.begin(), tids.end());
    g_master = (pid_t) syscall(SYS_gettid);
    g_master_cpu = -1;
}

long g_moves = 0;

inline void keep_workers_off_caller() {
    note_calling_thread();
    if (g_workers.empty()) return;
    thread_local pid_t self = (pid_t) syscall(SYS_gettid);
    if (self != g_master) return;
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu == g_master_cpu) return;
    g_master_cpu = cpu;
    ++g_moves;
    cpu_set_t others = g_cpus;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) == 0) return;
    for (pid_t t : g_workers) sched_setaffinity(t, sizeof others, &others);
}
#else
long g_moves = 0;
void place_workers(const std::vector<int64_t> &) {}
inline void keep_workers_off_caller() {}
#endif

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
    keep_workers_off_caller();
    {
        nb::gil_scoped_release release;
        fn(ptrs, a);
    }
}

// ---------------------------------------------------------------- numpy data pointers
// Program::set runs for every dynamic slot of every replay: nanobind's ndarray cast
// (buffer protocol / DLPack) costs ~0.3 us there. An exact numpy.ndarray is read through
// numpy's public object layout instead (numpy_layout.h); anything else goes through the
// cast.

// (data pointer, C-contiguous flag, ndim, base address or 0) of an ndarray as
// numpy_layout.h reads them.
std::tuple<uint64_t, bool, int, uint64_t> numpy_probe(nb::handle array, nb::handle ndarray_type) {
    if ((PyObject *) Py_TYPE(array.ptr()) != ndarray_type.ptr())
        throw nb::type_error("braze.numpy_probe: expected an array of exactly ndarray_type");
    auto *a = reinterpret_cast<NpyArrayHead *>(array.ptr());
    return {(uint64_t) (uintptr_t) a->data, (a->flags & kNpyCContiguous) != 0, a->nd,
            (uint64_t) (uintptr_t) a->base};
}

void numpy_register(nb::handle type) {
    Py_XINCREF(type.ptr());  // kept for the life of the process
    g_ndarray_type = type.ptr();
}

void *array_data(nb::handle array, int64_t slot) {
    PyObject *o = array.ptr();
    if (g_ndarray_type && (PyObject *) Py_TYPE(o) == g_ndarray_type) {
        auto *a = reinterpret_cast<NpyArrayHead *>(o);
        if (a->flags & kNpyCContiguous) return a->data;
    }
    Buffer b;
    if (!nb::try_cast<Buffer>(array, b, /*convert=*/false))
        throw nb::type_error(("braze.Program.set: the array for slot " + std::to_string(slot) +
                              " is not a C-contiguous CPU array of a plain dtype").c_str());
    return const_cast<void *>(b.data());
}

// ---------------------------------------------------------------- replay programs
// A prepared schedule's native kernels (braze/backends/replay.py): a table of buffer
// pointers indexed by schedule slot, and a list of kernel calls over it, each with its
// own prebuilt args array. Python binds the pointers of the slots whose arrays change
// between calls (inputs, fresh outputs, library results) and runs a range of kernel
// calls, a segment between library ops, with one transition and the GIL released.
// One Program belongs to one replay at a time (the caller serializes its use).
class Program {
public:
    explicit Program(size_t n_slots) : ptrs_(n_slots, nullptr) {}

    // Append kernel `handle` over the buffers of `slots` with `args` (kept alive here);
    // returns the call's index. `status` >= 0: the slot of an int64 the kernel sets
    // non-zero when its input is bad (an index out of range): the run stops after it.
    size_t add(int64_t handle, const std::vector<int64_t> &slots, nb::handle args,
               int64_t status) {
        Args a;
        if (!nb::try_cast<Args>(args, a, /*convert=*/false))
            throw nb::type_error("braze.Program.add: args must be a C-contiguous int64 array");
        Call c;
        c.fn = kernel_fn(handle);
        c.args = a.data();
        for (int64_t s : slots) {
            if (s < 0 || (size_t) s >= ptrs_.size())
                throw std::out_of_range("braze.Program.add: slot " + std::to_string(s));
            c.slots.push_back((int32_t) s);
        }
        if (status >= (int64_t) ptrs_.size())
            throw std::out_of_range("braze.Program.add: status slot " + std::to_string(status));
        c.status = status < 0 ? -1 : (int32_t) status;
        keep_.push_back(nb::borrow(args));
        calls_.push_back(std::move(c));
        return calls_.size() - 1;
    }

    // Point `slot` at the data of `array` (a C-contiguous CPU array, never copied).
    void set(int64_t slot, nb::handle array) {
        if (slot < 0 || (size_t) slot >= ptrs_.size())
            throw std::out_of_range("braze.Program.set: slot " + std::to_string(slot));
        ptrs_[(size_t) slot] = array_data(array, slot);
    }

    // The slots bind() sets, in order (fixed when the plan is built).
    void set_bound(const std::vector<int64_t> &slots) {
        for (int64_t s : slots)
            if (s < 0 || (size_t) s >= ptrs_.size())
                throw std::out_of_range("braze.Program.set_bound: slot " + std::to_string(s));
        bound_ = slots;
    }

    // set() each slot of set_bound() to the array at the same position of `arrays`.
    void bind(nb::list arrays) {
        size_t n = nb::len(arrays);
        if (n != bound_.size())
            throw std::invalid_argument("braze.Program.bind: expected " +
                                        std::to_string(bound_.size()) + " arrays, got " +
                                        std::to_string(n));
        for (size_t i = 0; i < n; ++i)
            ptrs_[(size_t) bound_[i]] = array_data(arrays[i], bound_[i]);
    }

    // Run calls [lo, hi) in order, the GIL released; -1, or the index of the call whose
    // status word came back non-zero (the calls after it did not run).
    int64_t run(size_t lo, size_t hi) { return exec(lo, hi, nullptr); }

    // run(), timing each call: nanoseconds per call run (a profiler's view of a plan;
    // fewer than hi - lo when a call's status stopped the run).
    std::vector<int64_t> run_timed(size_t lo, size_t hi) {
        std::vector<int64_t> ns(hi > lo ? hi - lo : 0);
        const int64_t failed = exec(lo, hi, ns.data());
        if (failed >= 0) ns.resize((size_t) failed + 1 - lo);
        return ns;
    }

    size_t size() const { return calls_.size(); }

private:
    int64_t exec(size_t lo, size_t hi, int64_t *ns) {
        if (lo > hi || hi > calls_.size())
            throw std::out_of_range("braze.Program.run: bad call range");
        for (size_t i = lo; i < hi; ++i)
            for (int32_t s : calls_[i].slots)
                if (!ptrs_[(size_t) s])
                    throw std::runtime_error("braze.Program.run: slot " + std::to_string(s) +
                                             " has no buffer bound");
        keep_workers_off_caller();
        nb::gil_scoped_release release;
        void *inline_ptrs[kMaxInline];
        std::vector<void *> heap_ptrs;
        for (size_t i = lo; i < hi; ++i) {
            const Call &c = calls_[i];
            void **p = inline_ptrs;
            if (c.slots.size() > kMaxInline) {
                heap_ptrs.resize(c.slots.size());
                p = heap_ptrs.data();
            }
            for (size_t j = 0; j < c.slots.size(); ++j) p[j] = ptrs_[(size_t) c.slots[j]];
            if (ns) {
                auto t0 = std::chrono::steady_clock::now();
                c.fn(p, c.args);
                ns[i - lo] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - t0).count();
            } else {
                c.fn(p, c.args);
            }
            if (c.status >= 0 && *(const int64_t *) ptrs_[(size_t) c.status] != 0)
                return (int64_t) i;
        }
        return -1;
    }

    struct Call {
        KernelFn fn;
        std::vector<int32_t> slots;
        const int64_t *args;
        int32_t status = -1;  // the slot of the call's status word, or -1
    };
    std::vector<void *> ptrs_;
    std::vector<int64_t> bound_;
    std::vector<Call> calls_;
    std::vector<nb::object> keep_;
};

// ---------------------------------------------------------------- NVRTC (CUDA C -> PTX/CUBIN)
// libnvrtc is dlopen'ed at run time (the path comes from Python: the PyPI package
// nvidia-cuda-nvrtc installs it outside the loader path); no CUDA headers or libraries
// are needed to build braze. Entry points are declared here; every result: 0 == success.
typedef struct _nvrtcProgram *nvrtcProgram;
struct Nvrtc {
    void *lib = nullptr;
    std::string path;
    int (*version)(int *, int *) = nullptr;
    int (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                  const char *const *) = nullptr;
    int (*compile)(nvrtcProgram, int, const char *const *) = nullptr;
    int (*log_size)(nvrtcProgram, size_t *) = nullptr;
    int (*get_log)(nvrtcProgram, char *) = nullptr;
    int (*ptx_size)(nvrtcProgram, size_t *) = nullptr;
    int (*get_ptx)(nvrtcProgram, char *) = nullptr;
    int (*cubin_size)(nvrtcProgram, size_t *) = nullptr;
    int (*get_cubin)(nvrtcProgram, char *) = nullptr;
    int (*destroy)(nvrtcProgram *) = nullptr;
    const char *(*error_string)(int) = nullptr;
};
Nvrtc g_nvrtc;
std::mutex g_nvrtc_mutex;

template <class F> bool sym(void *lib, F &fn, const char *name) {
    *reinterpret_cast<void **>(&fn) = dlsym(lib, name);
    return fn != nullptr;
}

// Load libnvrtc from `path` (absolute, or a name the loader finds); returns "major.minor".
std::string nvrtc_load(const std::string &path) {
    std::lock_guard<std::mutex> lock(g_nvrtc_mutex);
    if (g_nvrtc.lib && g_nvrtc.path == path) {
        int a = 0, b = 0;
        g_nvrtc.version(&a, &b);
        return std::to_string(a) + "." + std::to_string(b);
    }
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        throw std::runtime_error("braze: cannot load libnvrtc '" + path +
                                 "': " + (err ? err : "unknown dlopen error"));
    }
    Nvrtc n;
    n.lib = lib;
    n.path = path;
    if (!(sym(lib, n.version, "nvrtcVersion") && sym(lib, n.create, "nvrtcCreateProgram") &&
          sym(lib, n.compile, "nvrtcCompileProgram") &&
          sym(lib, n.log_size, "nvrtcGetProgramLogSize") &&
          sym(lib, n.get_log, "nvrtcGetProgramLog") && sym(lib, n.ptx_size, "nvrtcGetPTXSize") &&
          sym(lib, n.get_ptx, "nvrtcGetPTX") && sym(lib, n.destroy, "nvrtcDestroyProgram") &&
          sym(lib, n.error_string, "nvrtcGetErrorString"))) {
        dlclose(lib);
        throw std::runtime_error("braze: '" + path + "' is not a usable libnvrtc (missing symbols)");
    }
    sym(lib, n.cubin_size, "nvrtcGetCUBINSize");  // optional (NVRTC >= 11.1)
    sym(lib, n.get_cubin, "nvrtcGetCUBIN");
    g_nvrtc = n;  // a previous library stays loaded: programs may be in flight elsewhere
    int a = 0, b = 0;
    n.version(&a, &b);
    return std::to_string(a) + "." + std::to_string(b);
}

// Compile CUDA C `src` for `arch` ("compute_80": PTX; "sm_80" with cubin=true: CUBIN).
nb::bytes nvrtc_compile(const std::string &src, const std::string &name, const std::string &arch,
                        bool cubin, const std::vector<std::string> &options) {
    Nvrtc n;
    {
        std::lock_guard<std::mutex> lock(g_nvrtc_mutex);
        n = g_nvrtc;
    }
    if (!n.lib) throw std::runtime_error("braze: libnvrtc is not loaded (call nvrtc_load first)");
    if (cubin && !n.get_cubin)
        throw std::runtime_error("braze: this libnvrtc cannot produce CUBIN");
    std::vector<std::string> opts = {"--gpu-architecture=" + arch, "--std=c++17"};
    opts.insert(opts.end(), options.begin(), options.end());
    std::vector<const char *> copts;
    for (auto &o : opts) copts.push_back(o.c_str());
    std::string out, log;
    int rc = 0;
    {
        nb::gil_scoped_release release;
        nvrtcProgram prog = nullptr;
        rc = n.create(&prog, src.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
        if (rc == 0) {
            rc = n.compile(prog, (int) copts.size(), copts.data());
            size_t sz = 0;
            n.log_size(prog, &sz);
            log.assign(sz, '\0');
            if (sz) n.get_log(prog, &log[0]);
            if (rc == 0) {
                sz = 0;
                (cubin ? n.cubin_size : n.ptx_size)(prog, &sz);
                out.assign(sz, '\0');
                if (sz) (cubin ? n.get_cubin : n.get_ptx)(prog, &out[0]);
            }
            n.destroy(&prog);
        }
    }
    if (rc != 0) {
        while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
        throw std::runtime_error("braze: NVRTC failed to compile kernel " + name + " (" +
                                 n.error_string(rc) + ")\n" + log);
    }
    return nb::bytes(out.data(), out.size());
}

// ---------------------------------------------------------------- CUDA driver API
// libcuda is dlopen'ed ("libcuda.so.1"); never linked. Handles are plain integers.
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef unsigned long long CUdeviceptr;
struct Cuda {
    void *lib = nullptr;
    CUcontext ctx = nullptr;
    CUresult (*init)(unsigned) = nullptr;
    CUresult (*driver_version)(int *) = nullptr;
    CUresult (*device_count)(int *) = nullptr;
    CUresult (*device_get)(CUdevice *, int) = nullptr;
    CUresult (*device_name)(char *, int, CUdevice) = nullptr;
    CUresult (*device_attr)(int *, int, CUdevice) = nullptr;
    CUresult (*retain)(CUcontext *, CUdevice) = nullptr;
    CUresult (*set_current)(CUcontext) = nullptr;
    CUresult (*module_load)(CUmodule *, const void *) = nullptr;
    CUresult (*get_function)(CUfunction *, CUmodule, const char *) = nullptr;
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = nullptr;
    CUresult (*mem_free)(CUdeviceptr) = nullptr;
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = nullptr;
    CUresult (*dtoh)(void *, CUdeviceptr, size_t) = nullptr;
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, void *, void **, void **) = nullptr;
    CUresult (*sync)() = nullptr;
    CUresult (*error_string)(CUresult, const char **) = nullptr;
};
Cuda g_cuda;
std::mutex g_cuda_mutex;

void cu_check(CUresult r, const char *what) {
    if (r == 0) return;
    const char *s = nullptr;
    if (g_cuda.error_string) g_cuda.error_string(r, &s);
    throw std::runtime_error(std::string("braze: CUDA ") + what + " failed (" +
                             std::to_string(r) + ": " + (s ? s : "unknown error") + ")");
}

// Load the driver and count devices: 0 (with a reason in `why`) where there is none.
nb::tuple cuda_probe(const std::string &path) {
    std::lock_guard<std::mutex> lock(g_cuda_mutex);
    if (!g_cuda.lib) {
        void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *err = dlerror();
            return nb::make_tuple(0, std::string("no CUDA driver: ") + (err ? err : path));
        }
        Cuda c;
        c.lib = lib;
        bool ok = sym(lib, c.init, "cuInit") && sym(lib, c.driver_version, "cuDriverGetVersion") &&
                  sym(lib, c.device_count, "cuDeviceGetCount") &&
                  sym(lib, c.device_get, "cuDeviceGet") &&
                  sym(lib, c.device_name, "cuDeviceGetName") &&
                  sym(lib, c.device_attr, "cuDeviceGetAttribute") &&
                  sym(lib, c.retain, "cuDevicePrimaryCtxRetain") &&
                  sym(lib, c.set_current, "cuCtxSetCurrent") &&
                  sym(lib, c.module_load, "cuModuleLoadData") &&
                  sym(lib, c.get_function, "cuModuleGetFunction") &&
                  sym(lib, c.mem_alloc, "cuMemAlloc_v2") && sym(lib, c.mem_free, "cuMemFree_v2") &&
                  sym(lib, c.htod, "cuMemcpyHtoD_v2") && sym(lib, c.dtoh, "cuMemcpyDtoH_v2") &&
                  sym(lib, c.launch, "cuLaunchKernel") && sym(lib, c.sync, "cuCtxSynchronize") &&
                  sym(lib, c.error_string, "cuGetErrorString");
        if (!ok) {
            dlclose(lib);
            return nb::make_tuple(0, std::string("libcuda lacks driver API symbols"));
        }
        CUresult r = c.init(0);
        if (r != 0) {
            dlclose(lib);
            return nb::make_tuple(0, "cuInit failed (" + std::to_string(r) + ")");
        }
        g_cuda = c;
    }
    int n = 0;
    CUresult r = g_cuda.device_count(&n);
    if (r != 0) return nb::make_tuple(0, "cuDeviceGetCount failed (" + std::to_string(r) + ")");
    return nb::make_tuple(n, std::string(n ? "" : "no CUDA device"));
}

void ensure_ctx() {
    std::lock_guard<std::mutex> lock(g_cuda_mutex);
    if (!g_cuda.lib) throw std::runtime_error("braze: CUDA driver not loaded (cuda_probe first)");
    if (!g_cuda.ctx) {
        CUdevice dev;
        cu_check(g_cuda.device_get(&dev, 0), "cuDeviceGet");
        cu_check(g_cuda.retain(&g_cuda.ctx, dev), "cuDevicePrimaryCtxRetain");
    }
    cu_check(g_cuda.set_current(g_cuda.ctx), "cuCtxSetCurrent");
}

// (name, compute capability major, minor, multiprocessors, driver version) of device 0.
nb::tuple cuda_device() {
    ensure_ctx();
    CUdevice dev;
    cu_check(g_cuda.device_get(&dev, 0), "cuDeviceGet");
    char name[256] = {0};
    cu_check(g_cuda.device_name(name, 255, dev), "cuDeviceGetName");
    int major = 0, minor = 0, sms = 0, ver = 0;
    cu_check(g_cuda.device_attr(&major, 75, dev), "cuDeviceGetAttribute");  // CC major
    cu_check(g_cuda.device_attr(&minor, 76, dev), "cuDeviceGetAttribute");  // CC minor
    cu_check(g_cuda.device_attr(&sms, 16, dev), "cuDeviceGetAttribute");    // SM count
    cu_check(g_cuda.driver_version(&ver), "cuDriverGetVersion");
    return nb::make_tuple(std::string(name), major, minor, sms, ver);
}

// Load a PTX or CUBIN image and resolve `name`; returns the CUfunction as an integer.
uint64_t cuda_load(nb::bytes image, const std::string &name) {
    ensure_ctx();
    std::string img(image.c_str(), image.size());
    img.push_back('\0');  // PTX must be NUL-terminated; harmless for CUBIN
    CUmodule mod = nullptr;
    cu_check(g_cuda.module_load(&mod, img.data()), "cuModuleLoadData");
    CUfunction fn = nullptr;
    cu_check(g_cuda.get_function(&fn, mod, name.c_str()), "cuModuleGetFunction");
    return (uint64_t) (uintptr_t) fn;
}

uint64_t cuda_malloc(size_t n) {
    ensure_ctx();
    CUdeviceptr p = 0;
    cu_check(g_cuda.mem_alloc(&p, n ? n : 1), "cuMemAlloc");
    return (uint64_t) p;
}

void cuda_free(uint64_t p) {
    ensure_ctx();
    cu_check(g_cuda.mem_free((CUdeviceptr) p), "cuMemFree");
}

using HostIn = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using HostOut = nb::ndarray<nb::c_contig, nb::device::cpu>;

void cuda_upload(uint64_t dst, const HostIn &src) {
    ensure_ctx();
    nb::gil_scoped_release release;
    cu_check(g_cuda.htod((CUdeviceptr) dst, src.data(), src.nbytes()), "cuMemcpyHtoD");
}

void cuda_download(const HostOut &dst, uint64_t src) {
    ensure_ctx();
    nb::gil_scoped_release release;
    cu_check(g_cuda.dtoh(dst.data(), (CUdeviceptr) src, dst.nbytes()), "cuMemcpyDtoH");
}

// Launch: one device pointer per buffer parameter, then the int64 args passed by value.
void cuda_launch(uint64_t fn, unsigned grid, unsigned block, const std::vector<uint64_t> &ptrs,
                 const Args &args, bool sync) {
    ensure_ctx();
    std::vector<CUdeviceptr> p(ptrs.begin(), ptrs.end());
    std::vector<void *> params;
    for (auto &x : p) params.push_back(&x);
    std::vector<int64_t> a(args.data(), args.data() + args.shape(0));
    params.push_back(a.data());  // struct bz_args<N> { int64_t a[N]; } by value
    nb::gil_scoped_release release;
    cu_check(g_cuda.launch((CUfunction) (uintptr_t) fn, grid, 1, 1, block, 1, 1, 0, nullptr,
                           params.data(), nullptr), "cuLaunchKernel");
    if (sync) cu_check(g_cuda.sync(), "cuCtxSynchronize");
}

void cuda_synchronize() {
    ensure_ctx();
    nb::gil_scoped_release release;
    cu_check(g_cuda.sync(), "cuCtxSynchronize");
}

// ---------------------------------------------------------------- cuBLAS
// libcublas is dlopen'ed (the nvidia-cublas wheel's, or one on the loader path); never linked.
// It works in the driver API's current context (the device's primary context, ensure_ctx).
typedef int cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
struct Cublas {
    void *lib = nullptr;
    cublasHandle_t handle = nullptr;
    cublasStatus_t (*create)(cublasHandle_t *) = nullptr;
    cublasStatus_t (*version)(cublasHandle_t, int *) = nullptr;
    cublasStatus_t (*sgemm)(cublasHandle_t, int, int, int, int, int, const float *, const float *,
                            int, long long, const float *, int, long long, const float *, float *,
                            int, long long, int) = nullptr;
    cublasStatus_t (*dgemm)(cublasHandle_t, int, int, int, int, int, const double *,
                            const double *, int, long long, const double *, int, long long,
                            const double *, double *, int, long long, int) = nullptr;
};
Cublas g_cublas;
std::mutex g_cublas_mutex;

// Load libcublas from `path` and create its handle (needs a device); returns its version.
int cublas_load(const std::string &path) {
    ensure_ctx();
    std::lock_guard<std::mutex> lock(g_cublas_mutex);
    if (!g_cublas.lib) {
        void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *err = dlerror();
            throw std::runtime_error("braze: cannot load cuBLAS '" + path +
                                     "': " + (err ? err : "unknown dlopen error"));
        }
        Cublas c;
        c.lib = lib;
        if (!(sym(lib, c.create, "cublasCreate_v2") && sym(lib, c.version, "cublasGetVersion_v2") &&
              sym(lib, c.sgemm, "cublasSgemmStridedBatched") &&
              sym(lib, c.dgemm, "cublasDgemmStridedBatched"))) {
            dlclose(lib);
            throw std::runtime_error("braze: '" + path + "' lacks cuBLAS symbols");
        }
        if (c.create(&c.handle) != 0) {
            dlclose(lib);
            throw std::runtime_error("braze: cublasCreate failed");
        }
        g_cublas = c;
    }
    int v = 0;
    g_cublas.version(g_cublas.handle, &v);
    return v;
}

// Row-major C[b] = A[b] @ B[b] (M x K times K x N; batch strides in elements, 0 broadcasts):
// column-major cuBLAS computes C^T = B^T A^T on the same memory.
void cublas_gemm(bool is_double, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t sa,
                 uint64_t b, int64_t sb, uint64_t c, int64_t sc, int64_t batch) {
    ensure_ctx();
    std::lock_guard<std::mutex> lock(g_cublas_mutex);
    if (!g_cublas.handle) throw std::runtime_error("braze: cuBLAS is not loaded");
    nb::gil_scoped_release release;
    cublasStatus_t r;
    if (is_double) {
        const double one = 1.0, zero = 0.0;
        r = g_cublas.dgemm(g_cublas.handle, 0, 0, (int) n, (int) m, (int) k, &one,
                           (const double *) b, (int) n, sb, (const double *) a, (int) k, sa, &zero,
                           (double *) c, (int) n, sc, (int) batch);
    } else {
        const float one = 1.0f, zero = 0.0f;
        r = g_cublas.sgemm(g_cublas.handle, 0, 0, (int) n, (int) m, (int) k, &one,
                           (const float *) b, (int) n, sb, (const float *) a, (int) k, sa, &zero,
                           (float *) c, (int) n, sc, (int) batch);
    }
    if (r != 0) throw std::runtime_error("braze: cuBLAS gemm failed (status " + std::to_string(r) + ")");
}

}  // namespace

NB_MODULE(_core, m) {
    register_element_access(m);
    register_functions(m);
    register_vmath(m);
    m.doc() = "braze native extension: host facts, generated-kernel loading and launching, NVRTC and the CUDA driver (both dlopened at run time).";
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

    m.def(
        "placement_moves", []() { return g_moves; },
        "How many times the placement re-set the workers' CPUs (the caller had moved).");
    m.def("place_workers", &place_workers, nb::arg("thread_ids"),
          "Keep these OpenMP worker threads (Linux thread ids) off the CPU the calling thread\n"
          "runs on at each of its native calls (see core.cpp, thread placement).");
    m.def("numpy_probe", &numpy_probe, nb::arg("array"), nb::arg("ndarray_type"),
          "(data pointer, C-contiguous, ndim, base address or 0) of a numpy.ndarray read\n"
          "through numpy's object layout.");
    m.def("numpy_register", &numpy_register, nb::arg("type"),
          "Let Program.set/bind read numpy.ndarray pointers directly (after numpy_probe\n"
          "agreed with ndarray.ctypes).");
    nb::class_<Program>(m, "Program",
                        "A prepared schedule's native kernel calls over a slot-pointer table.")
        .def(nb::init<size_t>(), nb::arg("n_slots"))
        .def("add", &Program::add, nb::arg("handle"), nb::arg("slots"), nb::arg("args"),
             nb::arg("status") = -1,
             "Append kernel `handle` over `slots` with int64 `args` (kept alive); its index. "
             "`status`: the slot of an int64 the kernel sets non-zero on bad input.")
        .def("set", &Program::set, nb::arg("slot"), nb::arg("array"),
             "Point `slot` at a C-contiguous CPU array's data (never copied).")
        .def("set_bound", &Program::set_bound, nb::arg("slots"),
             "The slots bind() sets, in order.")
        .def("bind", &Program::bind, nb::arg("arrays"),
             "set() each slot of set_bound() to the array at its position in `arrays`.")
        .def("run", &Program::run, nb::arg("lo"), nb::arg("hi"),
             "Run kernel calls [lo, hi) in order with the GIL released; -1, or the index of "
             "the call whose status stopped the run.")
        .def("run_timed", &Program::run_timed, nb::arg("lo"), nb::arg("hi"),
             "run(lo, hi), returning each call's wall time in nanoseconds (up to a call "
             "whose status stopped the run).")
        .def("__len__", &Program::size);

    m.def("nvrtc_load", &nvrtc_load, nb::arg("path"),
          "dlopen libnvrtc at `path` (absolute, or a name on the loader path); returns its\n"
          "version 'major.minor'. RuntimeError with the loader's message on failure.");
    m.def("nvrtc_compile", &nvrtc_compile, nb::arg("source"), nb::arg("name"), nb::arg("arch"),
          nb::arg("cubin") = false, nb::arg("options") = std::vector<std::string>(),
          "Compile CUDA C with NVRTC (GIL released): PTX for arch 'compute_XX', CUBIN for\n"
          "'sm_XX' with cubin=True. RuntimeError carrying NVRTC's log on a compile error.");
    m.def("cuda_probe", &cuda_probe, nb::arg("path") = "libcuda.so.1",
          "dlopen the CUDA driver and cuInit: (device count, reason when 0). Never raises.");
    m.def("cuda_device", &cuda_device, "(name, cc major, cc minor, SMs, driver version) of device 0.");
    m.def("cuda_load", &cuda_load, nb::arg("image"), nb::arg("name"),
          "Load a PTX/CUBIN image, return the function `name` as an integer handle.");
    m.def("cuda_malloc", &cuda_malloc, nb::arg("nbytes"), "cuMemAlloc; returns the device pointer.");
    m.def("cuda_free", &cuda_free, nb::arg("ptr"), "cuMemFree.");
    m.def("cuda_upload", &cuda_upload, nb::arg("dst"), nb::arg("src").noconvert(),
          "Copy a C-contiguous host array to device pointer `dst`.");
    m.def("cuda_download", &cuda_download, nb::arg("dst").noconvert(), nb::arg("src"),
          "Copy device memory at `src` into a C-contiguous host array.");
    m.def("cuda_launch", &cuda_launch, nb::arg("fn"), nb::arg("grid"), nb::arg("block"),
          nb::arg("ptrs"), nb::arg("args").noconvert(), nb::arg("sync") = false,
          "cuLaunchKernel(fn) on a 1-d grid: buffer pointers, then the int64 args by value.");
    m.def("cuda_synchronize", &cuda_synchronize, "cuCtxSynchronize.");
    m.def("cublas_load", &cublas_load, nb::arg("path"),
          "dlopen cuBLAS at `path` and create its handle on device 0; returns its version.");
    m.def("cublas_gemm", &cublas_gemm, nb::arg("is_double"), nb::arg("m"), nb::arg("n"),
          nb::arg("k"), nb::arg("a"), nb::arg("sa"), nb::arg("b"), nb::arg("sb"), nb::arg("c"),
          nb::arg("sc"), nb::arg("batch"),
          "Row-major C[i] = A[i] @ B[i] on device pointers (strided batches, 0: broadcast).");
}
