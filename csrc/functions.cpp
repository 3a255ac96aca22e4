// braze._core.ElementwiseFunction: braze's elementwise functions (bz.tanh, bz.add...)
// answering numpy scalars without a Python call.
//
// `x[i]` of an evaluated array is a numpy scalar, so a scalar loop calls braze's functions
// on numpy scalars (`trace += bz.tanh(a[i, i])`), where braze gives numpy's answer
// (arrays/array.py, numpy_scalar_fn). A Python function in between costs more than numpy's
// own scalar call. An ElementwiseFunction holds the function that decides (`general`: the
// array path, which also works out the numpy function for new operand types) and a few
// entries (operand types -> the function that computes exactly braze's answer for them,
// registered by `general`); a call whose operand types match an entry goes straight to
// it, every other call to `general`, with the same arguments.
#include <nanobind/nanobind.h>

#include <cstddef>

#include "heap_types.h"
#include "registry.h"

#if PY_VERSION_HEX >= 0x030C0000
#define BZ_T_PYSSIZET Py_T_PYSSIZET
#define BZ_READONLY Py_READONLY
#else
#include <structmember.h>
#define BZ_T_PYSSIZET T_PYSSIZET
#define BZ_READONLY READONLY
#endif

namespace nb = nanobind;

namespace {

constexpr int kEntries = 8;  // operand-type combinations served natively per function

struct FunctionObject {
    PyObject ob_base;
    vectorcallfunc vectorcall;
    PyObject* dict;     // __name__, __doc__, __wrapped__... (as a Python function has)
    PyObject* general;  // every call no entry serves
    int arity;
    int n;                        // entries in use
    PyObject* keys[kEntries][2];  // operand types (the second null for one operand)
    PyObject* fns[kEntries];
};

PyObject* function_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                              PyObject* kwnames) {
    auto* f = reinterpret_cast<FunctionObject*>(self);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!kwnames && nargs == f->arity) {
        PyObject* t0 = (PyObject*)Py_TYPE(args[0]);
        PyObject* t1 = nargs == 2 ? (PyObject*)Py_TYPE(args[1]) : nullptr;
        for (int i = 0; i < f->n; ++i)
            if (f->keys[i][0] == t0 && f->keys[i][1] == t1)
                return PyObject_Vectorcall(f->fns[i], args, nargs, nullptr);
    }
    return PyObject_Vectorcall(f->general, args, nargsf, kwnames);
}

PyObject* function_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
    PyObject* general;
    int arity;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "ElementwiseFunction(general, arity): no keywords");
        return nullptr;
    }
    if (!PyArg_ParseTuple(args, "Oi:ElementwiseFunction", &general, &arity)) return nullptr;
    if (arity != 1 && arity != 2) {
        PyErr_SetString(PyExc_ValueError, "ElementwiseFunction: arity must be 1 or 2");
        return nullptr;
    }
    auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(type, Py_tp_alloc));
    auto* f = reinterpret_cast<FunctionObject*>(alloc(type, 0));
    if (!f) return nullptr;
    f->vectorcall = function_vectorcall;
    f->dict = PyDict_New();
    if (!f->dict) {
        Py_DECREF(f);
        return nullptr;
    }
    Py_INCREF(general);
    f->general = general;
    f->arity = arity;
    return reinterpret_cast<PyObject*>(f);
}

int function_traverse(PyObject* self, visitproc visit, void* arg) {
    auto* f = reinterpret_cast<FunctionObject*>(self);
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(f->dict);
    Py_VISIT(f->general);
    for (int i = 0; i < f->n; ++i) {
        Py_VISIT(f->keys[i][0]);
        Py_VISIT(f->keys[i][1]);
        Py_VISIT(f->fns[i]);
    }
    return 0;
}

