/*
 * asyncfs._speedups: the steps of reading lines and bulk reads that Python
 * cannot make cheap, in C. Optional: asyncfs/_streams/lines.py and
 * asyncfs/_native/marshal.py hold each in Python and use these when they were
 * built (asyncfs/_native/speedups.py loads them).
 *
 *   split_keep(chunk, newline)  chunk (str or bytes) cut after each newline,
 *                               as str.split cuts at it: the lines keep it.
 *   Handover(more)              the async iterator a line loop gets: each
 *                               line already split is handed over without a
 *                               coroutine step; more(self) is awaited for
 *                               the rest.
 *   cut(address, sizes, count)  the files a bulk read left one after another
 *                               in a buffer, as bytes (cffi gives addresses:
 *                               the limited API of 3.10 has no buffers).
 *   made(cls, names, rows)      an instance of cls per row, its fields named
 *                               by names set as a frozen dataclass's
 *                               __init__ sets them, for a fraction of the
 *                               cost (the stats of a bulk stat).
 *
 * An `async for` step over a native async generator resumes the generator's
 * frame and raises StopIteration to carry the item out: about 140 ns on
 * CPython 3.11 here, where `for line in open(...)` takes 80 ns a line. A
 * Handover's step is three C calls (am_anext, am_await, am_send: CPython
 * 3.10 and 3.11 take the item from am_send with no exception): about 40 ns.
 * From 3.12 on, await asks tp_iternext instead, which must raise
 * StopIteration, and a step costs about as much as a coroutine's.
 *
 * Built against the limited API: one build serves every CPython from 3.10.
 */
#ifndef Py_LIMITED_API /* set by the build (CMakeLists.txt) */
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- split_keep ------------------------------------------------------------------- */

static int append_new(PyObject* list, PyObject* item) {
  int failed;
  if (item == NULL) return -1;
  failed = PyList_Append(list, item);
  Py_DECREF(item);
  return failed;
}

static PyObject* split_text(PyObject* chunk, PyObject* newline) {
  Py_ssize_t n = PyUnicode_GetLength(chunk), start = 0, end;
  Py_UCS4 mark;
  PyObject* lines;
  if (n < 0 || PyUnicode_GetLength(newline) != 1) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "split_keep: newline must be one character");
    return NULL;
  }
  mark = PyUnicode_ReadChar(newline, 0);
  lines = PyList_New(0);
  if (lines == NULL) return NULL;
  for (;;) {
    end = PyUnicode_FindChar(chunk, mark, start, n, 1);
    if (end == -2) goto failed;
    if (end < 0) break;
    if (append_new(lines, PyUnicode_Substring(chunk, start, end + 1)) < 0) goto failed;
    start = end + 1;
  }
  if (append_new(lines, PyUnicode_Substring(chunk, start, n)) < 0) goto failed;
  return lines;
failed:
  Py_DECREF(lines);
  return NULL;
}

static PyObject* split_bytes(PyObject* chunk, PyObject* newline) {
  char *data, *mark;
  const char *at, *stop, *found;
  Py_ssize_t n, marks;
  PyObject* lines;
  if (PyBytes_AsStringAndSize(chunk, &data, &n) < 0 || PyBytes_AsStringAndSize(newline, &mark, &marks) < 0)
    return NULL;
  if (marks != 1) {
    PyErr_SetString(PyExc_ValueError, "split_keep: newline must be one byte");
    return NULL;
  }
  lines = PyList_New(0);
  if (lines == NULL) return NULL;
  at = data;
  stop = data + n;
  while ((found = memchr(at, *mark, (size_t)(stop - at))) != NULL) {
    if (append_new(lines, PyBytes_FromStringAndSize(at, found + 1 - at)) < 0) goto failed;
    at = found + 1;
  }
  if (append_new(lines, PyBytes_FromStringAndSize(at, stop - at)) < 0) goto failed;
  return lines;
failed:
  Py_DECREF(lines);
  return NULL;
}

static PyObject* split_keep(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "split_keep takes a chunk and a newline");
    return NULL;
  }
  if (PyUnicode_Check(args[0]) && PyUnicode_Check(args[1])) return split_text(args[0], args[1]);
  if (PyBytes_Check(args[0]) && PyBytes_Check(args[1])) return split_bytes(args[0], args[1]);
  PyErr_SetString(PyExc_TypeError, "split_keep takes a str chunk and newline, or bytes ones");
  return NULL;
}

