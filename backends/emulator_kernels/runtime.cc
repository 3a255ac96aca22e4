// braze CUDA emulator runtime: blocks of cooperative fibers
// A fiber starts on its own stack through makecontext/setcontext; afterwards switches use
// _setjmp/_longjmp, which (unlike swapcontext) save no signal mask: no system call.
// Compiled as its own translation unit (it needs the C library's headers) and linked with
// the kernels' (cuda_shim.h or metal_shim.h, the prelude, the kernels, their launchers).
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "runtime_api.h"

extern "C" {
bz_emu_dim3 bz_emu_tidx, bz_emu_bidx, bz_emu_bdim, bz_emu_gdim;
unsigned long long bz_emu_slots[1024];
}

namespace {
enum State { FRESH, RUN, AT_BLOCK, AT_WARP, DONE };
struct Fiber {
    jmp_buf jb;
    int state;
};
const size_t STACK = 128 * 1024;
Fiber* fibers = nullptr;
char* stacks = nullptr;
unsigned int capacity = 0, cur = 0;
jmp_buf sched;
ucontext_t start_ctx;
void (*entry)(void) = nullptr;

void fiber_main() {
    entry();
    fibers[cur].state = DONE;
    _longjmp(sched, 1);
}
void wait_at(int s) {
    fibers[cur].state = s;
    if (!_setjmp(fibers[cur].jb)) _longjmp(sched, 1);
}
}  // namespace

extern "C" void bz_emu_syncthreads(void) { wait_at(AT_BLOCK); }

// __shfl_xor_sync / simd_shuffle_xor: every lane publishes its value, the warp meets, each
// reads its partner's (lane ^ mask), the warp meets again (the slots are reused).
extern "C" void bz_emu_shuffle_xor(void* value, unsigned int size, int lane_mask) {
    const unsigned int t = cur;
    memcpy(&bz_emu_slots[t], value, size);
    wait_at(AT_WARP);
    memcpy(value, &bz_emu_slots[(t & ~31u) | ((t & 31u) ^ (unsigned int)lane_mask)], size);
    wait_at(AT_WARP);
}

// Run `grid` blocks of `block` threads of fn; 0, or -1 with a message in err.
extern "C" int bz_emu_run(unsigned int grid, unsigned int block, void (*fn)(void), char* err,
                          int errlen) {
    if (block == 0 || block > 1024 || block % 32 != 0 || grid == 0) {
        snprintf(err, errlen,
                 "launch of %u blocks of %u threads: a block has 32..1024 threads, "
                 "a multiple of 32, and the grid at least one block",
                 grid, block);
        return -1;
    }
    if (block > capacity) {
        free(fibers);
        free(stacks);
        fibers = (Fiber*)calloc(block, sizeof(Fiber));
        stacks = (char*)malloc((size_t)block * STACK);
        capacity = (fibers && stacks) ? block : 0;
        if (!capacity) {
            snprintf(err, errlen, "out of memory for %u fibers", block);
            return -1;
        }
    }
    entry = fn;
    bz_emu_bdim = {block, 1, 1};
    bz_emu_gdim = {grid, 1, 1};
    for (unsigned int b = 0; b < grid; ++b) {
        bz_emu_bidx = {b, 0, 0};
        for (unsigned int t = 0; t < block; ++t) fibers[t].state = FRESH;
        for (;;) {
            for (unsigned int t = 0; t < block; ++t) {
                Fiber& f = fibers[t];
                if (f.state != RUN && f.state != FRESH) continue;
                cur = t;
                bz_emu_tidx = {t, 0, 0};
                if (_setjmp(sched)) continue;  // the fiber waits or is done
                if (f.state == RUN) _longjmp(f.jb, 1);
                f.state = RUN;
                getcontext(&start_ctx);
                start_ctx.uc_stack.ss_sp = stacks + (size_t)t * STACK;
                start_ctx.uc_stack.ss_size = STACK;
                start_ctx.uc_link = nullptr;
                makecontext(&start_ctx, fiber_main, 0);
                setcontext(&start_ctx);
            }
            // every thread now waits or is done: release what may go on
            unsigned int done = 0, at_block = 0, at_warp = 0;
            bool released = false;
            for (unsigned int w = 0; w < block; w += 32) {
                unsigned int a = 0, d = 0;
                for (unsigned int t = w; t < w + 32; ++t) {
                    a += fibers[t].state == AT_WARP;
                    d += fibers[t].state == DONE;
                }
                if (a && a + d == 32) {
                    if (d) {
                        snprintf(err, errlen,
                                 "block %u: a warp shuffle in warp %u while %u of its lanes "
                                 "had exited (undefined on a GPU)",
                                 b, w / 32, d);
                        return -1;
                    }
                    for (unsigned int t = w; t < w + 32; ++t) fibers[t].state = RUN;
                    released = true;
                }
            }
            if (released) continue;
            for (unsigned int t = 0; t < block; ++t) {
                done += fibers[t].state == DONE;
                at_block += fibers[t].state == AT_BLOCK;
                at_warp += fibers[t].state == AT_WARP;
            }
            if (done == block) break;
            if (at_block == block) {
                for (unsigned int t = 0; t < block; ++t) fibers[t].state = RUN;
                continue;
            }
            snprintf(err, errlen,
                     "block %u: deadlock -- %u threads wait at __syncthreads, %u at a "
                     "warp shuffle, %u have exited (a barrier in divergent code: a GPU would hang "
                     "or be undefined)",
                     b, at_block, at_warp, done);
            return -1;
        }
    }
    return 0;
}
