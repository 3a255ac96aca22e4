// Pieces every garbage-collected heap type of braze._core shares (elements.cpp,
// functions.cpp): its dealloc (untrack, clear the references, free, release the type, as
// a heap type created with PyType_FromSpec must) and a getter's "the field, or None".
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