/* ---- cutting a bulk read into its files ------------------------------------------- */

static PyObject* cut(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  unsigned long long address, sizes_address;
  Py_ssize_t count, i;
  const char* at;
  const int64_t* sizes;
  PyObject* files;
  (void)module;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "cut takes an address, the address of the sizes and their count");
    return NULL;
  }
  address = PyLong_AsUnsignedLongLong(args[0]);
  sizes_address = PyLong_AsUnsignedLongLong(args[1]);
  count = PyLong_AsSsize_t(args[2]);
  if (PyErr_Occurred()) return NULL;
  if (count < 0) {
    PyErr_SetString(PyExc_ValueError, "cut: a negative count");
    return NULL;
  }
  at = (const char*)(uintptr_t)address;
  sizes = (const int64_t*)(uintptr_t)sizes_address;
  files = PyList_New(count);
  if (files == NULL) return NULL;
  for (i = 0; i < count; ++i) {
    PyObject* file;
    if (sizes[i] < 0) {
      PyErr_SetString(PyExc_ValueError, "cut: a negative size");
      Py_DECREF(files);
      return NULL;
    }
    file = PyBytes_FromStringAndSize(at, (Py_ssize_t)sizes[i]);
    if (file == NULL || PyList_SetItem(files, i, file) < 0) {
      Py_DECREF(files);
      return NULL;
    }
    at += sizes[i];
  }
  return files;
}

/* ---- many instances of a frozen dataclass ---------------------------------------- */

/* A frozen dataclass's __init__ sets each field with object.__setattr__, a
 * call each: 0.43 us for three fields, against 0.1 here. Only for a class
 * whose __init__ does nothing else (asyncfs/_native/marshal.py: made). */
static PyObject* made(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  PyObject *cls, *names, *rows, *out;
  allocfunc alloc;
  Py_ssize_t n, fields, i, j;
  (void)module;
  if (nargs != 3 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) || !PyList_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "made takes a class, a tuple of field names and a list of tuples");
    return NULL;
  }
  cls = args[0];
  names = args[1];
  rows = args[2];
  alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)cls, Py_tp_alloc);
  if (alloc == NULL) {
    PyErr_SetString(PyExc_TypeError, "made: a class with no allocator");
    return NULL;
  }
  fields = PyTuple_Size(names);
  n = PyList_Size(rows);
  out = PyList_New(n);
  if (out == NULL) return NULL;
  for (i = 0; i < n; ++i) {
    PyObject* row = PyList_GetItem(rows, i); /* borrowed */
    PyObject* one;
    if (!PyTuple_Check(row) || PyTuple_Size(row) != fields) {
      PyErr_SetString(PyExc_ValueError, "made: a row that is not a tuple of one value per field");
      Py_DECREF(out);
      return NULL;
    }
    one = alloc((PyTypeObject*)cls, 0);
    if (one == NULL) {
      Py_DECREF(out);
      return NULL;
    }
    PyList_SetItem(out, i, one); /* steals: freed with out on a failure below */
    for (j = 0; j < fields; ++j) {
      if (PyObject_GenericSetAttr(one, PyTuple_GetItem(names, j), PyTuple_GetItem(row, j)) < 0) {
        Py_DECREF(out);
        return NULL;
      }
    }
  }
  return out;
}

/* ---- awaiting an item that is already there --------------------------------------- */

/* Raise StopIteration(item), which is how tp_iternext ends an await with
 * item as its value (an exception instance, so that a tuple stays one). */
static PyObject* stop_with(PyObject* item) {
  PyObject* stop = PyObject_CallFunctionObjArgs(PyExc_StopIteration, item, NULL);
  if (stop != NULL) {
    PyErr_SetObject(PyExc_StopIteration, stop);
    Py_DECREF(stop);
  }
  return NULL;
}

static PyObject* self_of(PyObject* self) {
  Py_INCREF(self);
  return self;
}

/* One item to await: what a Handover gives for a second anext() made
 * before the first one's item was awaited (an `async for` never does). */
