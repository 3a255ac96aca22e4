// braze._core.ArrayBase and NodeBase: element reads and stores of evaluated arrays at
// numpy's speed.
//
// A scalar loop (`if x[i] > m: m = x[i]` ... `out[i] = m`) spends its time in subscripts:
// numpy answers one in a few tens of nanoseconds, and a Python-level __getitem__ costs
// several times that before it does anything. braze.Array and braze.graph.Node derive
// from these two types, which hold Array's `_node` and Node's `data`, so the mapping slots
// below find an evaluated array's buffer in a few loads and answer from it (or hand the
// subscript to numpy's own). Everything else calls the Python methods `Array._getitem` /
// `Array._setitem`, which hold braze's rules (arrays/array.py):
//
// * read: an int per axis of an array whose node holds an exact numpy.ndarray, outside
//   tracing: the element as numpy gives it (a numpy scalar), read from the buffer and
//   boxed here for the dtypes Python registered (see "direct elements"), else through
//   numpy's subscript. Out of bounds: the general path raises braze's message.
// * store: `x[i] = v` (an int) into a node that Python armed (`Node._arm_store(type)`,
//   after it stored a value of that type in place), v of exactly that type, and the node,
//   its data and the data's base referenced only as when x alone holds them (the counts
//   Python calibrated): written into the buffer (registered dtypes, writeable memory) or
//   by numpy's store. Anything else (another type, a shared buffer, numpy refusing:
//   read-only memory, an integer out of range) goes to `_setitem`. Setting a node's data
//   disarms it.
// * While any thread traces a compiled function (`tracing(+1)` / `tracing(-1)`),
//   everything goes to the Python methods, which record instead.
#include <nanobind/nanobind.h>
#include <nanobind/stl/tuple.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>

#include "heap_types.h"
#include "numpy_layout.h"
#include "registry.h"

namespace nb = nanobind;

namespace {

struct NodeObject {
    PyObject ob_base;
    PyObject* data;        // the node's value (None/null: pending)
    PyObject* store_type;  // armed: the value type stored in place without Python (or null)
    uint64_t seq;          // creation order: nodes recorded later have larger numbers
};

uint64_t g_node_seq = 0;

PyObject* node_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
    PyObject* self = PyType_GenericNew(type, args, kwargs);
    if (self) reinterpret_cast<NodeObject*>(self)->seq = ++g_node_seq;
    return self;
}

struct ArrayObject {
    PyObject ob_base;
    PyObject* node;
};

PyObject* g_node_type = nullptr;   // braze.graph.node.Node, once registered
Py_ssize_t g_sole[3] = {0, 0, 0};  // references of a sole node, its data, the data's base
long g_tracing = 0;
PyTypeObject* g_node_base = nullptr;  // the two types below
PyTypeObject* g_array_base = nullptr;
PyObject* g_getitem = nullptr;  // interned method names
PyObject* g_setitem = nullptr;

// ------------------------------------------------------------------ NodeBase
int node_traverse(PyObject* self, visitproc visit, void* arg) {
    auto* n = reinterpret_cast<NodeObject*>(self);
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(n->data);
    Py_VISIT(n->store_type);
    return 0;
}

int node_clear(PyObject* self) {
    auto* n = reinterpret_cast<NodeObject*>(self);
    Py_CLEAR(n->data);
    Py_CLEAR(n->store_type);
    return 0;
}

PyObject* node_get_data(PyObject* self, void*) {
    return new_reference_or_none(reinterpret_cast<NodeObject*>(self)->data);
}

int node_set_data(PyObject* self, PyObject* value, void*) {
    auto* n = reinterpret_cast<NodeObject*>(self);
    replace_reference(n->data, value);
    Py_CLEAR(n->store_type);  // a new buffer: Python decides again
    return 0;
}

