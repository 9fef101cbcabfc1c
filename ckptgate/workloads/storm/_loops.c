/*
 * The metadata storm's per-file loops in C: create (with the checklist's write and fsync),
 * stat and unlink, one system call per operation and one clock read after each, as the Python
 * loops in ckptgate/workloads/storm/{create,phase}.py do (ckptgate/workloads/storm/loops.py
 * chooses between them and documents the contract).
 *
 * Why C: Python's os.stat costs 2.2-2.4 us a call where C's stat costs 1.7 us on the dentry
 * cache, and the Python loop's own steps (a list append per clock read, a store per file)
 * cost the rest; mdtest's loop is C. Here the loop is mdtest's, with the recording kept:
 *
 * - the clock is CLOCK_MONOTONIC, the clock of Python's time.perf_counter on Linux, read after
 *   every operation into a caller's buffer of doubles (seconds), one read before the first;
 * - before each file's first call, the number of files done is stored into the caller's
 *   shared progress slot (a buffer of doubles, at index files_done_at), which the parent's
 *   stall watch and live line read, as the Python loop's done[FILES_DONE] = n does;
 * - the GIL is released for the whole loop, so the rank's other threads run; a call that
 *   returns EINTR runs Python's signal handlers (PyErr_CheckSignals) and is retried, as
 *   Python's os functions do (PEP 475); a handler that raises ends the loop with its error;
 * - the first error ends the loop, returned as (files done, errno, operation): the caller
 *   names the file (the one at the files done index) and raises OSError, as the Python loop
 *   raises with the file named. A create that fails after its open closes the descriptor.
 *
 * No allocation happens inside the timed loop: the paths' and payloads' pointers are taken
 * before it, from the caller's lists (held for the call).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CREATE_FLAGS (O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC)
#define FILE_MODE 0644 /* ckptgate.storage.posix.FILE_MODE */

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The pointers and lengths of a list of bytes, taken before the loop. */
typedef struct {
    PyObject *fast;
    Py_ssize_t count;
    const char **data;
    Py_ssize_t *sizes;
} ByteList;

static void byte_list_free(ByteList *list) {
    Py_CLEAR(list->fast);
    free(list->data);
    free(list->sizes);
    list->data = NULL;
    list->sizes = NULL;
}

static int byte_list_take(PyObject *items, const char *what, ByteList *list) {
    list->fast = PySequence_Fast(items, what);
    list->data = NULL;
    list->sizes = NULL;
    if (list->fast == NULL) {
        return -1;
    }
    list->count = PySequence_Fast_GET_SIZE(list->fast);
    size_t slots = (size_t)(list->count > 0 ? list->count : 1);
    list->data = malloc(slots * sizeof(char *));
    list->sizes = malloc(slots * sizeof(Py_ssize_t));
    if (list->data == NULL || list->sizes == NULL) {
        byte_list_free(list);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < list->count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(list->fast, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s: item %zd is not bytes", what, i);
            byte_list_free(list);
            return -1;
        }
        list->data[i] = PyBytes_AS_STRING(item);
        list->sizes[i] = PyBytes_GET_SIZE(item);
    }
    return 0;
}

/* The caller's writable buffers: the stamps (doubles) and the progress slot (doubles). */
typedef struct {
    Py_buffer stamps;
    Py_buffer slot;
    Py_ssize_t files_done_at;
} Record;