typedef struct {
  PyObject_HEAD
  PyObject* item; /* NULL once awaited */
} Ready;

static PyTypeObject* ready_type;

static PyObject* ready_new(PyObject* item) {
  allocfunc alloc = (allocfunc)PyType_GetSlot(ready_type, Py_tp_alloc);
  Ready* ready = (Ready*)alloc(ready_type, 0);
  if (ready == NULL) {
    Py_DECREF(item);
    return NULL;
  }
  ready->item = item; /* the reference taken */
  return (PyObject*)ready;
}

static int ready_traverse(Ready* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->item);
  return 0;
}

static int ready_clear(Ready* self) {
  Py_CLEAR(self->item);
  return 0;
}

static void ready_dealloc(Ready* self) {
  PyTypeObject* type = Py_TYPE(self);
  freefunc free_self = (freefunc)PyType_GetSlot(type, Py_tp_free);
  PyObject_GC_UnTrack(self);
  ready_clear(self);
  free_self(self);
  Py_DECREF(type);
}

/* What am_send answers for an awaitable holding *slot: the item, once
 * (the slot is emptied), or an error the second time. */
static PySendResult hand_over(PyObject** slot, PyObject** result) {
  *result = *slot;
  *slot = NULL;
  if (*result == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "cannot reuse an already awaited item");
    return PYGEN_ERROR;
  }
  return PYGEN_RETURN;
}

/* The same through tp_iternext, for interpreters that do not call am_send:
 * the item raised in a StopIteration. */
static PyObject* hand_over_by_stop(PyObject** slot) {
  PyObject* item;
  if (hand_over(slot, &item) == PYGEN_ERROR) return NULL;
  stop_with(item);
  Py_DECREF(item);
  return NULL;
}

static PySendResult ready_send(Ready* self, PyObject* arg, PyObject** result) {
  (void)arg;
  return hand_over(&self->item, result);
}

static PyObject* ready_next(Ready* self) { return hand_over_by_stop(&self->item); }

static PyType_Slot ready_slots[] = {
    {Py_tp_doc, "An item to await, already there."},
    {Py_tp_traverse, ready_traverse},
    {Py_tp_clear, ready_clear},
    {Py_tp_dealloc, ready_dealloc},
    {Py_tp_iter, self_of},
    {Py_tp_iternext, ready_next},
    {Py_am_await, self_of},
    {Py_am_send, ready_send},
    {0, NULL},
};

static PyType_Spec ready_spec = {
    "asyncfs._speedups.Ready", sizeof(Ready), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION, ready_slots,
};

/* ---- Handover --------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  PyObject* ahead; /* an iterator of the items split ahead, or NULL */
  PyObject* more;  /* more(self): an awaitable of the next item once ahead has none */
  PyObject* item;  /* the item anext() took, for this object to give when awaited */
} Handover;

static PyObject* handover_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* more;
  Handover* self;
  allocfunc alloc;
  static char* names[] = {"more", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Handover", names, &more)) return NULL;
  if (!PyCallable_Check(more)) {
    PyErr_SetString(PyExc_TypeError, "Handover(more): more must be callable");
    return NULL;
  }
  alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  self = (Handover*)alloc(type, 0);
  if (self == NULL) return NULL;
  Py_INCREF(more);
  self->more = more;
  return (PyObject*)self;
}

static int handover_traverse(Handover* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->ahead);
  Py_VISIT(self->more);
  Py_VISIT(self->item);
  return 0;
}

static int handover_clear(Handover* self) {
  Py_CLEAR(self->ahead);
  Py_CLEAR(self->more);
  Py_CLEAR(self->item);
  return 0;
}

static void handover_dealloc(Handover* self) {
  PyTypeObject* type = Py_TYPE(self);
  freefunc free_self = (freefunc)PyType_GetSlot(type, Py_tp_free);
  PyObject_GC_UnTrack(self);
  handover_clear(self);
  free_self(self);
  Py_DECREF(type);
}

/* The next item: from ahead when it has one (this object awaits to it),
 * else whatever more(self) returns to await. */