int function_clear(PyObject* self) {
    auto* f = reinterpret_cast<FunctionObject*>(self);
    Py_CLEAR(f->dict);
    Py_CLEAR(f->general);
    for (int i = 0; i < f->n; ++i) {
        Py_CLEAR(f->keys[i][0]);
        Py_CLEAR(f->keys[i][1]);
        Py_CLEAR(f->fns[i]);
    }
    f->n = 0;
    return 0;
}

PyObject* function_repr(PyObject* self) {
    auto* f = reinterpret_cast<FunctionObject*>(self);
    PyObject* name = f->dict ? PyDict_GetItemString(f->dict, "__name__") : nullptr;  // borrowed
    return name ? PyUnicode_FromFormat("<braze function %S>", name)
                : PyUnicode_FromString("<braze function>");
}

// _register((types...), fn): serve calls with exactly these operand types by fn; False
// when the entries are full (the general function keeps answering them).
PyObject* function_register(PyObject* self, PyObject* args) {
    auto* f = reinterpret_cast<FunctionObject*>(self);
    PyObject *types, *fn;
    if (!PyArg_ParseTuple(args, "OO:_register", &types, &fn)) return nullptr;
    if (!PyTuple_Check(types) || PyTuple_Size(types) != f->arity) {
        PyErr_Format(PyExc_TypeError, "_register: expected a tuple of %d types", f->arity);
        return nullptr;
    }
    PyObject* key[2] = {nullptr, nullptr};
    for (int i = 0; i < f->arity; ++i) {
        key[i] = PyTuple_GetItem(types, i);
        if (!PyType_Check(key[i])) {
            PyErr_SetString(PyExc_TypeError, "_register: operand types must be types");
            return nullptr;
        }
    }
    for (int i = 0; i < f->n; ++i)
        if (f->keys[i][0] == key[0] && f->keys[i][1] == key[1]) {
            replace_reference(f->fns[i], fn);
            Py_RETURN_TRUE;
        }
    if (f->n == kEntries) Py_RETURN_FALSE;
    Py_XINCREF(key[0]);
    Py_XINCREF(key[1]);
    Py_INCREF(fn);
    f->keys[f->n][0] = key[0];
    f->keys[f->n][1] = key[1];
    f->fns[f->n] = fn;
    ++f->n;
    Py_RETURN_TRUE;
}

PyObject* function_get_general(PyObject* self, void*) {
    PyObject* g = reinterpret_cast<FunctionObject*>(self)->general;
    Py_INCREF(g);
    return g;
}

PyMethodDef function_methods[] = {
    {"_register", function_register, METH_VARARGS,
     "_register(types, fn): calls with exactly these operand types go to fn (False: the\n"
     "entries are full; the general function keeps answering them)."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef function_getset[] = {
    {"_general", function_get_general, nullptr, "The function every other call goes to.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMemberDef function_members[] = {
    {"__vectorcalloffset__", BZ_T_PYSSIZET, offsetof(FunctionObject, vectorcall), BZ_READONLY,
     nullptr},
    {"__dictoffset__", BZ_T_PYSSIZET, offsetof(FunctionObject, dict), BZ_READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot function_slots[] = {
    {Py_tp_doc, (void*)"ElementwiseFunction(general, arity): calls `general`, except "
                       "those whose operand types a registered entry serves."},
    {Py_tp_new, (void*)function_new},
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_dealloc, (void*)heap_type_dealloc<function_clear>},
    {Py_tp_traverse, (void*)function_traverse},
    {Py_tp_clear, (void*)function_clear},
    {Py_tp_repr, (void*)function_repr},
    {Py_tp_methods, function_methods},
    {Py_tp_getset, function_getset},
    {Py_tp_members, function_members},
    {0, nullptr},
};

PyType_Spec function_spec = {"braze._core.ElementwiseFunction", sizeof(FunctionObject), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                             function_slots};

}  // namespace

void register_functions(nb::module_& m) {
    PyObject* type = PyType_FromSpec(&function_spec);
    if (!type) throw nb::python_error();
    m.attr("ElementwiseFunction") = nb::steal(type);
}