static int record_take(PyObject *stamps, PyObject *slot, Py_ssize_t at, Py_ssize_t need,
                       Record *record) {
    if (PyObject_GetBuffer(stamps, &record->stamps, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (PyObject_GetBuffer(slot, &record->slot, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&record->stamps);
        return -1;
    }
    record->files_done_at = at;
    const char *problem = NULL;
    if (record->stamps.len < need * (Py_ssize_t)sizeof(double)) {
        problem = "stamps: too short for one clock read before the loop and one per operation";
    } else if (at < 0 || record->slot.len < (at + 1) * (Py_ssize_t)sizeof(double)) {
        problem = "slot: no double at files_done_at";
    }
    if (problem != NULL) {
        PyBuffer_Release(&record->stamps);
        PyBuffer_Release(&record->slot);
        PyErr_SetString(PyExc_ValueError, problem);
        return -1;
    }
    return 0;
}

static void record_free(Record *record) {
    PyBuffer_Release(&record->stamps);
    PyBuffer_Release(&record->slot);
}

/* After a call failed with EINTR, with the GIL released: run the signal handlers; 1 to retry
 * the call, 0 when a handler raised (the error is set; the loop ends). */
static int retry_after_signal(PyThreadState **saved) {
    PyEval_RestoreThread(*saved);
    int raised = PyErr_CheckSignals();
    *saved = PyEval_SaveThread();
    return raised == 0;
}

/* The loop's outcome: files done, and the failed operation's errno and name (0, None). */
static PyObject *outcome(Py_ssize_t done, int error, const char *op) {
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (error == 0) {
        return Py_BuildValue("(niO)", done, 0, Py_None);
    }
    return Py_BuildValue("(nis)", done, error, op);
}

/* A write of all of data, retrying short writes and EINTR; 0 or an errno (-1: a handler
 * raised). */
static int write_all(int fd, const char *data, Py_ssize_t size, PyThreadState **saved) {
    while (size > 0) {
        ssize_t wrote = write(fd, data, (size_t)size);
        if (wrote < 0) {
            if (errno == EINTR && retry_after_signal(saved)) {
                continue;
            }
            return errno == EINTR ? -1 : errno;
        }
        if (wrote == 0) {
            return EIO; /* a regular file's write of a positive count moved nothing */
        }
        data += wrote;
        size -= wrote;
    }
    return 0;
}

PyDoc_STRVAR(create_files_doc,
             "create_files(paths, payloads, fsync, stamps, slot, files_done_at)\n--\n\n"
             "Create (O_CREAT|O_EXCL), write the payload (when not empty), fsync (when asked)\n"
             "and close each path; returns (files done, errno, operation).");

static PyObject *create_files(PyObject *self, PyObject *args) {
    PyObject *paths_obj, *payloads_obj, *stamps_obj, *slot_obj;
    int fsync_each;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "OOpOOn:create_files", &paths_obj, &payloads_obj, &fsync_each,
                          &stamps_obj, &slot_obj, &at)) {
        return NULL;
    }
    ByteList paths, payloads;
    if (byte_list_take(paths_obj, "paths", &paths) < 0) {
        return NULL;
    }
    if (byte_list_take(payloads_obj, "payloads", &payloads) < 0) {
        byte_list_free(&paths);
        return NULL;
    }
    if (payloads.count != paths.count) {
        byte_list_free(&paths);
        byte_list_free(&payloads);
        PyErr_SetString(PyExc_ValueError, "payloads: not one per path");
        return NULL;
    }
    int writes = paths.count > 0 && payloads.sizes[0] > 0;
    Py_ssize_t ops = 2 + writes + (fsync_each != 0);
    Record record;
    if (record_take(stamps_obj, slot_obj, at, 1 + paths.count * ops, &record) < 0) {
        byte_list_free(&paths);
        byte_list_free(&payloads);
        return NULL;
    }
    double *stamp = record.stamps.buf;
    volatile double *done = (volatile double *)record.slot.buf + at;
    Py_ssize_t n = 0;
    int error = 0;
    const char *op = NULL;
    PyThreadState *saved = PyEval_SaveThread();
    *stamp++ = now_s();
    for (; n < paths.count; n++) {
        *done = (double)n;
        int fd;
        do {
            fd = open(paths.data[n], CREATE_FLAGS, FILE_MODE);
        } while (fd < 0 && errno == EINTR && retry_after_signal(&saved));
        if (fd < 0) {
            error = errno;
            op = "create";
            break;
        }
        *stamp++ = now_s();
        if (writes) {
            error = write_all(fd, payloads.data[n], payloads.sizes[n], &saved);
            if (error != 0) {
                op = "write";
                close(fd);
                break;
            }
            *stamp++ = now_s();
        }
        if (fsync_each) {
            int synced;
            do {
                synced = fsync(fd);
            } while (synced < 0 && errno == EINTR && retry_after_signal(&saved));
            if (synced < 0) {
                error = errno;
                op = "fsync";
                close(fd);
                break;
            }
            *stamp++ = now_s();
        }
        /* Linux closes the descriptor even when close returns EINTR: not an error, no retry */
        if (close(fd) < 0 && errno != EINTR) {
            error = errno;
            op = "close";
            break;
        }
        *stamp++ = now_s();
    }
    PyEval_RestoreThread(saved);
    record_free(&record);
    byte_list_free(&paths);
    byte_list_free(&payloads);
    return outcome(n, error < 0 ? 0 : error, op);
}