static PyObject* handover_anext(Handover* self) {
  PyObject* item;
  if (self->ahead != NULL) {
    item = PyIter_Next(self->ahead);
    if (item != NULL) {
      if (self->item != NULL) return ready_new(item);
      self->item = item;
      Py_INCREF(self);
      return (PyObject*)self;
    }
    if (PyErr_Occurred()) return NULL;
  }
  if (self->more == NULL) { /* cleared by the garbage collector */
    PyErr_SetNone(PyExc_StopAsyncIteration);
    return NULL;
  }
  return PyObject_CallFunctionObjArgs(self->more, (PyObject*)self, NULL);
}

static PySendResult handover_send(Handover* self, PyObject* arg, PyObject** result) {
  (void)arg;
  return hand_over(&self->item, result);
}

static PyObject* handover_next(Handover* self) { return hand_over_by_stop(&self->item); }

static PyObject* get_ahead(Handover* self, void* closure) {
  (void)closure;
  if (self->ahead == NULL) Py_RETURN_NONE;
  Py_INCREF(self->ahead);
  return self->ahead;
}

static int set_ahead(Handover* self, PyObject* value, void* closure) {
  PyObject* old = self->ahead;
  (void)closure;
  if (value == Py_None || value == NULL) {
    self->ahead = NULL;
  } else {
    if (!PyIter_Check(value)) {
      PyErr_SetString(PyExc_TypeError, "Handover.ahead must be an iterator or None");
      return -1;
    }
    Py_INCREF(value);
    self->ahead = value;
  }
  Py_XDECREF(old);
  return 0;
}

static PyGetSetDef handover_getset[] = {
    {"ahead", (getter)get_ahead, (setter)set_ahead, "the items to hand over before more() is awaited", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot handover_slots[] = {
    {Py_tp_doc,
     "Handover(more): an async iterator of the items of ahead (an iterator,\n"
     "set by the caller), each given to `async for` with no coroutine step;\n"
     "once ahead has none, anext() returns more(self), an awaitable of the\n"
     "next item (which sets ahead to the ones after it) that raises\n"
     "StopAsyncIteration at the end."},
    {Py_tp_new, handover_new},
    {Py_tp_traverse, handover_traverse},
    {Py_tp_clear, handover_clear},
    {Py_tp_dealloc, handover_dealloc},
    {Py_tp_getset, handover_getset},
    {Py_tp_iter, self_of},
    {Py_tp_iternext, handover_next},
    {Py_am_await, self_of},
    {Py_am_aiter, self_of},
    {Py_am_anext, handover_anext},
    {Py_am_send, handover_send},
    {0, NULL},
};

static PyType_Spec handover_spec = {
    "asyncfs._speedups.Handover", sizeof(Handover), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, handover_slots,
};

/* ---- the module ------------------------------------------------------------------- */

static PyMethodDef functions[] = {
    {"split_keep", (PyCFunction)(void (*)(void))split_keep, METH_FASTCALL,
     "split_keep(chunk, newline): chunk cut after each newline (one character\n"
     "or byte), each line keeping it, the rest after the last one (maybe\n"
     "empty) last: chunk.split(newline) with the newlines kept."},
    {"cut", (PyCFunction)(void (*)(void))cut, METH_FASTCALL,
     "cut(address, sizes_address, count): the count files of a bulk read, as\n"
     "bytes, cut one after another from the memory at address by the int64\n"
     "sizes at sizes_address. Both must stay valid through the call."},
    {"made", (PyCFunction)(void (*)(void))made, METH_FASTCALL,
     "made(cls, names, rows): an instance of cls for each tuple in rows, each\n"
     "field named in names set to the row's value at its place, as a frozen\n"
     "dataclass's __init__ sets them (object.__setattr__), __init__ not called."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "asyncfs._speedups",
    "C for reading lines, bulk reads and bulk stats: asyncfs/_streams/lines.py and asyncfs/_native/marshal.py hold the same in Python.", -1, functions,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
  PyObject* handover_type;
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  if (ready_type == NULL) ready_type = (PyTypeObject*)PyType_FromSpec(&ready_spec);
  handover_type = PyType_FromSpec(&handover_spec);
  if (ready_type == NULL || handover_type == NULL || PyModule_AddObject(m, "Handover", handover_type) < 0) {
    Py_XDECREF(handover_type);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
