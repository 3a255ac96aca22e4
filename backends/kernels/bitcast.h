// The bitcast op of the generated kernels: the bits of an S as a D of the same size.
// Written in the vocabulary of a dialect prelude (cpu_prelude.h, cuda_prelude.h, ...).
template <class D, class S>
BZ_FN D bz_bc(S s) {
    return BZ_BITCAST(D, s);
}