PyObject* node_arm_store(PyObject* self, PyObject* type) {
    auto* n = reinterpret_cast<NodeObject*>(self);
    replace_reference(n->store_type, type);
    Py_RETURN_NONE;
}

PyObject* node_get_store_type(PyObject* self, void*) {
    return new_reference_or_none(reinterpret_cast<NodeObject*>(self)->store_type);
}

PyObject* node_get_seq(PyObject* self, void*) {
    return PyLong_FromUnsignedLongLong(reinterpret_cast<NodeObject*>(self)->seq);
}

PyGetSetDef node_getset[] = {
    {"data", node_get_data, node_set_data,
     "The node's value (a numpy array or scalar), None while it is pending.", nullptr},
    {"_store_type", node_get_store_type, nullptr,
     "The value type the native store path writes in place (None: not armed).", nullptr},
    {"_seq", node_get_seq, nullptr,
     "Creation order (a process-wide count): a loop's graph in the order it was recorded.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef node_methods[] = {
    {"_arm_store", node_arm_store, METH_O,
     "Let `x[i] = v` with v of exactly this type store into this node's data without a "
     "Python call while the node's references show one holder (see elements.cpp)."},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot node_slots[] = {
    {Py_tp_doc, (void*)"braze.graph.Node's native part: its data, read by the element "
                       "fast paths of ArrayBase."},
    {Py_tp_new, (void*)node_new},
    {Py_tp_dealloc, (void*)heap_type_dealloc<node_clear>},
    {Py_tp_traverse, (void*)node_traverse},
    {Py_tp_clear, (void*)node_clear},
    {Py_tp_getset, node_getset},
    {Py_tp_methods, node_methods},
    {0, nullptr},
};

PyType_Spec node_spec = {"braze._core.NodeBase", sizeof(NodeObject), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, node_slots};

// ------------------------------------------------------------------ ArrayBase
int array_traverse(PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(reinterpret_cast<ArrayObject*>(self)->node);
    return 0;
}

int array_clear(PyObject* self) {
    Py_CLEAR(reinterpret_cast<ArrayObject*>(self)->node);
    return 0;
}

PyObject* array_get_node(PyObject* self, void*) {
    PyObject* n = reinterpret_cast<ArrayObject*>(self)->node;
    if (!n) {
        PyErr_SetString(PyExc_AttributeError, "_node");
        return nullptr;
    }
    Py_INCREF(n);
    return n;
}

int array_set_node(PyObject* self, PyObject* value, void*) {
    auto* a = reinterpret_cast<ArrayObject*>(self);
    replace_reference(a->node, value);
    return 0;
}

// The node of `self` when the fast paths may read it (registered, not tracing).
NodeObject* fast_node(PyObject* self) {
    if (!g_node_type || g_tracing) return nullptr;
    PyObject* node = reinterpret_cast<ArrayObject*>(self)->node;
    if (!node || (PyObject*)Py_TYPE(node) != g_node_type) return nullptr;
    return reinterpret_cast<NodeObject*>(node);
}

bool exact_ndarray(PyObject* o) { return o && (PyObject*)Py_TYPE(o) == g_ndarray_type; }

// An int per axis of an nd-dimensional array: `i` (nd 1) or a tuple of nd ints.
bool element_key(PyObject* key, int nd) {
    if (PyLong_CheckExact(key)) return nd == 1;
    if (!PyTuple_CheckExact(key) || PyTuple_Size(key) != nd) return false;
    for (int i = 0; i < nd; ++i)
        if (!PyLong_CheckExact(PyTuple_GetItem(key, i))) return false;
    return true;
}

// ------------------------------------------------------------------ direct elements
// An element of a registered dtype is read and written in the buffer itself and boxed as
// numpy boxes it: a numpy scalar of these types is its type's object header followed by
// the value (numpy's PyArrayScalar layout, which Python checks on probe scalars with
// scalar_bytes / scalar_box before it registers a dtype). Others go through numpy's
// subscript.
struct ElementType {
    PyObject* descr;   // the dtype (numpy's native-order dtypes are singletons)
    PyObject* scalar;  // its scalar type
    allocfunc alloc;
    int itemsize;
    int float_bits;  // 32 / 64: a Python float is stored too (0: not a float dtype)
};
constexpr int kElementTypes = 16;
ElementType g_types[kElementTypes];
int g_ntypes = 0;
constexpr Py_ssize_t kScalarValue = sizeof(PyObject);  // where a numpy scalar's value is
constexpr int kNpyWriteable = 0x0400;

const ElementType* element_type(PyObject* descr) {
    for (int i = 0; i < g_ntypes; ++i)
        if (g_types[i].descr == descr) return &g_types[i];
    return nullptr;
}

bool axis_index(PyObject* k, Py_ssize_t dim, Py_ssize_t* out) {
    if (!PyLong_CheckExact(k)) return false;
    Py_ssize_t i = PyLong_AsSsize_t(k);
    if (i == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
    }
    if (i < 0) i += dim;
    if (i < 0 || i >= dim) return false;
    *out = i;
    return true;
}

// The address of element `key` (an int per axis), or null: not such a key, or out of
// bounds (the general path then raises braze's message).
char* element_address(const NpyArrayHead* a, PyObject* key) {
    Py_ssize_t i;
    if (PyLong_CheckExact(key)) {
        if (a->nd != 1 || !axis_index(key, a->dimensions[0], &i)) return nullptr;
        return a->data + i * a->strides[0];
    }
    if (!PyTuple_CheckExact(key) || PyTuple_Size(key) != a->nd) return nullptr;
    char* p = a->data;
    for (int d = 0; d < a->nd; ++d) {
        if (!axis_index(PyTuple_GetItem(key, d), a->dimensions[d], &i)) return nullptr;
        p += i * a->strides[d];
    }
    return p;
}

PyObject* box(const ElementType* t, const char* p) {
    PyObject* s = t->alloc((PyTypeObject*)t->scalar, 0);
    if (s) std::memcpy((char*)s + kScalarValue, p, (size_t)t->itemsize);
    return s;
}

// Stores `value` at `p` when it is this dtype's scalar (or a Python float a float dtype
// holds without overflow); false: numpy decides.
bool store_direct(const ElementType* t, char* p, PyObject* value) {
    if ((PyObject*)Py_TYPE(value) == t->scalar) {
        std::memcpy(p, (const char*)value + kScalarValue, (size_t)t->itemsize);
        return true;
    }
    if (!t->float_bits || !PyFloat_CheckExact(value)) return false;
    double d = PyFloat_AsDouble(value);
    if (t->float_bits == 64) {
        std::memcpy(p, &d, sizeof d);
        return true;
    }
    if (std::isfinite(d) && std::fabs(d) > FLT_MAX) return false;  // (numpy warns)
    float f = (float)d;
    std::memcpy(p, &f, sizeof f);
    return true;
}

PyObject* array_subscript(PyObject* self, PyObject* key) {
    NodeObject* n = fast_node(self);
    if (n && exact_ndarray(n->data)) {
        const auto* a = (const NpyArrayHead*)n->data;
        if (const ElementType* t = element_type(a->descr)) {
            if (const char* p = element_address(a, key)) return box(t, p);
        }
    }
    if (n && exact_ndarray(n->data) && element_key(key, ((NpyArrayHead*)n->data)->nd)) {
        PyObject* r = PyObject_GetItem(n->data, key);
        if (r && !exact_ndarray(r)) return r;
        Py_XDECREF(r);
        PyErr_Clear();  // (out of bounds: the general path raises braze's message)
    }
    return PyObject_CallMethodObjArgs(self, g_getitem, key, nullptr);
}

// Whether `n`'s data may be written in place: referenced as when one Array holds the
// node (the counts are the ones Python calibrated with element_refs).
bool sole_holder(NodeObject* n) {
    PyObject* data = n->data;
    if (Py_REFCNT((PyObject*)n) > g_sole[0] || Py_REFCNT(data) > g_sole[1]) return false;
    PyObject* base = ((NpyArrayHead*)data)->base;
    return !base ||
           (exact_ndarray(base) && !((NpyArrayHead*)base)->base && Py_REFCNT(base) <= g_sole[2]);
}

int array_ass_subscript(PyObject* self, PyObject* key, PyObject* value) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "braze arrays do not support item deletion");
        return -1;
    }
    NodeObject* n = PyLong_CheckExact(key) ? fast_node(self) : nullptr;
    if (n && n->store_type && (PyObject*)Py_TYPE(value) == n->store_type &&
        exact_ndarray(n->data) && sole_holder(n)) {
        auto* a = (NpyArrayHead*)n->data;
        const ElementType* t = element_type(a->descr);
        if (t && (a->flags & kNpyWriteable)) {
            char* p = element_address(a, key);
            if (p && store_direct(t, p, value)) return 0;
        }
        if (PyObject_SetItem(n->data, key, value) == 0) return 0;
        PyErr_Clear();  // (numpy refused: the general path decides, raising as it does)
    }
    PyObject* r = PyObject_CallMethodObjArgs(self, g_setitem, key, value, nullptr);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

