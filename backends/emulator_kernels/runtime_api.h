// What kernel code sees of the GPU emulator's runtime (the fiber scheduler of runtime.cc):
// thread and block indices, the barrier, warp shuffles, the launch. Included by both shims
// and by the runtime itself.
#ifndef BZ_EMU_RUNTIME_API_H
#define BZ_EMU_RUNTIME_API_H
struct bz_emu_dim3 {
    unsigned int x, y, z;
};
extern "C" bz_emu_dim3 bz_emu_tidx, bz_emu_bidx, bz_emu_bdim, bz_emu_gdim;
extern "C" void bz_emu_syncthreads(void);
extern "C" void bz_emu_shuffle_xor(void* value, unsigned int size, int lane_mask);
extern "C" int bz_emu_run(unsigned int grid, unsigned int block, void (*fn)(void), char* err,
                          int errlen);
#endif  // BZ_EMU_RUNTIME_API_H