PyDoc_STRVAR(stat_files_doc,
             "stat_files(paths, sizes, stamps, slot, files_done_at)\n--\n\n"
             "stat(2) each path, its st_size into sizes (int64); returns (files done, errno,\n"
             "operation).");

static PyObject *stat_files(PyObject *self, PyObject *args) {
    PyObject *paths_obj, *sizes_obj, *stamps_obj, *slot_obj;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "OOOOn:stat_files", &paths_obj, &sizes_obj, &stamps_obj,
                          &slot_obj, &at)) {
        return NULL;
    }
    ByteList paths;
    if (byte_list_take(paths_obj, "paths", &paths) < 0) {
        return NULL;
    }
    Py_buffer sizes;
    if (PyObject_GetBuffer(sizes_obj, &sizes, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        byte_list_free(&paths);
        return NULL;
    }
    Record record;
    if (sizes.len < paths.count * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "sizes: not one int64 per path");
    } else {
        record_take(stamps_obj, slot_obj, at, 1 + paths.count, &record);
    }
    if (PyErr_Occurred()) {
        PyBuffer_Release(&sizes);
        byte_list_free(&paths);
        return NULL;
    }
    int64_t *size = sizes.buf;
    double *stamp = record.stamps.buf;
    volatile double *done = (volatile double *)record.slot.buf + at;
    Py_ssize_t n = 0;
    int error = 0;
    struct stat st;
    PyThreadState *saved = PyEval_SaveThread();
    *stamp++ = now_s();
    for (; n < paths.count; n++) {
        *done = (double)n;
        int got;
        do {
            got = stat(paths.data[n], &st);
        } while (got < 0 && errno == EINTR && retry_after_signal(&saved));
        if (got < 0) {
            error = errno;
            break;
        }
        size[n] = (int64_t)st.st_size;
        *stamp++ = now_s();
    }
    PyEval_RestoreThread(saved);
    record_free(&record);
    PyBuffer_Release(&sizes);
    byte_list_free(&paths);
    return outcome(n, error, "stat");
}

PyDoc_STRVAR(unlink_files_doc,
             "unlink_files(paths, stamps, slot, files_done_at)\n--\n\n"
             "unlink(2) each path; returns (files done, errno, operation).");

static PyObject *unlink_files(PyObject *self, PyObject *args) {
    PyObject *paths_obj, *stamps_obj, *slot_obj;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "OOOn:unlink_files", &paths_obj, &stamps_obj, &slot_obj, &at)) {
        return NULL;
    }
    ByteList paths;
    if (byte_list_take(paths_obj, "paths", &paths) < 0) {
        return NULL;
    }
    Record record;
    if (record_take(stamps_obj, slot_obj, at, 1 + paths.count, &record) < 0) {
        byte_list_free(&paths);
        return NULL;
    }
    double *stamp = record.stamps.buf;
    volatile double *done = (volatile double *)record.slot.buf + at;
    Py_ssize_t n = 0;
    int error = 0;
    PyThreadState *saved = PyEval_SaveThread();
    *stamp++ = now_s();
    for (; n < paths.count; n++) {
        *done = (double)n;
        int gone;
        do {
            gone = unlink(paths.data[n]);
        } while (gone < 0 && errno == EINTR && retry_after_signal(&saved));
        if (gone < 0) {
            error = errno;
            break;
        }
        *stamp++ = now_s();
    }
    PyEval_RestoreThread(saved);
    record_free(&record);
    byte_list_free(&paths);
    return outcome(n, error, "unlink");
}

PyDoc_STRVAR(monotonic_s_doc,
             "monotonic_s()\n--\n\nThe loops' clock (CLOCK_MONOTONIC) in seconds.");

static PyObject *monotonic_s(PyObject *self, PyObject *unused) {
    return PyFloat_FromDouble(now_s());
}

static PyMethodDef methods[] = {
    {"create_files", create_files, METH_VARARGS, create_files_doc},
    {"stat_files", stat_files, METH_VARARGS, stat_files_doc},
    {"unlink_files", unlink_files, METH_VARARGS, unlink_files_doc},
    {"monotonic_s", monotonic_s, METH_NOARGS, monotonic_s_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ckptgate.workloads.storm._loops",
    "The metadata storm's per-file loops in C (see ckptgate.workloads.storm.loops).", -1, methods,
};

PyMODINIT_FUNC PyInit__loops(void) { return PyModule_Create(&module); }
