// Runs one cpu kernel of the uniform ABI (kernel(void** bufs, const int64_t* args)) on
// buffers read from a file, and writes the buffers back: the AArch64 tests build it with
// the kernel's source (its entry point named bz_kernel) and run it under qemu-aarch64.
// File format, little-endian int64 throughout: nbufs, then per buffer its byte count and
// bytes; then nargs and the args. The output file holds nbufs and the buffers again.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" void bz_kernel(void** bufs, const int64_t* args);

static int64_t read_i64(FILE* f) {
    int64_t v = 0;
    if (fread(&v, sizeof v, 1, f) != 1) {
        fprintf(stderr, "harness: truncated input\n");
        exit(2);
    }
    return v;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s INPUT OUTPUT\n", argv[0]);
        return 2;
    }
    FILE* in = fopen(argv[1], "rb");
    if (!in) return 2;
    const int64_t nb = read_i64(in);
    std::vector<std::vector<unsigned char>> data((size_t)nb);
    std::vector<void*> bufs((size_t)nb);
    for (int64_t i = 0; i < nb; ++i) {
        const int64_t n = read_i64(in);
        data[(size_t)i].resize((size_t)n + 64); /* slack: kernels may read a vector past n */
        if (n && fread(data[(size_t)i].data(), 1, (size_t)n, in) != (size_t)n) return 2;
        bufs[(size_t)i] = data[(size_t)i].data();
    }
    const int64_t na = read_i64(in);
    std::vector<int64_t> args((size_t)na + 1);
    for (int64_t i = 0; i < na; ++i) args[(size_t)i] = read_i64(in);
    fclose(in);
    bz_kernel(bufs.data(), args.data());
    FILE* out = fopen(argv[2], "wb");
    if (!out) return 2;
    fwrite(&nb, sizeof nb, 1, out);
    for (int64_t i = 0; i < nb; ++i) {
        const int64_t n = (int64_t)data[(size_t)i].size() - 64;
        fwrite(&n, sizeof n, 1, out);
        fwrite(data[(size_t)i].data(), 1, (size_t)n, out);
    }
    fclose(out);
    return 0;
}