PyGetSetDef array_getset[] = {
    {"_node", array_get_node, array_set_node, "The array's node in the lazy graph.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot array_slots[] = {
    {Py_tp_doc, (void*)"braze.Array's native part: its node, and the element fast paths "
                       "of x[i, ...] and x[i] = v (elements.cpp)."},
    {Py_tp_new, (void*)PyType_GenericNew},
    {Py_tp_dealloc, (void*)heap_type_dealloc<array_clear>},
    {Py_tp_traverse, (void*)array_traverse},
    {Py_tp_clear, (void*)array_clear},
    {Py_tp_getset, array_getset},
    {Py_mp_subscript, (void*)array_subscript},
    {Py_mp_ass_subscript, (void*)array_ass_subscript},
    {0, nullptr},
};

PyType_Spec array_spec = {"braze._core.ArrayBase", sizeof(ArrayObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                          array_slots};

// (node, data, base) references of an Array's node as the fast paths see them (0: none).
std::tuple<Py_ssize_t, Py_ssize_t, Py_ssize_t> element_refs(nb::handle array) {
    if (!g_array_base || !PyObject_TypeCheck(array.ptr(), g_array_base))
        throw nb::type_error("braze.element_refs: expected an ArrayBase");
    PyObject* node = reinterpret_cast<ArrayObject*>(array.ptr())->node;
    if (!node || !g_node_base || !PyObject_TypeCheck(node, g_node_base))
        throw nb::type_error("braze.element_refs: the array has no NodeBase node");
    PyObject* data = reinterpret_cast<NodeObject*>(node)->data;
    PyObject* base = exact_ndarray(data) ? ((NpyArrayHead*)data)->base : nullptr;
    return {Py_REFCNT(node), data ? Py_REFCNT(data) : 0, base ? Py_REFCNT(base) : 0};
}

// The `nbytes` bytes of a numpy scalar's value as the direct paths read them.
nb::bytes scalar_bytes(nb::handle scalar, Py_ssize_t nbytes) {
    if (nbytes <= 0 || nbytes > 64) throw nb::value_error("braze.scalar_bytes: 1 to 64 bytes");
    return nb::bytes((const char*)scalar.ptr() + kScalarValue, (size_t)nbytes);
}

// A scalar of `scalar_type` boxed from `value` as the direct read path boxes elements.
nb::object scalar_box(nb::handle scalar_type, nb::bytes value) {
    if (!PyType_Check(scalar_type.ptr()))
        throw nb::type_error("braze.scalar_box: expected a numpy scalar type");
    ElementType t{nullptr, scalar_type.ptr(),
                  (allocfunc)PyType_GetSlot((PyTypeObject*)scalar_type.ptr(), Py_tp_alloc),
                  (int)value.size(), 0};
    PyObject* s = t.alloc ? box(&t, value.c_str()) : nullptr;
    if (!s) throw nb::python_error();
    return nb::steal(s);
}

void register_element_type(nb::handle dtype, nb::handle scalar_type, int itemsize, int float_bits) {
    if (g_ntypes == kElementTypes) throw nb::value_error("braze.element_type: table full");
    if (!PyType_Check(scalar_type.ptr()) || itemsize <= 0 || itemsize > 64)
        throw nb::value_error("braze.element_type: expected a scalar type and its itemsize");
    auto alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)scalar_type.ptr(), Py_tp_alloc);
    if (!alloc) throw nb::value_error("braze.element_type: the scalar type has no tp_alloc");
    Py_INCREF(dtype.ptr());  // kept for the life of the process
    Py_INCREF(scalar_type.ptr());
    g_types[g_ntypes++] = {dtype.ptr(), scalar_type.ptr(), alloc, itemsize, float_bits};
}

}  // namespace

