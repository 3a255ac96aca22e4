// Counter-based random bits for the generated kernels (graph/ops/random.py's
// threefry2x32_x0 / _x1 records): Threefry-2x32 with 20 rounds (Salmon et al. 2011), the exact
// function of graph/ops/random.py's numpy reference, so every backend draws the same bits. Packed
// words: key = k0 << 32 | k1, counter = c_hi << 32 | c_lo; the block is x0 << 32 | x1. Pure 32-bit
// adds, rotates and xors (a rotate by a constant is one instruction where the ISA has it:
// AVX-512 vprold, NEON via shifts); the two words of one counter are one computation once
// inlined (the words by constant shifts: a generated shift by a runtime amount is a select
// that keeps gcc 12 from vectorizing a loop that also calls libmvec). Written in the vocabulary of
// a dialect prelude (cpu_prelude.h, cuda_prelude.h, metal_prelude.h).
BZ_FN uint32_t bz_rotl32(uint32_t x, uint32_t r) { return (x << r) | (x >> (32u - r)); }
// one mix: x0 += x1; x1 = rotl(x1, r) ^ x0 -- four of them, then the key injection ka, kb + n
#define BZ_TF_MIX(r) \
    x0 += x1;        \
    x1 = bz_rotl32(x1, r) ^ x0;
#define BZ_TF_ROUNDS(ra, rb, rc, rd, ka, kb, n)                       \
    BZ_TF_MIX(ra) BZ_TF_MIX(rb) BZ_TF_MIX(rc) BZ_TF_MIX(rd) x0 += ka; \
    x1 += kb + n;
BZ_FN uint64_t bz_threefry2x32(uint64_t key, uint64_t counter) {
    const uint32_t k0 = (uint32_t)(key >> 32), k1 = (uint32_t)key;
    const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
    uint32_t x0 = (uint32_t)(counter >> 32) + k0, x1 = (uint32_t)counter + k1;
    // five groups of four rounds (rotations 13 15 26 6 / 17 29 16 24), a key injection after each
    BZ_TF_ROUNDS(13u, 15u, 26u, 6u, k1, k2, 1u)
    BZ_TF_ROUNDS(17u, 29u, 16u, 24u, k2, k0, 2u)
    BZ_TF_ROUNDS(13u, 15u, 26u, 6u, k0, k1, 3u)
    BZ_TF_ROUNDS(17u, 29u, 16u, 24u, k1, k2, 4u)
    BZ_TF_ROUNDS(13u, 15u, 26u, 6u, k2, k0, 5u)
    return ((uint64_t)x0 << 32) | (uint64_t)x1;
}
BZ_FN uint32_t bz_threefry2x32_x0(uint64_t key, uint64_t counter) {
    return (uint32_t)(bz_threefry2x32(key, counter) >> 32);
}
BZ_FN uint32_t bz_threefry2x32_x1(uint64_t key, uint64_t counter) {
    return (uint32_t)bz_threefry2x32(key, counter);
}
