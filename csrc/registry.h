// The parts of braze._core defined outside core.cpp, each added to the module by its
// register function (called from NB_MODULE in core.cpp).
#pragma once

#include <nanobind/nanobind.h>

// braze._core.ArrayBase and NodeBase: element reads and stores of evaluated arrays
// without a Python call (elements.cpp).
void register_element_access(nanobind::module_& m);

// braze._core.ElementwiseFunction: braze's elementwise functions, answering numpy
// scalars without a Python call (functions.cpp).
void register_functions(nanobind::module_& m);

// braze._core.vmath_apply / vmath_functions: the numpy tier's transcendental functions,
// computed by the generated kernels' own code (vmath.cpp).
void register_vmath(nanobind::module_& m);
