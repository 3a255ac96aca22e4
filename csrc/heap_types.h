// Pieces every garbage-collected heap type of braze._core shares (elements.cpp,
// functions.cpp): its dealloc (untrack, clear the references, free, release the type, as
// a heap type created with PyType_FromSpec must), a getter's "the field, or None", and a
// setter's reference swap (Py_XSETREF is not in every stable ABI this builds for).
#pragma once

#include <Python.h>

template <inquiry Clear>
void heap_type_dealloc(PyObject* self) {
    PyTypeObject* tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Clear(self);
    auto free_fn = reinterpret_cast<freefunc>(PyType_GetSlot(tp, Py_tp_free));
    free_fn(self);
    Py_DECREF(tp);
}

inline PyObject* new_reference_or_none(PyObject* field) {
    PyObject* o = field ? field : Py_None;
    Py_INCREF(o);
    return o;
}

// `field` = a new reference to `value` (may be null); the old one released last (its
// destructor may run code that reads the field).
inline void replace_reference(PyObject*& field, PyObject* value) {
    Py_XINCREF(value);
    PyObject* old = field;
    field = value;
    Py_XDECREF(old);
}
