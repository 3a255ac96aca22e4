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
BZ_FN uint64_t bz_threefry2x32(uint64_t key, uint64_t counter) {
    const uint32_t k0 = (uint32_t)(key >> 32), k1 = (uint32_t)key;
    const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
    uint32_t x0 = (uint32_t)(counter >> 32) + k0, x1 = (uint32_t)counter + k1;
    // five groups of four rounds (rotations 13 15 26 6 / 17 29 16 24), a key injection after each
    x0 += x1;
    x1 = bz_rotl32(x1, 13u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 15u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 26u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 6u) ^ x0;
    x0 += k1;
    x1 += k2 + 1u;
    x0 += x1;
    x1 = bz_rotl32(x1, 17u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 29u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 16u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 24u) ^ x0;
    x0 += k2;
    x1 += k0 + 2u;
    x0 += x1;
    x1 = bz_rotl32(x1, 13u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 15u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 26u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 6u) ^ x0;
    x0 += k0;
    x1 += k1 + 3u;
    x0 += x1;
    x1 = bz_rotl32(x1, 17u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 29u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 16u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 24u) ^ x0;
    x0 += k1;
    x1 += k2 + 4u;
    x0 += x1;
    x1 = bz_rotl32(x1, 13u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 15u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 26u) ^ x0;
    x0 += x1;
    x1 = bz_rotl32(x1, 6u) ^ x0;
    x0 += k2;
    x1 += k0 + 5u;
    return ((uint64_t)x0 << 32) | (uint64_t)x1;
}
BZ_FN uint32_t bz_threefry2x32_x0(uint64_t key, uint64_t counter) {
    return (uint32_t)(bz_threefry2x32(key, counter) >> 32);
}
BZ_FN uint32_t bz_threefry2x32_x1(uint64_t key, uint64_t counter) {
    return (uint32_t)bz_threefry2x32(key, counter);
}
