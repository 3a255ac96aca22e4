// numpy.ndarray read through numpy's public object layout (what numpy's own PyArray_DATA,
// PyArray_NDIM, PyArray_BASE and PyArray_FLAGS macros read), once Python has registered
// the type after checking the layout against ndarray.ctypes on probe arrays
// (`numpy_probe`, `numpy_register` in core.cpp). Until then g_ndarray_type is null and
// every reader takes its general path.
#pragma once

#include <Python.h>

struct NpyArrayHead {  // the leading fields of numpy's PyArrayObject_fields
    PyObject ob_base;
    char* data;
    int nd;
    Py_ssize_t* dimensions;
    Py_ssize_t* strides;
    PyObject* base;
    PyObject* descr;
    int flags;
};
constexpr int kNpyCContiguous = 0x0001;

extern PyObject* g_ndarray_type;