void register_element_access(nb::module_& m) {
    g_getitem = PyUnicode_InternFromString("_getitem");
    g_setitem = PyUnicode_InternFromString("_setitem");
    PyObject* node_type = PyType_FromSpec(&node_spec);
    PyObject* array_type = PyType_FromSpec(&array_spec);
    if (!node_type || !array_type || !g_getitem || !g_setitem) throw nb::python_error();
    g_node_base = (PyTypeObject*)node_type;  // (the module keeps them alive)
    g_array_base = (PyTypeObject*)array_type;
    m.attr("NodeBase") = nb::steal(node_type);
    m.attr("ArrayBase") = nb::steal(array_type);
    m.def("element_refs", &element_refs, nb::arg("array"),
          "(node, data, data's base) reference counts of an ArrayBase's node as the element\n"
          "fast paths read them: Python calibrates the counts of a sole holder with it.");
    m.def(
        "element_access",
        [](nb::handle node_type, Py_ssize_t node, Py_ssize_t data, Py_ssize_t base) {
            if (!g_ndarray_type)
                throw nb::value_error("braze.element_access: numpy_register comes first");
            Py_XINCREF(node_type.ptr());  // kept for the life of the process
            g_node_type = node_type.ptr();
            g_sole[0] = node;
            g_sole[1] = data;
            g_sole[2] = base;
        },
        nb::arg("node_type"), nb::arg("sole_node"), nb::arg("sole_data"), nb::arg("sole_base"),
        "Enable ArrayBase's element fast paths for nodes of exactly `node_type`, writing in\n"
        "place while a node, its data and the data's base have at most these references.");
    m.def("scalar_bytes", &scalar_bytes, nb::arg("scalar"), nb::arg("nbytes"),
          "The value bytes of a numpy scalar as the direct element paths read them (a\n"
          "layout probe: Python compares them with numpy's).");
    m.def("scalar_box", &scalar_box, nb::arg("scalar_type"), nb::arg("value"),
          "A scalar of `scalar_type` boxed from `value` bytes as the direct read path does\n"
          "(a layout probe).");
    m.def("element_type", &register_element_type, nb::arg("dtype"), nb::arg("scalar_type"),
          nb::arg("itemsize"), nb::arg("float_bits"),
          "Read and write elements of `dtype` arrays in their buffer, boxed as\n"
          "`scalar_type` (float_bits 32/64: Python floats are stored too; 0: not).");
    m.def(
        "tracing", [](long delta) { g_tracing += delta; }, nb::arg("delta"),
        "+1 when a thread starts tracing a compiled function, -1 when it stops: while any\n"
        "does, element reads and stores go to the Python methods (which record).");
}
