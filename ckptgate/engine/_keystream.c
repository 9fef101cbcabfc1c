/*
 * The payload's keystream in C: every 8-byte word of a rank's bytes computed from (seed, the
 * word's index) alone, so any range is recomputable and no two blocks of a run share more than
 * chance (ckptgate/engine/keystream.py documents the contract and holds the same function in
 * numpy, for an install without a C compiler).
 *
 * The generator is wyrand (Wang Yi's wyhash, public domain): word n of a stream is
 * mum(x, x ^ P1) with x = seed + (n + 1) * P0, where mum(a, b) folds the 128-bit product of a
 * and b into 64 bits (low half xor high half). Each word depends on its counter only, as a
 * counter-based generator's does (Salmon et al., SC11, "Parallel random numbers: as easy as
 * 1, 2, 3"); wyrand passes BigCrush and PractRand. One multiply per 8 bytes: about the speed of
 * memcpy on this project's 2-core machine (``ckptgate bench payload`` measures the ratio).
 *
 * Each 4 KiB block starts with the 32-byte stamp (magic, run, rank, the block's stamp
 * offset) that names what a misplaced block is; the other 508 words are the keystream at
 * their own offsets. The GIL is released for the fill.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#define P0 0xa0761d6478bd642full
#define P1 0xe7037ed1a0b428dbull
#define BLOCK_WORDS 512 /* ckptgate.engine.datagen.BLOCK_BYTES / 8 */
#define STAMP_WORDS 4   /* ckptgate.engine.datagen.STAMP_BYTES / 8 */

static inline uint64_t mum(uint64_t a, uint64_t b) {
    __uint128_t product = (__uint128_t)a * b;
    return (uint64_t)product ^ (uint64_t)(product >> 64);
}

/* Four words a step from four counters, so that the four multiplies overlap (about 10 % more
 * than one counter on this project's machine: 15.5 against 14 GB/s a core, memcpy 12). */
static void fill(uint64_t *out, size_t blocks, uint64_t seed, uint64_t first_word,
                 uint64_t magic, uint64_t run, uint64_t rank) {
    const uint64_t step = 4 * P0;
    for (size_t b = 0; b < blocks; b++) {
        uint64_t *block = out + b * BLOCK_WORDS;
        uint64_t word = first_word + b * BLOCK_WORDS;
        block[0] = magic;
        block[1] = run;
        block[2] = rank;
        block[3] = word * 8;
        uint64_t x0 = seed + (word + STAMP_WORDS + 1) * P0;
        uint64_t x1 = x0 + P0, x2 = x1 + P0, x3 = x2 + P0;
        for (size_t i = STAMP_WORDS; i < BLOCK_WORDS; i += 4) {
            block[i] = mum(x0, x0 ^ P1);
            block[i + 1] = mum(x1, x1 ^ P1);
            block[i + 2] = mum(x2, x2 ^ P1);
            block[i + 3] = mum(x3, x3 ^ P1);
            x0 += step, x1 += step, x2 += step, x3 += step;
        }
    }
}

static const char fill_blocks_doc[] =
    "fill_blocks(buffer, seed, first_word, magic, run, rank): write whole stamped 4 KiB blocks "
    "of the keystream into the writable buffer (a multiple of 4096 bytes), its first word at "
    "the stream's index first_word (a multiple of 512).";

static PyObject *fill_blocks(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long seed, first_word, magic, run, rank;
    if (!PyArg_ParseTuple(args, "w*KKKKK", &view, &seed, &first_word, &magic, &run, &rank))
        return NULL;
    if (view.len % (BLOCK_WORDS * 8) || first_word % BLOCK_WORDS) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError,
                        "fill_blocks: the buffer must be whole 4 KiB blocks on the block grid");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    fill((uint64_t *)view.buf, (size_t)view.len / (BLOCK_WORDS * 8), seed, first_word, magic,
         run, rank);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static const char fill_words_doc[] =
    "fill_words(buffer, seed, first_word): the plain keystream (no stamps) into the writable "
    "buffer of 8-byte words, its first word at the stream's index first_word.";

static PyObject *fill_words(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long seed, first_word;
    if (!PyArg_ParseTuple(args, "w*KK", &view, &seed, &first_word)) return NULL;
    if (view.len % 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "fill_words: the buffer must be whole 8-byte words");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    uint64_t *out = (uint64_t *)view.buf;
    size_t words = (size_t)view.len / 8;
    uint64_t x = seed + (first_word + 1) * P0;
    for (size_t i = 0; i < words; i++) {
        out[i] = mum(x, x ^ P1);
        x += P0;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static const char fill_values_doc[] =
    "fill_values(buffer, seed, first_value, table, width): the realistic payload's values of one "
    "kind into the buffer (width 4: fp32 bits, width 2: bf16 bits), value i from the keystream "
    "word at index first_value + i: its top 12 bits pick a sign-and-exponent from the table "
    "(4096 uint32 top-9-bit values), its low bits are the mantissa "
    "(ckptgate/engine/realistic.py).";

static PyObject *fill_values(PyObject *self, PyObject *args) {
    Py_buffer view, table;
    unsigned long long seed, first_value;
    int width;
    if (!PyArg_ParseTuple(args, "w*KKy*i", &view, &seed, &first_value, &table, &width))
        return NULL;
    if ((width != 2 && width != 4) || view.len % width || table.len != 4096 * 4) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&table);
        PyErr_SetString(PyExc_ValueError,
                        "fill_values: width 2 or 4, whole values, a table of 4096 uint32");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    const uint32_t *top = (const uint32_t *)table.buf;
    size_t count = (size_t)view.len / width;
    uint64_t x = seed + (first_value + 1) * P0;
    if (width == 4) {
        uint32_t *out = (uint32_t *)view.buf;
        for (size_t i = 0; i < count; i++) {
            uint64_t w = mum(x, x ^ P1);
            out[i] = (top[w >> 52] << 23) | (uint32_t)(w & 0x7FFFFF);
            x += P0;
        }
    } else {
        uint16_t *out = (uint16_t *)view.buf;
        for (size_t i = 0; i < count; i++) {
            uint64_t w = mum(x, x ^ P1);
            out[i] = (uint16_t)((top[w >> 52] << 7) | (uint32_t)(w & 0x7F));
            x += P0;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fill_values", fill_values, METH_VARARGS, fill_values_doc},
    {"fill_blocks", fill_blocks, METH_VARARGS, fill_blocks_doc},
    {"fill_words", fill_words, METH_VARARGS, fill_words_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ckptgate.engine._keystream",
    "The payload's keystream in C (ckptgate/engine/keystream.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__keystream(void) { return PyModule_Create(&module); }
