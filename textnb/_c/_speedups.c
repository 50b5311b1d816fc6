/* textnb._c._speedups: what textnb does once per word, token, chunk or byte, in C: the
 * tokenizer's chunk cache, the splitting of its new chunks into words (spaCy's affix
 * loop) and the joining of chunks with their word pairs; the host names and IPv4
 * addresses of header values; the ledger's normalisation of a message; numbering and
 * counting a batch's tokens; the vocabulary's hash index and its bytes (hashes,
 * comparisons, gathers, packing, JSON both ways); and the selection of each message's
 * strongest clues.
 *
 * Each function does exactly what its Python twin in textnb/_c/speedups.py does (that
 * module picks this one when it was built); tests/test_speedups.py checks that the two
 * give the same results, and that training and scoring do. What is left in C is mostly
 * reaching objects in memory: the tables here (the chunk cache, the token table, the
 * index) are laid out so that a token or a chunk costs one random access where a dict
 * and its values cost several (docs/design/c-loops.md).
 *
 * setup.py marks the extension optional: without a C compiler (or Python's headers) the
 * install skips it and textnb runs the Python loops, slower, with the same results.
 *
 * None of these functions runs Python code between taking a borrowed reference and using
 * it: the token table takes exact str only (its hash and equality are C), the chunk cache
 * hashes and compares characters itself and owns its keys and values, map_chunks (which
 * calls back into Python for a new word's tokens and the URL pattern) holds its own
 * reference to each chunk and word across those calls, and no object tracked by the
 * garbage collector is allocated inside the other loops. The loops over bytes
 * and hashes that a model's load runs (hashing a store, filling the index, reading the
 * JSON) release the GIL: the load runs on a thread beside spaCy's import (textnb.modelfile.load_in_background).
 * So does writing the JSON for a save, whose members are deflated on a second thread
 * (textnb.modelfile.zip_writer.MemberWriter).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

/* "bi:" + left + " " + right, as the f-string f"bi:{left} {right}" makes it. */
static PyObject *
make_pair(PyObject *left, PyObject *right)
{
    Py_ssize_t n_left = PyUnicode_GET_LENGTH(left), n_right = PyUnicode_GET_LENGTH(right);
    Py_UCS4 max_char = PyUnicode_MAX_CHAR_VALUE(left);
    Py_UCS4 right_max = PyUnicode_MAX_CHAR_VALUE(right);
    if (right_max > max_char)
        max_char = right_max;
    if (max_char < 127)
        max_char = 127;
    PyObject *pair = PyUnicode_New(4 + n_left + n_right, max_char);
    if (pair == NULL)
        return NULL;
    int kind = PyUnicode_KIND(pair);
    void *data = PyUnicode_DATA(pair);
    PyUnicode_WRITE(kind, data, 0, 'b');
    PyUnicode_WRITE(kind, data, 1, 'i');
    PyUnicode_WRITE(kind, data, 2, ':');
    if (PyUnicode_CopyCharacters(pair, 3, left, 0, n_left) < 0)
        goto error;
    PyUnicode_WRITE(kind, data, 3 + n_left, ' ');
    if (PyUnicode_CopyCharacters(pair, 4 + n_left, right, 0, n_right) < 0)
        goto error;
    return pair;
error:
    Py_DECREF(pair);
    return NULL;
}

/* Whether a token holds ':' (is namespaced, so never paired); -1 on error. */
static int
has_colon(PyObject *token)
{
    if (!PyUnicode_Check(token)) {
        PyErr_SetString(PyExc_TypeError, "a word's tokens must be str");
        return -1;
    }
    Py_ssize_t at = PyUnicode_FindChar(token, ':', 0, PyUnicode_GET_LENGTH(token), 1);
    return at == -2 ? -1 : at >= 0;
}

/* Append the word pair of `left` and `right` to the list `out`; -1 on error. */
static int
append_pair(PyObject *out, PyObject *left, PyObject *right)
{
    PyObject *pair = make_pair(left, right);
    if (pair == NULL)
        return -1;
    int failed = PyList_Append(out, pair);
    Py_DECREF(pair);
    return failed;
}

static int
extend_with_tuple(PyObject *out, PyObject *items)
{
    if (!PyTuple_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "a chunk entry's tokens must be a tuple");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_Append(out, PyTuple_GET_ITEM(items, i)) < 0)
            return -1;
    return 0;
}

PyDoc_STRVAR(join_chunks_doc,
"join_chunks(entries) -> list[str]\n\n"
"The tokens of consecutive chunk entries (tokenize._chunk_entry: (), a str, or a\n"
"7-tuple), with the word pair across each two neighbouring entries whose facing words\n"
"both pair.");

static PyObject *
join_chunks(PyObject *module, PyObject *entries)
{
    if (!PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "join_chunks takes a list of chunk entries");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    PyObject *prev = NULL;  /* borrowed from an entry, which the list keeps alive */
    int prev_pairs = 0;
    Py_ssize_t n = PyList_GET_SIZE(entries);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (PyUnicode_CheckExact(entry)) {  /* a chunk of one token */
            if (PyList_Append(out, entry) < 0)
                goto error;
            int colon = has_colon(entry);
            if (colon < 0)
                goto error;
            int pairs = !colon;
            if (prev_pairs && pairs && append_pair(out, prev, entry) < 0)
                goto error;
            prev = entry;
            prev_pairs = pairs;
            continue;
        }
        if (entry == Py_None || (PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 0))
            continue;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 7) {
            PyErr_SetString(PyExc_TypeError, "a chunk entry must be (), a str or a 7-tuple");
            goto error;
        }
        PyObject *first = PyTuple_GET_ITEM(entry, 2), *last = PyTuple_GET_ITEM(entry, 4);
        if (!PyUnicode_Check(first) || !PyUnicode_Check(last)) {
            PyErr_SetString(PyExc_TypeError, "a chunk entry's words must be str");
            goto error;
        }
        int first_pairs = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 3));
        int last_pairs = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 5));
        if (first_pairs < 0 || last_pairs < 0)
            goto error;
        if (extend_with_tuple(out, PyTuple_GET_ITEM(entry, 0)) < 0)
            goto error;
        if (prev_pairs && first_pairs && append_pair(out, prev, first) < 0)
            goto error;
        if (extend_with_tuple(out, PyTuple_GET_ITEM(entry, 1)) < 0)
            goto error;
        prev = last;
        prev_pairs = last_pairs;
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

static int
typed_view(PyObject *object, Py_buffer *view, int flags, Py_ssize_t itemsize,
           const char *codes, const char *name, const char *what)
{
    if (PyObject_GetBuffer(object, view, flags | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        view->obj = NULL;
        return -1;
    }
    const char *f = view->format;
    if (f != NULL && (f[0] == '<' || f[0] == '='))
        f++;
    if (view->itemsize != itemsize || f == NULL || f[0] == '\0' || f[1] != '\0'
        || strchr(codes, f[0]) == NULL) {
        PyErr_Format(PyExc_TypeError, "%s must be %s", name, what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* A writable buffer of `itemsize`-byte items whose format is one of `codes`. */
static int
typed_buffer(PyObject *object, Py_buffer *view, Py_ssize_t itemsize, const char *codes,
             const char *name, const char *what)
{
    return typed_view(object, view, PyBUF_WRITABLE, itemsize, codes, name, what);
}

static int
int64_buffer(PyObject *object, Py_buffer *view, const char *name)
{
    return typed_buffer(object, view, 8, "ql", name, "an int64 buffer");
}

/* The same, read only (a view of a read-only array will do). */
static int
int64_input(PyObject *object, Py_buffer *view, const char *name)
{
    return typed_view(object, view, PyBUF_SIMPLE, 8, "ql", name, "an int64 buffer");
}

/* -- numbering tokens: a table of the batch's distinct tokens --------------------------- */

/* A distinct token of the batch: the str (borrowed: the caller's lists hold it), its
 * hash, its number, and the list that last held it with where its entry for that list
 * is (count_messages). One random access a token, where a dict look-up of the token,
 * its int value and two arrays by number took four. */
typedef struct {
    PyObject *key;
    Py_hash_t hash;
    Py_ssize_t number;
    Py_ssize_t last_list;
    Py_ssize_t entry_at;
} TokenEntry;

typedef struct {
    TokenEntry *entries;
    Py_ssize_t capacity;  /* a power of two */
    Py_ssize_t used;
    PyObject *tokens;     /* the distinct tokens, by number (a new list) */
} TokenTable;

static int
token_table_init(TokenTable *table)
{
    table->capacity = 4096;
    table->used = 0;
    table->entries = PyMem_Calloc((size_t)table->capacity, sizeof(TokenEntry));
    table->tokens = PyList_New(0);
    if (table->entries == NULL || table->tokens == NULL) {
        PyMem_Free(table->entries);
        table->entries = NULL;
        Py_CLEAR(table->tokens);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
token_table_free(TokenTable *table)
{
    PyMem_Free(table->entries);
    table->entries = NULL;
    Py_CLEAR(table->tokens);
}

/* Two str equal: the same object, or the same length, kind and characters (a str's
 * kind is the narrowest its characters fit, so equal strings share it). */
static inline int
same_str(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b)
           && memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)(n * kind)) == 0;
}

/* The entry of `token` (exact str), added with the next number if new; NULL on error. */
static TokenEntry *
token_entry(TokenTable *table, PyObject *token)
{
    if (!PyUnicode_CheckExact(token)) {
        PyErr_Format(PyExc_TypeError, "tokens must be str, not %.100s", Py_TYPE(token)->tp_name);
        return NULL;
    }
    Py_hash_t hash = PyObject_Hash(token);  /* cached in the str after its first time */
    if (hash == -1)
        return NULL;
    Py_ssize_t mask = table->capacity - 1, at = (Py_ssize_t)((size_t)hash & (size_t)mask);
    for (;;) {
        TokenEntry *entry = &table->entries[at];
        if (entry->key == NULL)
            break;
        if (entry->hash == hash && same_str(entry->key, token))
            return entry;
        at = (at + 1) & mask;
    }
    if ((table->used + 1) * 3 > table->capacity * 2) {  /* grow, then find the slot again */
        Py_ssize_t capacity = table->capacity * 2;
        TokenEntry *entries = PyMem_Calloc((size_t)capacity, sizeof(TokenEntry));
        if (entries == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t i = 0; i < table->capacity; i++) {
            TokenEntry *old = &table->entries[i];
            if (old->key == NULL)
                continue;
            Py_ssize_t to = (Py_ssize_t)((size_t)old->hash & (size_t)(capacity - 1));
            while (entries[to].key != NULL)
                to = (to + 1) & (capacity - 1);
            entries[to] = *old;
        }
        PyMem_Free(table->entries);
        table->entries = entries;
        table->capacity = capacity;
        mask = capacity - 1;
        at = (Py_ssize_t)((size_t)hash & (size_t)mask);
        while (table->entries[at].key != NULL)
            at = (at + 1) & mask;
    }
    if (PyList_Append(table->tokens, token) < 0)
        return NULL;
    TokenEntry *entry = &table->entries[at];
    entry->key = token;
    entry->hash = hash;
    entry->number = table->used++;
    entry->last_list = -1;
    entry->entry_at = 0;
    return entry;
}

PyDoc_STRVAR(number_tokens_doc,
"number_tokens(token_lists, out) -> list[str]\n\n"
"Write into out (a writable int64 buffer, one item per token) the number of each token\n"
"of token_lists in turn, the distinct tokens numbered from 0 in order of first sight;\n"
"RETURNS the distinct tokens in number order.");

static PyObject *
number_tokens(PyObject *module, PyObject *args)
{
    PyObject *lists, *out;
    if (!PyArg_ParseTuple(args, "O!O:number_tokens", &PyList_Type, &lists, &out))
        return NULL;
    Py_buffer view = {0};
    TokenTable table = {0};
    PyObject *result = NULL;
    if (int64_buffer(out, &view, "out") < 0 || token_table_init(&table) < 0)
        goto done;
    int64_t *columns = (int64_t *)view.buf;
    Py_ssize_t capacity = view.len / 8, at = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lists); i++) {
        PyObject *tokens = PyList_GET_ITEM(lists, i);
        if (!PyList_Check(tokens)) {
            PyErr_SetString(PyExc_TypeError, "number_tokens takes a list of lists of tokens");
            goto done;
        }
        Py_ssize_t n = PyList_GET_SIZE(tokens);
        if (n > capacity - at) {
            PyErr_SetString(PyExc_ValueError, "number_tokens: more tokens than out holds");
            goto done;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            TokenEntry *entry = token_entry(&table, PyList_GET_ITEM(tokens, j));
            if (entry == NULL)
                goto done;
            columns[at++] = (int64_t)entry->number;
        }
    }
    if (at != capacity) {
        PyErr_SetString(PyExc_ValueError, "number_tokens: out holds more items than tokens");
        goto done;
    }
    result = table.tokens;
    table.tokens = NULL;
done:
    token_table_free(&table);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(count_messages_doc,
"count_messages(token_lists, distinct, columns, counts) -> (list[str], int)\n\n"
"Number the tokens of token_lists as number_tokens does, and count each list's\n"
"distinct tokens: distinct[i] gets how many list i has, and columns and counts get,\n"
"list after list, each distinct token's number and how many times the list holds it,\n"
"in order of first sight in the list. RETURNS the distinct tokens in number order and\n"
"the entries written to columns and counts. All three buffers are int64: distinct one\n"
"item a list, the other two at least one a token.");

static PyObject *
count_messages(PyObject *module, PyObject *args)
{
    PyObject *lists, *distinct_object, *columns_object, *counts_object;
    if (!PyArg_ParseTuple(args, "O!OOO:count_messages", &PyList_Type, &lists,
                          &distinct_object, &columns_object, &counts_object))
        return NULL;
    Py_buffer distinct_view = {0}, columns_view = {0}, counts_view = {0};
    TokenTable table = {0};
    PyObject *result = NULL;
    if (int64_buffer(distinct_object, &distinct_view, "distinct") < 0
        || int64_buffer(columns_object, &columns_view, "columns") < 0
        || int64_buffer(counts_object, &counts_view, "counts") < 0
        || token_table_init(&table) < 0)
        goto done;
    int64_t *distinct = distinct_view.buf, *columns = columns_view.buf, *counts = counts_view.buf;
    Py_ssize_t capacity = columns_view.len / 8, written = 0;
    if (counts_view.len / 8 < capacity)
        capacity = counts_view.len / 8;
    Py_ssize_t n_lists = PyList_GET_SIZE(lists);
    if (distinct_view.len / 8 != n_lists) {
        PyErr_SetString(PyExc_ValueError, "count_messages: distinct needs one item a list");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_lists; i++) {
        PyObject *tokens = PyList_GET_ITEM(lists, i);
        if (!PyList_Check(tokens)) {
            PyErr_SetString(PyExc_TypeError, "count_messages takes a list of lists of tokens");
            goto done;
        }
        Py_ssize_t first_entry = written;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(tokens); j++) {
            TokenEntry *entry = token_entry(&table, PyList_GET_ITEM(tokens, j));
            if (entry == NULL)
                goto done;
            if (entry->last_list == i) {
                counts[entry->entry_at] += 1;
                continue;
            }
            if (written >= capacity) {
                PyErr_SetString(PyExc_ValueError, "count_messages: more entries than columns holds");
                goto done;
            }
            entry->last_list = i;
            entry->entry_at = written;
            columns[written] = (int64_t)entry->number;
            counts[written] = 1;
            written++;
        }
        distinct[i] = (int64_t)(written - first_entry);
    }
    result = Py_BuildValue("(On)", table.tokens, written);
done:
    token_table_free(&table);
    PyBuffer_Release(&distinct_view);
    PyBuffer_Release(&columns_view);
    PyBuffer_Release(&counts_view);
    return result;
}

PyDoc_STRVAR(count_words_doc,
"count_words(entries) -> int\n\n"
"The word tokens of chunk entries: 1 for a str, the last item of a 7-tuple, 0 for ().");

static PyObject *
count_words(PyObject *module, PyObject *entries)
{
    if (!PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "count_words takes a list of chunk entries");
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (PyUnicode_CheckExact(entry)) {
            total++;
            continue;
        }
        if (!PyTuple_Check(entry) || (PyTuple_GET_SIZE(entry) != 0 && PyTuple_GET_SIZE(entry) != 7)) {
            PyErr_SetString(PyExc_TypeError, "a chunk entry must be (), a str or a 7-tuple");
            return NULL;
        }
        if (PyTuple_GET_SIZE(entry) == 0)
            continue;
        Py_ssize_t words = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 6));
        if (words == -1 && PyErr_Occurred())
            return NULL;
        total += words;
    }
    return PyLong_FromSsize_t(total);
}

/* The vocabulary's index (speedups.HashIndex): open addressing with linear probing over
 * `slots` (int32, a power of two long; 0 empty, else a column + 1), the columns' hashes
 * in `keys` (int64, column order). A slot names the first column with its hash. */
static Py_ssize_t
first_slot(uint64_t hash, uint64_t mask)
{
    hash ^= hash >> 33;  /* MurmurHash3's finalizer: every bit of the hash reaches the slot */
    hash *= 0xff51afd7ed558ccdULL;
    hash ^= hash >> 33;
    return (Py_ssize_t)(hash & mask);
}

static int
index_buffers(PyObject *slots_object, PyObject *keys_object, Py_buffer *slots_view,
              Py_buffer *keys_view)
{
    static const char *slots_are = "an int32 buffer a power of two long";
    if (typed_buffer(slots_object, slots_view, 4, "i", "slots", slots_are) < 0)
        return -1;
    Py_ssize_t n_slots = slots_view->len / 4;
    if (n_slots < 1 || (n_slots & (n_slots - 1)) != 0) {
        PyErr_Format(PyExc_TypeError, "slots must be %s", slots_are);
        return -1;
    }
    return int64_buffer(keys_object, keys_view, "keys");
}

PyDoc_STRVAR(index_insert_doc,
"index_insert(slots, keys, start, stop, taken) -> None\n\n"
"Index columns start .. stop - 1 (their hashes keys[start:stop]), in order; taken[i]\n"
"(uint8) is set to 1 for a column whose hash an indexed column has already (it is\n"
"not indexed), else 0. The slots must keep at least one empty.");

static PyObject *
index_insert(PyObject *module, PyObject *args)
{
    PyObject *slots_object, *keys_object, *taken_object;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OOnnO:index_insert", &slots_object, &keys_object, &start,
                          &stop, &taken_object))
        return NULL;
    Py_buffer slots_view = {0}, keys_view = {0}, taken_view = {0};
    PyObject *result = NULL;
    if (index_buffers(slots_object, keys_object, &slots_view, &keys_view) < 0)
        goto done;
    if (PyObject_GetBuffer(taken_object, &taken_view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        taken_view.obj = NULL;
        goto done;
    }
    int32_t *slots = slots_view.buf;
    int64_t *keys = keys_view.buf;
    uint8_t *taken = taken_view.buf;
    Py_ssize_t n_slots = slots_view.len / 4, n_keys = keys_view.len / 8;
    if (start < 0 || stop < start || stop > n_keys || stop > INT32_MAX
        || taken_view.len != stop - start) {
        PyErr_SetString(PyExc_ValueError, "index_insert: columns out of keys' or taken's range");
        goto done;
    }
    const char *problem = NULL;
    Py_BEGIN_ALLOW_THREADS  /* (a model loads beside spaCy's import: textnb.modelfile.load_in_background) */
    for (Py_ssize_t column = start; column < stop && problem == NULL; column++) {
        int64_t key = keys[column];
        Py_ssize_t at = first_slot((uint64_t)key, (uint64_t)(n_slots - 1)), probes = 0;
        for (;;) {
            int32_t held = slots[at];
            if (held == 0) {
                slots[at] = (int32_t)(column + 1);
                taken[column - start] = 0;
                break;
            }
            if (held < 1 || held > n_keys) {
                problem = "index_insert: a slot names no column";
                break;
            }
            if (keys[held - 1] == key) {
                taken[column - start] = 1;
                break;
            }
            if (++probes == n_slots) {
                problem = "index_insert: the slots are full";
                break;
            }
            at = (at + 1) & (n_slots - 1);
        }
    }
    Py_END_ALLOW_THREADS
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&slots_view);
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&taken_view);
    return result;
}

PyDoc_STRVAR(index_find_doc,
"index_find(slots, keys, hashes, out) -> None\n\n"
"out[i] (int64) gets the column indexed under hashes[i], or -1.");

static PyObject *
index_find(PyObject *module, PyObject *args)
{
    PyObject *slots_object, *keys_object, *hashes_object, *out_object;
    if (!PyArg_ParseTuple(args, "OOOO:index_find", &slots_object, &keys_object, &hashes_object,
                          &out_object))
        return NULL;
    Py_buffer slots_view = {0}, keys_view = {0}, hashes_view = {0}, out_view = {0};
    PyObject *result = NULL;
    if (index_buffers(slots_object, keys_object, &slots_view, &keys_view) < 0
        || int64_buffer(hashes_object, &hashes_view, "hashes") < 0
        || int64_buffer(out_object, &out_view, "out") < 0)
        goto done;
    int32_t *slots = slots_view.buf;
    int64_t *keys = keys_view.buf, *hashes = hashes_view.buf, *out = out_view.buf;
    Py_ssize_t n_slots = slots_view.len / 4, n_keys = keys_view.len / 8;
    Py_ssize_t n = hashes_view.len / 8;
    if (out_view.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "index_find: out must be as long as hashes");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t key = hashes[i], found = -1;
        Py_ssize_t at = first_slot((uint64_t)key, (uint64_t)(n_slots - 1)), probes = 0;
        for (;;) {
            int32_t held = slots[at];
            if (held == 0)
                break;
            if (held < 1 || held > n_keys) {
                PyErr_SetString(PyExc_ValueError, "index_find: a slot names no column");
                goto done;
            }
            if (keys[held - 1] == key) {
                found = held - 1;
                break;
            }
            if (++probes == n_slots)
                break;
            at = (at + 1) & (n_slots - 1);
        }
        out[i] = found;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&slots_view);
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&hashes_view);
    PyBuffer_Release(&out_view);
    return result;
}

/* -- TokenStore: tokens as UTF-8 bytes, one after another, token i ending at ends[i] -- */

/* The bytes of a store and its ends, read only. */
static int
store_views(PyObject *data_object, PyObject *ends_object, Py_buffer *data_view,
            Py_buffer *ends_view)
{
    if (PyObject_GetBuffer(data_object, data_view, PyBUF_SIMPLE) < 0) {
        data_view->obj = NULL;
        return -1;
    }
    return int64_input(ends_object, ends_view, "ends");
}

/* What span_at finds wrong: nothing, a position out of range, ends that do not fit. */
enum { SPAN_OK, SPAN_OUT_OF_RANGE, SPAN_BAD_ENDS };

/* Token `at` of the store (data_view, ends_view), negative counting from the end: its
 * first byte and length, or what is wrong. Each token read is checked, not every end.
 * No Python API: loops call it with the GIL released. */
static int
span_at(const Py_buffer *data_view, const Py_buffer *ends_view, int64_t at,
        const unsigned char **first, int64_t *length)
{
    const int64_t *ends = ends_view->buf;
    Py_ssize_t n = ends_view->len / 8;
    if (at < 0)
        at += n;
    if (at < 0 || at >= n)
        return SPAN_OUT_OF_RANGE;
    int64_t begin = at ? ends[at - 1] : 0, end = ends[at];
    if (begin < 0 || end < begin || end > data_view->len)
        return SPAN_BAD_ENDS;
    *first = (const unsigned char *)data_view->buf + begin;
    *length = end - begin;
    return SPAN_OK;
}

/* The exception for what span_at found wrong; RETURNS -1 (0 when nothing was). */
static int
span_error(int problem)
{
    if (problem == SPAN_OUT_OF_RANGE)
        PyErr_SetString(PyExc_IndexError, "token index out of range");
    else if (problem == SPAN_BAD_ENDS)
        PyErr_SetString(PyExc_ValueError, "token ends must ascend within the bytes");
    return problem == SPAN_OK ? 0 : -1;
}

/* span_at, with the exception set: -1 when the token is not there. */
static int
token_span(const Py_buffer *data_view, const Py_buffer *ends_view, int64_t at,
           const unsigned char **first, int64_t *length)
{
    return span_error(span_at(data_view, ends_view, at, first, length));
}

/* splitmix64's finaliser (https://prng.di.unimi.it/splitmix64.c). */
static inline uint64_t
splitmix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ULL

/* TokenStore.hashes' hash of n bytes (token_bytes.hash_region is its definition):
 * each 8-byte little-endian word, the last one zero-filled, xored with its place times
 * the golden gamma and mixed, the words summed, the length mixed in, mixed again. */
static uint64_t
hash_token(const unsigned char *bytes, int64_t n)
{
    uint64_t sum = 0;
    for (int64_t place = 0; place * 8 < n; place++) {
        int64_t left = n - place * 8;
        int width = left < 8 ? (int)left : 8;
        uint64_t word = 0;
        for (int k = 0; k < width; k++)
            word |= (uint64_t)bytes[place * 8 + k] << (8 * k);
        sum += splitmix64(word ^ ((uint64_t)place * GOLDEN_GAMMA));
    }
    /* An empty token has one word, 0, whose mix is 0: the sum stays 0. */
    return splitmix64(sum ^ ((uint64_t)n * GOLDEN_GAMMA));
}

PyDoc_STRVAR(hash_tokens_doc,
"hash_tokens(data, ends, start, out) -> None\n\n"
"out[i - start] (int64) gets the hash of token i of the store (data, ends), for i from\n"
"start on: TokenStore.hashes' hash, the same bits as token_bytes.hash_region.");

static PyObject *
hash_tokens(PyObject *module, PyObject *args)
{
    PyObject *data_object, *ends_object, *out_object;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "OOnO:hash_tokens", &data_object, &ends_object, &start,
                          &out_object))
        return NULL;
    Py_buffer data_view = {0}, ends_view = {0}, out_view = {0};
    PyObject *result = NULL;
    if (store_views(data_object, ends_object, &data_view, &ends_view) < 0
        || int64_buffer(out_object, &out_view, "out") < 0)
        goto done;
    int64_t *out = out_view.buf;
    Py_ssize_t n = ends_view.len / 8;
    if (start < 0 || start > n || out_view.len / 8 != n - start) {
        PyErr_SetString(PyExc_ValueError, "hash_tokens: out needs one item a token from start");
        goto done;
    }
    int problem = SPAN_OK;
    Py_BEGIN_ALLOW_THREADS  /* (a model loads beside spaCy's import: textnb.modelfile.load_in_background) */
    for (Py_ssize_t i = start; i < n && problem == SPAN_OK; i++) {
        const unsigned char *first;
        int64_t length;
        problem = span_at(&data_view, &ends_view, i, &first, &length);
        if (problem == SPAN_OK)
            out[i - start] = (int64_t)hash_token(first, length);
    }
    Py_END_ALLOW_THREADS
    if (span_error(problem) < 0)
        goto done;
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&data_view);
    PyBuffer_Release(&ends_view);
    PyBuffer_Release(&out_view);
    return result;
}

PyDoc_STRVAR(equal_tokens_doc,
"equal_tokens(data, ends, positions, other_data, other_ends, other_positions, out) -> None\n\n"
"out[i] (uint8) gets 1 if token positions[i] of the store (data, ends) has the bytes of\n"
"token other_positions[i] of (other_data, other_ends), else 0 (positions may count from\n"
"the end, as negative numbers).");

static PyObject *
equal_tokens(PyObject *module, PyObject *args)
{
    PyObject *data_object, *ends_object, *positions_object;
    PyObject *other_data_object, *other_ends_object, *other_positions_object, *out_object;
    if (!PyArg_ParseTuple(args, "OOOOOOO:equal_tokens", &data_object, &ends_object,
                          &positions_object, &other_data_object, &other_ends_object,
                          &other_positions_object, &out_object))
        return NULL;
    Py_buffer data_view = {0}, ends_view = {0}, positions_view = {0};
    Py_buffer other_data_view = {0}, other_ends_view = {0}, other_positions_view = {0};
    Py_buffer out_view = {0};
    PyObject *result = NULL;
    if (store_views(data_object, ends_object, &data_view, &ends_view) < 0
        || store_views(other_data_object, other_ends_object, &other_data_view,
                       &other_ends_view) < 0
        || int64_input(positions_object, &positions_view, "positions") < 0
        || int64_input(other_positions_object, &other_positions_view, "other_positions") < 0)
        goto done;
    if (PyObject_GetBuffer(out_object, &out_view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        out_view.obj = NULL;
        goto done;
    }
    Py_ssize_t n = positions_view.len / 8;
    if (other_positions_view.len / 8 != n || out_view.len != n) {
        PyErr_SetString(PyExc_ValueError,
                        "equal_tokens: positions, other_positions and out must be as long");
        goto done;
    }
    const int64_t *positions = positions_view.buf, *other_positions = other_positions_view.buf;
    uint8_t *out = out_view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *mine, *theirs;
        int64_t length, other_length;
        if (token_span(&data_view, &ends_view, positions[i], &mine, &length) < 0
            || token_span(&other_data_view, &other_ends_view, other_positions[i], &theirs,
                          &other_length) < 0)
            goto done;
        out[i] = length == other_length && memcmp(mine, theirs, (size_t)length) == 0;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&data_view);
    PyBuffer_Release(&ends_view);
    PyBuffer_Release(&positions_view);
    PyBuffer_Release(&other_data_view);
    PyBuffer_Release(&other_ends_view);
    PyBuffer_Release(&other_positions_view);
    PyBuffer_Release(&out_view);
    return result;
}

PyDoc_STRVAR(gather_tokens_doc,
"gather_tokens(data, ends, positions, out_ends) -> bytes\n\n"
"The bytes of the tokens at positions (negative: from the end) of the store (data,\n"
"ends), one after another; out_ends[i] (int64) gets where the i-th ends in them.");

static PyObject *
gather_tokens(PyObject *module, PyObject *args)
{
    PyObject *data_object, *ends_object, *positions_object, *out_ends_object;
    if (!PyArg_ParseTuple(args, "OOOO:gather_tokens", &data_object, &ends_object,
                          &positions_object, &out_ends_object))
        return NULL;
    Py_buffer data_view = {0}, ends_view = {0}, positions_view = {0}, out_ends_view = {0};
    PyObject *result = NULL;
    if (store_views(data_object, ends_object, &data_view, &ends_view) < 0
        || int64_input(positions_object, &positions_view, "positions") < 0
        || int64_buffer(out_ends_object, &out_ends_view, "out_ends") < 0)
        goto done;
    Py_ssize_t n = positions_view.len / 8;
    if (out_ends_view.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "gather_tokens: out_ends must be as long as positions");
        goto done;
    }
    const int64_t *positions = positions_view.buf;
    int64_t *out_ends = out_ends_view.buf, total = 0;
    const unsigned char *first;
    int64_t length;
    for (Py_ssize_t i = 0; i < n; i++) {  /* first the size, and every position checked */
        if (token_span(&data_view, &ends_view, positions[i], &first, &length) < 0)
            goto done;
        total += length;
        out_ends[i] = total;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result == NULL)
        goto done;
    char *out = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {  /* checked above: cannot fail */
        token_span(&data_view, &ends_view, positions[i], &first, &length);
        memcpy(out + out_ends[i] - length, first, (size_t)length);
    }
done:
    PyBuffer_Release(&data_view);
    PyBuffer_Release(&ends_view);
    PyBuffer_Release(&positions_view);
    PyBuffer_Release(&out_ends_view);
    return result;
}

/* -- evidence selection (textnb.models.evidence.strongest) -------------------------------- */

/* An entry of a row: its strength |value|, its side and its position in the matrix's
 * data. The stronger comes first; of two as strong, the ham clue (value < 0), then the
 * one at the lower position (C's indices are sorted, so the lower column), as
 * RankedEvidence orders them. Two as strong on one side add the same to the score
 * whichever is kept, so the score does not depend on the vocabulary's column order. */
typedef struct {
    double strength;
    int64_t position;
    int ham;
} Clue;

static inline int
before(const Clue *a, const Clue *b)
{
    if (a->strength != b->strength)
        return a->strength > b->strength;
    if (a->ham != b->ham)
        return a->ham;
    return a->position < b->position;
}

/* Put `clue` among the `*n` best of `best` (at most `room`, best first), if it is one.
 * Clues arrive in position order, so a clue as strong as the last kept one and on its
 * side is not. */
static inline void
keep_best(Clue *best, Py_ssize_t *n, Py_ssize_t room, Clue clue)
{
    if (room == 0 || (*n == room && !before(&clue, &best[room - 1])))
        return;
    Py_ssize_t at = *n < room ? (*n)++ : room - 1;
    while (at > 0 && before(&clue, &best[at - 1])) {
        best[at] = best[at - 1];
        at--;
    }
    best[at] = clue;
}

/* The two lists (each best first) merged, best first; RETURNS the length of `out`. */
static Py_ssize_t
merge_best(const Clue *a, Py_ssize_t n_a, const Clue *b, Py_ssize_t n_b, Clue *out,
           Py_ssize_t room)
{
    Py_ssize_t i = 0, j = 0, n = 0;
    while (n < room && (i < n_a || j < n_b))
        out[n++] = (j >= n_b || (i < n_a && before(&a[i], &b[j]))) ? a[i++] : b[j++];
    return n;
}

/* One side of a row (sign > 0: positive values; < 0: negative; 0: every entry): its k
 * strongest, at most `cap` of them limited (cap < 0: no cap), into `out` best first;
 * RETURNS how many. `plain` and `limited` are scratch for k entries each. */
static Py_ssize_t
select_side(const double *values, const uint8_t *limited_column, Py_ssize_t n_limited,
            const int64_t *indices, int64_t first, int64_t stop, int sign, Py_ssize_t k,
            Py_ssize_t cap, Clue *plain, Clue *limited, Clue *out)
{
    Py_ssize_t n_plain = 0, n_capped = 0;
    for (int64_t p = first; p < stop; p++) {
        double v = values[p];
        if ((sign > 0 && !(v > 0)) || (sign < 0 && !(v < 0)))
            continue;
        Clue clue = {fabs(v), p, v < 0};
        int64_t column = indices[p];
        if (cap >= 0 && column >= 0 && column < n_limited && limited_column[column])
            keep_best(limited, &n_capped, cap, clue);
        else
            keep_best(plain, &n_plain, k, clue);
    }
    return merge_best(plain, n_plain, limited, n_capped, out, k);
}

PyDoc_STRVAR(strongest_positions_doc,
"strongest_positions(values, indices, indptr, limited, sides, min_strength, out) -> int\n\n"
"Evidence selection over a CSR matrix (values float64, indices and indptr int64, each\n"
"row's indices sorted): out (int64) gets, row by row, the positions of each row's kept\n"
"entries, strongest first (ties: the negative, then the lower position). sides is\n"
"((k, cap),) to keep the k strongest entries, or ((k, cap), (k, cap)) for the positive\n"
"and the negative entries apart; of the columns marked in limited (uint8, one per\n"
"column; shorter: the rest unmarked) at most cap count (cap < 0, or cap >= k: no cap).\n"
"Then, if min_strength > 0, entries with |value| <= min_strength are dropped. RETURNS\n"
"the positions written. As textnb.models.evidence.RankedEvidence.positions.");

static PyObject *
strongest_positions(PyObject *module, PyObject *args)
{
    PyObject *values_object, *indices_object, *indptr_object, *limited_object, *sides;
    PyObject *out_object;
    double min_strength;
    if (!PyArg_ParseTuple(args, "OOOOO!dO:strongest_positions", &values_object,
                          &indices_object, &indptr_object, &limited_object, &PyTuple_Type,
                          &sides, &min_strength, &out_object))
        return NULL;
    Py_ssize_t n_sides = PyTuple_GET_SIZE(sides), k[2] = {0, 0}, cap[2] = {-1, -1};
    if (n_sides != 1 && n_sides != 2) {
        PyErr_SetString(PyExc_ValueError, "sides must be one or two (k, cap) pairs");
        return NULL;
    }
    for (Py_ssize_t s = 0; s < n_sides; s++)
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(sides, s), "nn:a side", &k[s], &cap[s]))
            return NULL;
    Py_buffer values_view = {0}, indices_view = {0}, indptr_view = {0}, limited_view = {0};
    Py_buffer out_view = {0};
    Clue *scratch = NULL;
    PyObject *result = NULL;
    if (typed_view(values_object, &values_view, PyBUF_SIMPLE, 8, "d", "values",
                   "a float64 buffer") < 0
        || int64_input(indices_object, &indices_view, "indices") < 0
        || int64_input(indptr_object, &indptr_view, "indptr") < 0
        || int64_buffer(out_object, &out_view, "out") < 0)
        goto done;
    if (PyObject_GetBuffer(limited_object, &limited_view, PyBUF_SIMPLE) < 0) {
        limited_view.obj = NULL;
        goto done;
    }
    const double *values = values_view.buf;
    const int64_t *indices = indices_view.buf, *indptr = indptr_view.buf;
    int64_t *out = out_view.buf;
    Py_ssize_t n_values = values_view.len / 8, n_rows = indptr_view.len / 8 - 1;
    if (indices_view.len / 8 != n_values || n_rows < 0 || out_view.len / 8 < n_values) {
        PyErr_SetString(PyExc_ValueError, "strongest_positions: values, indices, indptr and "
                        "out do not fit (one index a value, out as long)");
        goto done;
    }
    Py_ssize_t most = 0;
    for (Py_ssize_t s = 0; s < n_sides; s++) {
        if (k[s] < 0) {
            PyErr_SetString(PyExc_ValueError, "strongest_positions: k must be >= 0");
            goto done;
        }
        if (cap[s] >= k[s])  /* a cap of k or more caps nothing */
            cap[s] = -1;
        if (k[s] > most)
            most = k[s];
    }
    /* Per side: the plain best, the limited best, the side's kept; then the row's. */
    scratch = PyMem_Malloc(sizeof(Clue) * (size_t)(most * 8 + 1));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t written = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        int64_t first = indptr[r], stop = indptr[r + 1];
        if (first < 0 || stop < first || stop > n_values) {
            PyErr_SetString(PyExc_ValueError, "strongest_positions: indptr must ascend within values");
            goto done;
        }
        Clue *kept[2] = {scratch + 2 * most, scratch + 5 * most};
        Py_ssize_t n_kept[2] = {0, 0};
        for (Py_ssize_t s = 0; s < n_sides; s++) {
            Clue *base = scratch + 3 * most * s;
            int sign = n_sides == 1 ? 0 : (s == 0 ? 1 : -1);
            n_kept[s] = select_side(values, limited_view.buf, limited_view.len, indices, first,
                                    stop, sign, k[s], cap[s], base, base + most, kept[s]);
        }
        Clue *row = scratch + 6 * most;
        Py_ssize_t n_row = merge_best(kept[0], n_kept[0], kept[1], n_kept[1], row, 2 * most);
        for (Py_ssize_t i = 0; i < n_row; i++)
            if (min_strength <= 0 || row[i].strength > min_strength)
                out[written++] = row[i].position;
    }
    result = PyLong_FromSsize_t(written);
done:
    PyMem_Free(scratch);
    PyBuffer_Release(&values_view);
    PyBuffer_Release(&indices_view);
    PyBuffer_Release(&indptr_view);
    PyBuffer_Release(&limited_view);
    PyBuffer_Release(&out_view);
    return result;
}

/* -- the vocabulary as JSON (token_store.TokenStore.json_items) -------------------- */

/* The next code point of UTF-8 `bytes` (surrogates allowed, as "surrogatepass" writes
 * them) at *at, which it moves past; -1 for bytes that are not UTF-8. */
static int32_t
next_code_point(const unsigned char *bytes, int64_t n, int64_t *at)
{
    unsigned char lead = bytes[*at];
    int extra;
    int32_t c;
    if (lead < 0x80) {
        (*at)++;
        return lead;
    }
    if (lead >= 0xC2 && lead <= 0xDF) {
        extra = 1;
        c = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        extra = 2;
        c = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        extra = 3;
        c = lead & 0x07;
    } else {
        return -1;
    }
    if (*at + extra > n - 1)  /* cut short */
        return -1;
    for (int k = 1; k <= extra; k++) {
        unsigned char next = bytes[*at + k];
        if ((next & 0xC0) != 0x80)
            return -1;
        c = (c << 6) | (next & 0x3F);
    }
    /* Overlong forms and code points past U+10FFFF are not UTF-8. */
    if ((extra == 2 && c < 0x800) || (extra == 3 && (c < 0x10000 || c > 0x10FFFF)))
        return -1;
    *at += extra + 1;
    return c;
}

/* Write `\uXXXX` (lower-case hex, as json.dumps) at out; RETURNS 6. */
static int
write_u_escape(char *out, int32_t c)
{
    static const char hex[] = "0123456789abcdef";
    out[0] = '\\';
    out[1] = 'u';
    out[2] = hex[(c >> 12) & 0xF];
    out[3] = hex[(c >> 8) & 0xF];
    out[4] = hex[(c >> 4) & 0xF];
    out[5] = hex[c & 0xF];
    return 6;
}

/* How code point c is written in a JSON string by json.dumps (ensure_ascii): into out
 * if it is not NULL; RETURNS the number of bytes. */
static int
json_char(int32_t c, char *out)
{
    const char *short_escape = NULL;
    switch (c) {
    case '"': short_escape = "\\\""; break;
    case '\\': short_escape = "\\\\"; break;
    case '\n': short_escape = "\\n"; break;
    case '\r': short_escape = "\\r"; break;
    case '\t': short_escape = "\\t"; break;
    case '\b': short_escape = "\\b"; break;
    case '\f': short_escape = "\\f"; break;
    }
    if (short_escape != NULL) {
        if (out != NULL) {
            out[0] = short_escape[0];
            out[1] = short_escape[1];
        }
        return 2;
    }
    if (c >= ' ' && c <= '~') {
        if (out != NULL)
            out[0] = (char)c;
        return 1;
    }
    if (c < 0x10000) {
        if (out != NULL)
            write_u_escape(out, c);
        return 6;
    }
    if (out != NULL) {  /* a surrogate pair */
        int32_t v = c - 0x10000;
        write_u_escape(out, 0xD800 | (v >> 10));
        write_u_escape(out + 6, 0xDC00 | (v & 0x3FF));
    }
    return 12;
}

PyDoc_STRVAR(json_items_doc,
"json_items(data, ends, start, stop) -> bytes | None\n\n"
"Tokens start .. stop - 1 of the store (data, ends) as the items of a JSON list, the\n"
"bytes json.dumps (ensure_ascii) writes for them, joined by \", \"; None when the\n"
"bytes are not UTF-8.");

static PyObject *
json_items(PyObject *module, PyObject *args)
{
    PyObject *data_object, *ends_object;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OOnn:json_items", &data_object, &ends_object, &start, &stop))
        return NULL;
    Py_buffer data_view = {0}, ends_view = {0};
    PyObject *result = NULL;
    if (store_views(data_object, ends_object, &data_view, &ends_view) < 0)
        goto done;
    if (start < 0 || stop < start || stop > ends_view.len / 8) {
        PyErr_SetString(PyExc_ValueError, "json_items: tokens out of range");
        goto done;
    }
    /* First the size (and every token checked), then the bytes; both passes without the
     * GIL (a model's save deflates and hashes the chunks made before on another thread,
     * textnb.modelfile.zip_writer.MemberWriter), so what is wrong is raised after the first. */
    Py_ssize_t size = stop > start ? 2 * (stop - start) + 2 * (stop - start - 1) : 0;
    int problem = SPAN_OK, not_utf8 = 0;
    for (int pass = 0; pass < 2; pass++) {
        char *out = pass ? PyBytes_AS_STRING(result) : NULL;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = start; i < stop && problem == SPAN_OK && !not_utf8; i++) {
            const unsigned char *first;
            int64_t length, at = 0;
            problem = span_at(&data_view, &ends_view, i, &first, &length);
            if (problem != SPAN_OK)
                break;
            if (out != NULL) {
                if (i > start) {
                    *out++ = ',';
                    *out++ = ' ';
                }
                *out++ = '"';
            }
            while (at < length) {
                int32_t c = next_code_point(first, length, &at);
                if (c < 0) {
                    not_utf8 = 1;
                    break;
                }
                int written = json_char(c, out);
                if (out != NULL)
                    out += written;
                else
                    size += written;
            }
            if (out != NULL)
                *out++ = '"';
        }
        Py_END_ALLOW_THREADS
        if (problem != SPAN_OK) {
            span_error(problem);
            goto done;
        }
        if (not_utf8) {  /* RETURNS None: the caller encodes these tokens itself */
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        if (!pass) {
            result = PyBytes_FromStringAndSize(NULL, size);
            if (result == NULL)
                goto done;
        }
    }
done:
    PyBuffer_Release(&data_view);
    PyBuffer_Release(&ends_view);
    return result;
}

/* -- packing str into a TokenStore ------------------------------------------------ */

/* The UTF-8 length of code point c ("surrogatepass": a surrogate takes 3 bytes). */
static inline int
utf8_width(Py_UCS4 c)
{
    return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

static inline char *
put_utf8(char *out, Py_UCS4 c)
{
    if (c < 0x80) {
        *out++ = (char)c;
    } else if (c < 0x800) {
        *out++ = (char)(0xC0 | (c >> 6));
        *out++ = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *out++ = (char)(0xE0 | (c >> 12));
        *out++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *out++ = (char)(0x80 | (c & 0x3F));
    } else {
        *out++ = (char)(0xF0 | (c >> 18));
        *out++ = (char)(0x80 | ((c >> 12) & 0x3F));
        *out++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *out++ = (char)(0x80 | (c & 0x3F));
    }
    return out;
}

PyDoc_STRVAR(pack_tokens_doc,
"pack_tokens(tokens, ends) -> bytes\n\n"
"The UTF-8 bytes of the str in the list tokens, one after another (as\n"
"''.join(tokens).encode('utf-8', 'surrogatepass')); ends[i] (int64, one a token) gets\n"
"where token i ends in them.");

static PyObject *
pack_tokens(PyObject *module, PyObject *args)
{
    PyObject *tokens, *ends_object;
    if (!PyArg_ParseTuple(args, "O!O:pack_tokens", &PyList_Type, &tokens, &ends_object))
        return NULL;
    Py_buffer ends_view = {0};
    PyObject *result = NULL;
    if (int64_buffer(ends_object, &ends_view, "ends") < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(tokens);
    int64_t *ends = ends_view.buf, total = 0;
    if (ends_view.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "pack_tokens: ends needs one item a token");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {  /* first each token's length, every item checked */
        PyObject *token = PyList_GET_ITEM(tokens, i);
        if (!PyUnicode_Check(token)) {
            PyErr_Format(PyExc_TypeError, "tokens must be str, not %.100s",
                         Py_TYPE(token)->tp_name);
            goto done;
        }
        Py_ssize_t length = PyUnicode_GET_LENGTH(token);
        if (!PyUnicode_IS_ASCII(token)) {
            int kind = PyUnicode_KIND(token);
            const void *data = PyUnicode_DATA(token);
            Py_ssize_t bytes = 0;
            for (Py_ssize_t j = 0; j < length; j++)
                bytes += utf8_width(PyUnicode_READ(kind, data, j));
            length = bytes;
        }
        total += length;
        ends[i] = total;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (result == NULL)
        goto done;
    char *out = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {  /* the list is not changed in between: no Python runs */
        PyObject *token = PyList_GET_ITEM(tokens, i);
        Py_ssize_t length = PyUnicode_GET_LENGTH(token);
        if (PyUnicode_IS_ASCII(token)) {
            memcpy(out, PyUnicode_1BYTE_DATA(token), (size_t)length);
            out += length;
            continue;
        }
        int kind = PyUnicode_KIND(token);
        const void *data = PyUnicode_DATA(token);
        for (Py_ssize_t j = 0; j < length; j++)
            out = put_utf8(out, PyUnicode_READ(kind, data, j));
    }
done:
    PyBuffer_Release(&ends_view);
    return result;
}

/* The value of 4 hex digits at s (already known to be in bounds), or -1. */
static int32_t
hex4(const unsigned char *s)
{
    int32_t value = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = s[k];
        int digit = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (digit < 0)
            return -1;
        value = value * 16 + digit;
    }
    return value;
}

PyDoc_STRVAR(read_json_items_doc,
"read_json_items(data, out_ends) -> (bytearray, int) | None\n\n"
"The strings of data, a JSON list in the shape json_items writes (ASCII, [\"a\", \"b\"],\n"
"items joined by \", \"), as UTF-8 ('surrogatepass') one after another, and how many;\n"
"each one's end goes to out_ends (int64, at least one item a string). None for data of\n"
"any other shape"
"(json.loads is then the reader). Escapes are decoded as json.loads decodes them: a\n"
"\\\\u escape of a high surrogate followed by one of a low surrogate is one character.");

/* What parse_json_items finds. */
enum { JSON_READ, JSON_OTHER_SHAPE, JSON_TOO_MANY };

/* read_json_items' parse of the n bytes at in: the strings decoded into out, one after
 * another, each one's end in out_ends (room for `capacity`); *n_items and *n_out get
 * how many and how long. No Python API: it runs with the GIL released. */
static int
parse_json_items(const unsigned char *in, Py_ssize_t n, char *out, int64_t *out_ends,
                 Py_ssize_t capacity, Py_ssize_t *n_items, Py_ssize_t *n_out)
{
    char *start = out;
    Py_ssize_t at = 1;
    *n_items = 0;
    if (n < 2 || in[0] != '[' || in[n - 1] != ']')
        return JSON_OTHER_SHAPE;
    if (n == 2) {  /* [] */
        *n_out = 0;
        return JSON_READ;
    }
    for (;;) {
        if (at >= n - 1 || in[at] != '"')
            return JSON_OTHER_SHAPE;
        at++;
        for (;;) {  /* one string's characters */
            if (at >= n - 1)
                return JSON_OTHER_SHAPE;
            unsigned char c = in[at];
            if (c == '"')
                break;
            if (c < 0x20 || c >= 0x80)  /* raw control characters, or not ASCII */
                return JSON_OTHER_SHAPE;
            if (c != '\\') {
                *out++ = (char)c;
                at++;
                continue;
            }
            if (at + 1 >= n - 1)
                return JSON_OTHER_SHAPE;
            unsigned char escape = in[at + 1];
            const char *simple = strchr("\"\\/bfnrt", escape);
            if (escape != 0 && simple != NULL) {
                static const char decoded[] = "\"\\/\b\f\n\r\t";
                *out++ = decoded[simple - "\"\\/bfnrt"];
                at += 2;
                continue;
            }
            if (escape != 'u' || at + 6 > n - 1)
                return JSON_OTHER_SHAPE;
            int32_t code = hex4(in + at + 2);
            if (code < 0)
                return JSON_OTHER_SHAPE;
            at += 6;
            if (code >= 0xD800 && code <= 0xDBFF && at + 6 <= n - 1 && in[at] == '\\'
                && in[at + 1] == 'u') {
                int32_t low = hex4(in + at + 2);
                if (low >= 0xDC00 && low <= 0xDFFF) {  /* a pair: one character */
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    at += 6;
                }
            }
            out = put_utf8(out, (Py_UCS4)code);
        }
        if (*n_items >= capacity)
            return JSON_TOO_MANY;
        out_ends[(*n_items)++] = out - start;
        at++;  /* the closing quote */
        if (at == n - 1)
            break;
        if (at + 2 > n - 1 || in[at] != ',' || in[at + 1] != ' ')
            return JSON_OTHER_SHAPE;
        at += 2;
    }
    *n_out = out - start;
    return JSON_READ;
}

static PyObject *
read_json_items(PyObject *module, PyObject *args)
{
    PyObject *data_object, *out_ends_object;
    if (!PyArg_ParseTuple(args, "OO:read_json_items", &data_object, &out_ends_object))
        return NULL;
    Py_buffer data_view = {0}, out_ends_view = {0};
    PyObject *text = NULL, *result = NULL;
    if (PyObject_GetBuffer(data_object, &data_view, PyBUF_SIMPLE) < 0) {
        data_view.obj = NULL;
        goto done;
    }
    if (int64_buffer(out_ends_object, &out_ends_view, "out_ends") < 0)
        goto done;
    /* The decoded text is never longer than its JSON: an escape of k bytes gives at most
     * k bytes (\uXXXX: 6 -> at most 3; two of them: 12 -> 4), a plain byte one. */
    text = PyByteArray_FromStringAndSize(NULL, data_view.len);
    if (text == NULL)
        goto done;
    Py_ssize_t n_items = 0, n_out = 0;
    int status;
    char *out = PyByteArray_AS_STRING(text);
    Py_BEGIN_ALLOW_THREADS  /* (a model loads beside spaCy's import: textnb.modelfile.load_in_background) */
    status = parse_json_items(data_view.buf, data_view.len, out, out_ends_view.buf,
                              out_ends_view.len / 8, &n_items, &n_out);
    Py_END_ALLOW_THREADS
    if (status == JSON_TOO_MANY) {
        PyErr_SetString(PyExc_ValueError, "read_json_items: more strings than out_ends holds");
    } else if (status == JSON_OTHER_SHAPE) {
        result = Py_None;
        Py_INCREF(result);
    } else if (PyByteArray_Resize(text, n_out) == 0) {
        result = Py_BuildValue("(On)", text, n_items);
    }
done:
    Py_XDECREF(text);
    PyBuffer_Release(&data_view);
    PyBuffer_Release(&out_ends_view);
    return result;
}

/* -- the tokenizer's chunk cache (speedups.ChunkCache) ------------------------------ */

/* A str's hash as the cache takes it, from its code points (so a chunk read inside a
 * wider text hashes as the str it would be): FNV-1a over the characters, then mixed. */
static uint64_t
hash_code_points(int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *chars = (const Py_UCS1 *)data;
        for (Py_ssize_t i = start; i < end; i++)
            h = (h ^ chars[i]) * 0x100000001b3ULL;
    } else {
        for (Py_ssize_t i = start; i < end; i++)
            h = (h ^ PyUnicode_READ(kind, data, i)) * 0x100000001b3ULL;
    }
    return splitmix64(h ^ (uint64_t)(end - start));
}

/* Whether str key holds the characters start .. end - 1 of (kind, data). */
static int
same_characters(PyObject *key, int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t n = end - start;
    if (PyUnicode_GET_LENGTH(key) != n)
        return 0;
    int key_kind = PyUnicode_KIND(key);
    const void *key_data = PyUnicode_DATA(key);
    if (key_kind == kind)
        return memcmp(key_data, (const char *)data + start * kind, (size_t)(n * kind)) == 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_READ(key_kind, key_data, i) != PyUnicode_READ(kind, data, start + i))
            return 0;
    return 1;
}

typedef struct {
    uint64_t hash;
    PyObject *key;    /* a str, NULL for an empty slot */
    PyObject *value;
} CacheEntry;

typedef struct {
    PyObject_HEAD
    CacheEntry *entries;
    Py_ssize_t capacity;  /* a power of two, or 0 */
    Py_ssize_t used;
} ChunkCacheObject;

static void
cache_free_entries(ChunkCacheObject *self)
{
    CacheEntry *entries = self->entries;
    Py_ssize_t capacity = self->capacity;
    self->entries = NULL;  /* first: a value's deallocation may run code that reads it */
    self->capacity = self->used = 0;
    for (Py_ssize_t i = 0; i < capacity; i++) {
        Py_XDECREF(entries[i].key);
        Py_XDECREF(entries[i].value);
    }
    PyMem_Free(entries);
}

static void
cache_dealloc(ChunkCacheObject *self)
{
    cache_free_entries(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The slot of the chunk (kind, data, start, end) with this hash: its entry, or the empty
 * slot where it would go. The table always keeps an empty slot. */
static CacheEntry *
cache_slot(ChunkCacheObject *self, uint64_t hash, int kind, const void *data,
           Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t mask = self->capacity - 1, at = (Py_ssize_t)(hash & (uint64_t)mask);
    for (;;) {
        CacheEntry *entry = &self->entries[at];
        if (entry->key == NULL
            || (entry->hash == hash && same_characters(entry->key, kind, data, start, end)))
            return entry;
        at = (at + 1) & mask;
    }
}

/* Room for one more entry, the table at most 2/3 full; -1 on failure. */
static int
cache_reserve(ChunkCacheObject *self)
{
    if ((self->used + 1) * 3 <= self->capacity * 2)
        return 0;
    /* From 8 slots: a tokenizer keeps a cache per namespace (a header field tokenised as
     * text has its own), most of them small. */
    Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 8;
    CacheEntry *entries = PyMem_Calloc((size_t)capacity, sizeof(CacheEntry));
    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->capacity; i++) {
        CacheEntry *old = &self->entries[i];
        if (old->key == NULL)
            continue;
        Py_ssize_t at = (Py_ssize_t)(old->hash & (uint64_t)(capacity - 1));
        while (entries[at].key != NULL)
            at = (at + 1) & (capacity - 1);
        entries[at] = *old;
    }
    PyMem_Free(self->entries);
    self->entries = entries;
    self->capacity = capacity;
    return 0;
}

/* Set key (a str) to value; -1 on failure. */
static int
cache_set(ChunkCacheObject *self, PyObject *key, PyObject *value)
{
    if (!PyUnicode_Check(key)) {
        PyErr_Format(PyExc_TypeError, "chunk cache keys must be str, not %.100s",
                     Py_TYPE(key)->tp_name);
        return -1;
    }
    if (cache_reserve(self) < 0)
        return -1;
    int kind = PyUnicode_KIND(key);
    const void *data = PyUnicode_DATA(key);
    Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    uint64_t hash = hash_code_points(kind, data, 0, n);
    CacheEntry *entry = cache_slot(self, hash, kind, data, 0, n);
    Py_INCREF(value);
    if (entry->key != NULL) {
        PyObject *old = entry->value;
        entry->value = value;
        Py_DECREF(old);
        return 0;
    }
    Py_INCREF(key);
    entry->hash = hash;
    entry->key = key;
    entry->value = value;
    self->used++;
    return 0;
}

PyDoc_STRVAR(cache_lookup_doc,
"lookup(text, max_chunk) -> (values, positions, chunks)\n\n"
"For each whitespace-free chunk of text (text.split(), each cut to max_chunk\n"
"characters), its value in the cache, or None; positions and chunks: where the chunks\n"
"without one are and what they are. A chunk found is never made into a str.");

static PyObject *
cache_lookup(ChunkCacheObject *self, PyObject *args)
{
    PyObject *text;
    Py_ssize_t max_chunk;
    if (!PyArg_ParseTuple(args, "Un:lookup", &text, &max_chunk))
        return NULL;
    if (max_chunk < 1) {
        PyErr_SetString(PyExc_ValueError, "lookup: max_chunk must be at least 1");
        return NULL;
    }
    PyObject *values = PyList_New(0), *positions = PyList_New(0), *chunks = PyList_New(0);
    if (values == NULL || positions == NULL || chunks == NULL)
        goto error;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    while (i < n) {
        /* The same whitespace as str.split() with no argument. */
        while (i < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)))
            i++;
        if (i >= n)
            break;
        Py_ssize_t start = i;
        while (i < n && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)))
            i++;
        Py_ssize_t end = i - start > max_chunk ? start + max_chunk : i;
        PyObject *value = Py_None;
        if (self->capacity) {
            uint64_t hash = hash_code_points(kind, data, start, end);
            CacheEntry *entry = cache_slot(self, hash, kind, data, start, end);
            if (entry->key != NULL)
                value = entry->value;
        }
        if (value == Py_None) {  /* (a cached value is never None) */
            PyObject *at = PyLong_FromSsize_t(PyList_GET_SIZE(values));
            PyObject *chunk = at == NULL ? NULL : PyUnicode_Substring(text, start, end);
            int failed = chunk == NULL || PyList_Append(positions, at) < 0
                         || PyList_Append(chunks, chunk) < 0;
            Py_XDECREF(at);
            Py_XDECREF(chunk);
            if (failed)
                goto error;
        }
        if (PyList_Append(values, value) < 0)
            goto error;
    }
    return Py_BuildValue("(NNN)", values, positions, chunks);
error:
    Py_XDECREF(values);
    Py_XDECREF(positions);
    Py_XDECREF(chunks);
    return NULL;
}

PyDoc_STRVAR(cache_update_doc,
"update(values) -> None\n\nAdd the dict values' chunks (str) and values (not None).");

static PyObject *
cache_update(ChunkCacheObject *self, PyObject *values)
{
    if (!PyDict_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "update takes a dict of chunk -> value");
        return NULL;
    }
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(values, &at, &key, &value)) {
        if (value == Py_None) {
            PyErr_SetString(PyExc_ValueError, "a chunk's value cannot be None");
            return NULL;
        }
        if (cache_set(self, key, value) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(cache_clear_doc, "clear() -> None\n\nForget every chunk.");

static PyObject *
cache_clear(ChunkCacheObject *self, PyObject *unused)
{
    cache_free_entries(self);
    Py_RETURN_NONE;
}

static PyObject *
cache_reduce(ChunkCacheObject *self, PyObject *unused)
{
    /* A copy (the scorer copies its model) starts empty: a cache is no state. */
    return Py_BuildValue("(O())", (PyObject *)Py_TYPE(self));
}

static PyObject *
cache_sizeof(ChunkCacheObject *self, PyObject *unused)
{
    /* The object and its table (not the keys and values, which are objects of their own). */
    return PyLong_FromSsize_t((Py_ssize_t)(sizeof(ChunkCacheObject)
                                           + self->capacity * sizeof(CacheEntry)));
}

static Py_ssize_t
cache_length(ChunkCacheObject *self)
{
    return self->used;
}

static PyObject *
cache_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if ((args != NULL && PyTuple_GET_SIZE(args)) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "ChunkCache() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0);  /* zeroed: no entries */
}

static PyMethodDef cache_methods[] = {
    {"lookup", (PyCFunction)cache_lookup, METH_VARARGS, cache_lookup_doc},
    {"update", (PyCFunction)cache_update, METH_O, cache_update_doc},
    {"clear", (PyCFunction)cache_clear, METH_NOARGS, cache_clear_doc},
    {"__reduce__", (PyCFunction)cache_reduce, METH_NOARGS, NULL},
    {"__sizeof__", (PyCFunction)cache_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods cache_as_sequence = {
    .sq_length = (lenfunc)cache_length,
};

static PyTypeObject ChunkCacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "textnb._c._speedups.ChunkCache",
    .tp_doc = PyDoc_STR("The tokenizer's cache of chunk -> value, looked up from a text's "
                        "characters (speedups.ChunkCache)."),
    .tp_basicsize = sizeof(ChunkCacheObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = cache_new,
    .tp_dealloc = (destructor)cache_dealloc,
    .tp_methods = cache_methods,
    .tp_as_sequence = &cache_as_sequence,
};

/* ---- new chunks mapped to their words' tokens (speedups.map_chunks) ---------------- */

/* Whether `c` is one of the ASCII characters of `set` (a str of ASCII characters). */
static inline int
in_ascii_set(Py_UCS4 c, const unsigned char *set)
{
    return c < 128 && set[c];
}

static inline int
ascii_letter(Py_UCS4 c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether _TOKEN_MATCH could match text[start:end]: it starts (in any case) with
   http://, https://, ftp:// or www., or it holds an '@' (the pattern's two branches).
   Only then is the Python pattern asked. */
static int
may_token_match(int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    static const char *schemes[] = {"http://", "https://", "ftp://", "www.", NULL};
    for (int s = 0; schemes[s] != NULL; s++) {
        const char *p = schemes[s];
        Py_ssize_t i = start;
        while (*p && i < end) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c >= 'A' && c <= 'Z')
                c += 'a' - 'A';
            if (c != (Py_UCS4)(unsigned char)*p)
                break;
            p++, i++;
        }
        if (*p == '\0')
            return 1;
    }
    for (Py_ssize_t i = start; i < end; i++)
        if (PyUnicode_READ(kind, data, i) == '@')
            return 1;
    return 0;
}

/* 1 when token_match(chunk[start:end]) is truthy, 0 when not, -1 on error. */
static int
token_matches(PyObject *chunk, int kind, const void *data, Py_ssize_t start, Py_ssize_t end,
              PyObject *token_match)
{
    if (!may_token_match(kind, data, start, end))
        return 0;
    PyObject *text = PyUnicode_Substring(chunk, start, end);
    if (text == NULL)
        return -1;
    PyObject *match = PyObject_CallOneArg(token_match, text);
    Py_DECREF(text);
    if (match == NULL)
        return -1;
    int truth = PyObject_IsTrue(match);
    Py_DECREF(match);
    return truth;
}

typedef struct {
    unsigned char prefix[128], suffix[128], infix[128];
    PyObject *token_match;
} ChunkRules;

/* Whether text[start:end] has an infix: one of its characters between two ASCII letters. */
static int
has_infix(int kind, const void *data, Py_ssize_t start, Py_ssize_t end, const ChunkRules *rules)
{
    for (Py_ssize_t i = start + 1; i + 1 < end; i++)
        if (in_ascii_set(PyUnicode_READ(kind, data, i), rules->infix)
                && ascii_letter(PyUnicode_READ(kind, data, i - 1))
                && ascii_letter(PyUnicode_READ(kind, data, i + 1)))
            return 1;
    return 0;
}

/* spaCy's affix loop on `chunk` under single-character rules (tokenize._words_without_spacy
   is its reference). The prefixes and the core go to `front` (pairs start, end), the
   suffixes, outermost first, to `back`; each has room for n + 1 pairs. RETURNS 1 and sets
   *n_front and *n_back; 0 when the core has an infix (spaCy's to split); -1 on error. */
static int
split_chunk(PyObject *chunk, const ChunkRules *rules, Py_ssize_t *front, Py_ssize_t *n_front,
            Py_ssize_t *back, Py_ssize_t *n_back)
{
    int kind = PyUnicode_KIND(chunk);
    const void *data = PyUnicode_DATA(chunk);
    Py_ssize_t start = 0, end = PyUnicode_GET_LENGTH(chunk), last_size = 0, nf = 0, nb = 0;
    while (end > start && end - start != last_size) {
        int matched = token_matches(chunk, kind, data, start, end, rules->token_match);
        if (matched < 0)
            return -1;
        if (matched)
            break;
        last_size = end - start;
        /* spaCy looks for the suffix after the prefix: none in an empty rest */
        int pre = in_ascii_set(PyUnicode_READ(kind, data, start), rules->prefix);
        int suf = end - start - pre > 0
                  && in_ascii_set(PyUnicode_READ(kind, data, end - 1), rules->suffix);
        if (pre) {
            front[2 * nf] = start;
            front[2 * nf + 1] = start + 1;
            nf++;
            start++;
        }
        if (suf) {
            back[2 * nb] = end - 1;
            back[2 * nb + 1] = end;
            nb++;
            end--;
        }
    }
    if (end > start) {
        int matched = token_matches(chunk, kind, data, start, end, rules->token_match);
        if (matched < 0)
            return -1;
        if (!matched && has_infix(kind, data, start, end, rules))
            return 0;
        front[2 * nf] = start;
        front[2 * nf + 1] = end;
        nf++;
    }
    *n_front = nf;
    *n_back = nb;
    return 1;
}

/* Whether `chunk` is one word as it is: no prefix first, no suffix last, no infix (an
   empty chunk too, as the Python reference has it; a text's chunks are never empty). */
static int
one_word(PyObject *chunk, const ChunkRules *rules)
{
    int kind = PyUnicode_KIND(chunk);
    const void *data = PyUnicode_DATA(chunk);
    Py_ssize_t n = PyUnicode_GET_LENGTH(chunk);
    if (n == 0)
        return 1;
    if (in_ascii_set(PyUnicode_READ(kind, data, 0), rules->prefix)
            || in_ascii_set(PyUnicode_READ(kind, data, n - 1), rules->suffix))
        return 0;
    return !has_infix(kind, data, 0, n, rules);
}

/* The tokens of a word (a new reference to a tuple of str): from `words`, else from
   new_word(text), which also stores them there. */
/* How a new plain ASCII word maps to its token (speedups.PlainWords). */
typedef struct {
    PyObject *namespace;  /* str; NULL: every new word goes to new_word */
    int lowercase;
    Py_ssize_t min_length, max_length, cache_limit;
} PlainWords;

/* speedups.plain_word_tokens_python(text, plain), for a plain ASCII word `text`: the
 * word (lower-cased, if so set) in its namespace, none when shorter than min_length,
 * "skip:" with its first letter and size in tens when longer than max_length. */
static PyObject *
plain_word_tokens(PyObject *text, const PlainWords *plain)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n < plain->min_length)
        return PyTuple_New(0);
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(text);
    PyObject *token;
    if (n > plain->max_length) {
        char first = plain->lowercase && s[0] >= 'A' && s[0] <= 'Z' ? s[0] + 32 : s[0];
        token = PyUnicode_FromFormat("%Uskip:%c %zd", plain->namespace, (int)first,
                                     n / 10 * 10);
    } else {
        Py_ssize_t k = PyUnicode_GET_LENGTH(plain->namespace);
        token = PyUnicode_New(k + n, 127);
        if (token != NULL) {
            Py_UCS1 *out = PyUnicode_1BYTE_DATA(token);
            if (PyUnicode_CopyCharacters(token, 0, plain->namespace, 0, k) < 0) {
                Py_DECREF(token);
                return NULL;
            }
            for (Py_ssize_t i = 0; i < n; i++)
                out[k + i] = plain->lowercase && s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i];
        }
    }
    if (token == NULL)
        return NULL;
    PyObject *tokens = PyTuple_Pack(1, token);
    Py_DECREF(token);
    return tokens;
}

/* Whether `text` is a plain ASCII word (speedups.plain_word_tokens_python): ASCII, and
 * none of the characters some rule of tokenize._map_plain looks for (a digit, ".", "@",
 * ":", "$"). */
static int
plain_ascii_word(PyObject *text)
{
    if (!PyUnicode_IS_ASCII(text) || PyUnicode_GET_LENGTH(text) == 0)
        return 0;
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(text);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(text); i < n; i++) {
        Py_UCS1 c = s[i];
        if ((c >= '0' && c <= '9') || c == '.' || c == '@' || c == ':' || c == '$')
            return 0;
    }
    return 1;
}

/* A word's tokens: from `words`, else made here for a plain ASCII word (and
 * stored in `words` while it is under its limit, as new_word stores), else new_word's. */
static PyObject *
word_tokens(PyObject *text, PyObject *words, PyObject *new_word, const PlainWords *plain)
{
    PyObject *tokens = PyDict_GetItemWithError(words, text);
    if (tokens != NULL)
        Py_INCREF(tokens);
    else if (PyErr_Occurred())
        return NULL;
    else if (plain->namespace != NULL && plain_ascii_word(text)) {
        tokens = plain_word_tokens(text, plain);
        if (tokens != NULL && PyDict_GET_SIZE(words) < plain->cache_limit
                && PyDict_SetItem(words, text, tokens) < 0)
            Py_CLEAR(tokens);
    } else
        tokens = PyObject_CallOneArg(new_word, text);
    if (tokens != NULL && !PyTuple_Check(tokens)) {
        PyErr_SetString(PyExc_TypeError, "a word's tokens must be a tuple");
        Py_CLEAR(tokens);
    }
    return tokens;
}

/* What a chunk of these words' tokens is cached as (tokenize._chunk_entry in bigram
   mode; else their tokens in one tuple). `mapped` holds n tuples. */
static PyObject *
chunk_value(PyObject **mapped, Py_ssize_t n, int bigrams)
{
    Py_ssize_t total = 0, n_words = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        total += PyTuple_GET_SIZE(mapped[i]);
        n_words += PyTuple_GET_SIZE(mapped[i]) > 0;
    }
    if (!bigrams || n_words == 0) {
        if (n == 1) {
            Py_INCREF(mapped[0]);
            return mapped[0];
        }
        PyObject *all = PyTuple_New(total);
        if (all == NULL)
            return NULL;
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(mapped[i]); j++) {
                PyObject *token = PyTuple_GET_ITEM(mapped[i], j);
                Py_INCREF(token);
                PyTuple_SET_ITEM(all, at++, token);
            }
        return all;
    }
    PyObject *head = NULL;
    Py_ssize_t i = 0;
    for (; head == NULL; i++)
        if (PyTuple_GET_SIZE(mapped[i]) > 0)
            head = mapped[i];
    if (n_words == 1 && PyTuple_GET_SIZE(head) == 1) {
        PyObject *token = PyTuple_GET_ITEM(head, 0);
        Py_INCREF(token);
        return token;
    }
    PyObject *tail = PyList_New(0), *tail_tuple = NULL, *value = NULL;
    if (tail == NULL)
        return NULL;
    PyObject *first = PyTuple_GET_ITEM(head, 0), *prev = first;
    int first_colon = has_colon(first), prev_colon = first_colon;
    if (first_colon < 0)
        goto done;
    for (; i < n; i++) {
        PyObject *word = mapped[i];
        if (PyTuple_GET_SIZE(word) == 0)
            continue;
        if (extend_with_tuple(tail, word) < 0)
            goto done;
        PyObject *next = PyTuple_GET_ITEM(word, 0);
        int next_colon = has_colon(next);
        if (next_colon < 0)
            goto done;
        if (!next_colon && !prev_colon && append_pair(tail, prev, next) < 0)
            goto done;
        prev = next;
        prev_colon = next_colon;
    }
    tail_tuple = PyList_AsTuple(tail);
    if (tail_tuple == NULL)
        goto done;
    value = Py_BuildValue("(OOOOOOn)", head, tail_tuple, first,
                          first_colon ? Py_False : Py_True, prev,
                          prev_colon ? Py_False : Py_True, total);
done:
    Py_DECREF(tail);
    Py_XDECREF(tail_tuple);
    return value;
}

static int
ascii_set(PyObject *chars, unsigned char *set, const char *name)
{
    memset(set, 0, 128);
    if (!PyUnicode_Check(chars) || !PyUnicode_IS_ASCII(chars)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str of ASCII characters", name);
        return -1;
    }
    const Py_UCS1 *data = PyUnicode_1BYTE_DATA(chars);
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(chars); i++)
        set[data[i]] = 1;
    return 0;
}

PyDoc_STRVAR(map_chunks_doc,
"map_chunks(chunks, words, new_word, bigrams, prefixes, suffixes, infixes, token_match)\n"
"-> (dict, list)\n\n"
"What each of `chunks` (distinct whitespace-free str) maps to, for those split without\n"
"spaCy, and the list of the others. A chunk's words are found by spaCy's affix loop\n"
"under single-character rules (`prefixes` split off a word's start, `suffixes` its end,\n"
"`infixes` split between two ASCII letters, `token_match` keeps a URL or address\n"
"whole); a chunk whose core has an infix is left to spaCy. A word's tokens come from the\n"
"dict `words`, else from new_word(word), which stores them there. The value is the\n"
"chunk entry (tokenize._chunk_entry) when `bigrams`, else the words' tokens in one tuple.");

static PyObject *
map_chunks(PyObject *module, PyObject *args)
{
    PyObject *chunks, *words, *new_word, *prefixes, *suffixes, *infixes, *plain_args = Py_None;
    int bigrams;
    ChunkRules rules;
    PlainWords plain = {NULL, 0, 0, 0, 0};
    if (!PyArg_ParseTuple(args, "O!O!OpUUUO|O:map_chunks", &PyList_Type, &chunks,
                          &PyDict_Type, &words, &new_word, &bigrams, &prefixes, &suffixes,
                          &infixes, &rules.token_match, &plain_args))
        return NULL;
    if (plain_args != Py_None
            && !PyArg_ParseTuple(plain_args, "Upnnn:map_chunks' plain words", &plain.namespace,
                                 &plain.lowercase, &plain.min_length, &plain.max_length,
                                 &plain.cache_limit))
        return NULL;
    if (plain.namespace != NULL && !PyUnicode_IS_ASCII(plain.namespace)) {
        PyErr_SetString(PyExc_ValueError, "map_chunks' plain words: the namespace must be ASCII");
        return NULL;
    }
    if (ascii_set(prefixes, rules.prefix, "prefixes") < 0
            || ascii_set(suffixes, rules.suffix, "suffixes") < 0
            || ascii_set(infixes, rules.infix, "infixes") < 0)
        return NULL;
    PyObject *values = PyDict_New(), *left = PyList_New(0);
    Py_ssize_t *bounds = NULL, room = 0;
    PyObject **mapped = NULL;
    if (values == NULL || left == NULL)
        goto error;
    Py_ssize_t n_chunks = PyList_GET_SIZE(chunks);
    for (Py_ssize_t c = 0; c < n_chunks; c++) {
        /* Its own reference: new_word and token_match are Python code, which could
           change the list. */
        PyObject *chunk = PyList_GET_ITEM(chunks, c);
        if (!PyUnicode_Check(chunk)) {
            PyErr_SetString(PyExc_TypeError, "map_chunks takes a list of str");
            goto error;
        }
        Py_INCREF(chunk);
        PyObject *value;
        if (one_word(chunk, &rules)) {
            PyObject *tokens = word_tokens(chunk, words, new_word, &plain);
            if (tokens == NULL)
                goto error;
            value = chunk_value(&tokens, 1, bigrams);
            Py_DECREF(tokens);
        } else {
            Py_ssize_t n = PyUnicode_GET_LENGTH(chunk), n_front = 0, n_back = 0;
            if (n + 1 > room) {
                PyMem_Free(bounds);
                PyMem_Free(mapped);
                room = 2 * (n + 1);
                bounds = PyMem_Malloc(4 * room * sizeof(Py_ssize_t));
                mapped = PyMem_Malloc(2 * room * sizeof(PyObject *));
                if (bounds == NULL || mapped == NULL) {
                    PyErr_NoMemory();
                    Py_DECREF(chunk);
                    goto error;
                }
            }
            Py_ssize_t *back = bounds + 2 * room;
            int split = split_chunk(chunk, &rules, bounds, &n_front, back, &n_back);
            if (split <= 0) {
                int failed = split < 0 || PyList_Append(left, chunk) < 0;
                Py_DECREF(chunk);
                if (failed)
                    goto error;
                continue;
            }
            Py_ssize_t n_words = 0;
            int failed = 0;
            for (Py_ssize_t w = 0; w < n_front + n_back && !failed; w++) {
                /* the prefixes and core in order, then the suffixes innermost first */
                Py_ssize_t *at = w < n_front ? bounds + 2 * w
                                             : back + 2 * (n_back - 1 - (w - n_front));
                PyObject *text = at[0] == 0 && at[1] == n
                                 ? (Py_INCREF(chunk), chunk)
                                 : PyUnicode_Substring(chunk, at[0], at[1]);
                PyObject *tokens = text == NULL ? NULL : word_tokens(text, words, new_word, &plain);
                Py_XDECREF(text);
                if (tokens == NULL)
                    failed = 1;
                else
                    mapped[n_words++] = tokens;
            }
            value = failed ? NULL : chunk_value(mapped, n_words, bigrams);
            for (Py_ssize_t w = 0; w < n_words; w++)
                Py_DECREF(mapped[w]);
        }
        int stored = value == NULL ? -1 : PyDict_SetItem(values, chunk, value);
        Py_XDECREF(value);
        Py_DECREF(chunk);
        if (stored < 0)
            goto error;
    }
    PyMem_Free(bounds);
    PyMem_Free(mapped);
    PyObject *result = PyTuple_Pack(2, values, left);
    Py_DECREF(values);
    Py_DECREF(left);
    return result;
error:
    PyMem_Free(bounds);
    PyMem_Free(mapped);
    Py_XDECREF(values);
    Py_XDECREF(left);
    return NULL;
}

/* ---- a plain message's header fields (speedups.plain_fields) ------------------------ */

/* A byte of a field's name as mail._FIELD_NAME has it: printable ASCII but ':'. */
static inline int
field_name_byte(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e && c != ':';
}

/* A byte mail._LINE lets into a line's text: not CR, LF, \x0b, \x0c or \x1c-\x1e. */
static inline int
line_byte(unsigned char c)
{
    return !(c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e));
}

/* The end of the line of text starting at `i` (the index after its LF), or -1 when a
 * byte that no line holds comes first, or the data ends before an LF. */
static Py_ssize_t
line_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i)
{
    for (; i < n; i++) {
        if (s[i] == '\n')
            return i + 1;
        if (!line_byte(s[i]))
            return -1;
    }
    return -1;
}

PyDoc_STRVAR(plain_fields_doc,
"plain_fields(raw) -> (end, [(name, value), ...]) | None: "
"``speedups.plain_fields_python``.");

static PyObject *
plain_fields(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len, at = 0;
    PyObject *fields = PyList_New(0);
    if (fields == NULL)
        goto error;
    for (;;) {
        /* A field line: its name, ':', its text, LF. */
        Py_ssize_t i = at;
        while (i < n && field_name_byte(s[i]))
            i++;
        if (i == at || i >= n || s[i] != ':')
            break;
        Py_ssize_t colon = i, end = line_end(s, n, colon + 1);
        if (end < 0)
            break;
        /* Its continuation lines: a blank, text, LF. */
        for (;;) {
            if (end >= n || (s[end] != ' ' && s[end] != '\t'))
                break;
            Py_ssize_t next = line_end(s, n, end + 1);
            if (next < 0)
                break;
            end = next;
        }
        Py_ssize_t start = colon + 1;
        while (start < end - 1 && (s[start] == ' ' || s[start] == '\t'))
            start++;
        PyObject *name = PyUnicode_DecodeASCII((const char *)s + at, colon - at, "strict");
        PyObject *value = name == NULL ? NULL
            : PyUnicode_DecodeASCII((const char *)s + start, end - 1 - start, "surrogateescape");
        PyObject *pair = value == NULL ? NULL : PyTuple_Pack(2, name, value);
        Py_XDECREF(name);
        Py_XDECREF(value);
        if (pair == NULL)
            goto error;
        int failed = PyList_Append(fields, pair) < 0;
        Py_DECREF(pair);
        if (failed)
            goto error;
        at = end;
    }
    PyBuffer_Release(&view);
    if (PyList_GET_SIZE(fields) == 0) {
        Py_DECREF(fields);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(nN)", at, fields);
error:
    Py_XDECREF(fields);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- a message's bytes as the ledger knows them (speedups.normalise_message) -------- */

/* bytes.strip()'s whitespace: space, \t, \n, \r, \x0b, \x0c. */
static inline int
strip_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Whether the n bytes at `a`, lower-cased as bytes.lower() does (ASCII only), are the n
 * bytes of `lower` (lower-case already). */
static inline int
equal_lowered(const unsigned char *a, const char *lower, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = a[i];
        if (c >= 'A' && c <= 'Z')
            c += 'a' - 'A';
        if (c != (unsigned char)lower[i])
            return 0;
    }
    return 1;
}

/* Whether a field line (not a continuation) is one of `fields` by name, or its name starts
 * with one of `prefixes` (tuples of lower-case ASCII bytes): the name is what precedes
 * the line's first ':', without bytes.strip()'s whitespace, lower-cased as bytes.lower()
 * does. A line without ':' is no field. */
static int
dropped_field(const char *line, Py_ssize_t size, PyObject *fields, PyObject *prefixes)
{
    const char *colon = memchr(line, ':', size);
    if (colon == NULL)
        return 0;
    const unsigned char *start = (const unsigned char *)line;
    const unsigned char *stop = (const unsigned char *)colon;
    while (start < stop && strip_space(*start))
        start++;
    while (stop > start && strip_space(stop[-1]))
        stop--;
    Py_ssize_t n = stop - start;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *field = PyTuple_GET_ITEM(fields, i);
        if (PyBytes_GET_SIZE(field) == n && equal_lowered(start, PyBytes_AS_STRING(field), n))
            return 1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(prefixes); i++) {
        PyObject *prefix = PyTuple_GET_ITEM(prefixes, i);
        Py_ssize_t k = PyBytes_GET_SIZE(prefix);
        if (k <= n && equal_lowered(start, PyBytes_AS_STRING(prefix), k))
            return 1;
    }
    return 0;
}

PyDoc_STRVAR(normalise_message_doc,
"normalise_message(raw, fields, prefixes) -> bytes: ``speedups.normalise_message_python``.");

static PyObject *
normalise_message(PyObject *module, PyObject *args)
{
    Py_buffer raw;
    PyObject *fields, *prefixes;
    if (!PyArg_ParseTuple(args, "y*O!O!:normalise_message", &raw, &PyTuple_Type, &fields,
                          &PyTuple_Type, &prefixes))
        return NULL;
    for (int t = 0; t < 2; t++) {
        PyObject *names = t ? prefixes : fields;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
            if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) {
                PyBuffer_Release(&raw);
                PyErr_SetString(PyExc_TypeError, "normalise_message: names must be bytes");
                return NULL;
            }
    }
    /* CRLF -> LF first, into `text` (the output is never longer than it, plus "\n"). */
    const char *in = raw.buf;
    Py_ssize_t size = raw.len;
    char *text = PyMem_Malloc(size + 1);
    if (text == NULL) {
        PyBuffer_Release(&raw);
        return PyErr_NoMemory();
    }
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < size;) {
        const char *cr = memchr(in + i, '\r', size - i);
        Py_ssize_t stop = cr == NULL ? size : cr - in;
        memcpy(text + n, in + i, stop - i);
        n += stop - i;
        if (cr == NULL)
            break;
        if (stop + 1 < size && in[stop + 1] == '\n') {
            text[n++] = '\n';
            i = stop + 2;
        } else {
            text[n++] = '\r';
            i = stop + 1;
        }
    }
    PyBuffer_Release(&raw);
    Py_ssize_t start = 0;
    if (n >= 5 && memcmp(text, "From ", 5) == 0) {  /* a leading mbox "From " line */
        const char *nl = memchr(text, '\n', n);
        start = nl == NULL ? n : nl - text + 1;
    }
    /* The header section: up to the first empty line, else everything. Its lines are
     * kept or dropped in place (out <= read position); the rest is moved after them. */
    Py_ssize_t out = start, head_end = n;
    if (!(start < n && text[start] == '\n')) {  /* no header section at all: kept whole */
        for (Py_ssize_t i = start; i + 1 < n; i++) {
            const char *nl = memchr(text + i, '\n', n - 1 - i);
            if (nl == NULL)
                break;
            i = nl - text;
            if (text[i + 1] == '\n') {
                head_end = i;
                break;
            }
        }
        int dropping = 0, first = 1;
        for (Py_ssize_t i = start; i <= head_end;) {
            const char *nl = memchr(text + i, '\n', head_end - i);
            Py_ssize_t stop = nl == NULL ? head_end : nl - text;
            const char *line = text + i;
            Py_ssize_t len = stop - i;
            if (!(len > 0 && (line[0] == ' ' || line[0] == '\t')))
                dropping = dropped_field(line, len, fields, prefixes);
            if (!dropping) {
                if (!first)
                    text[out++] = '\n';
                memmove(text + out, line, len);
                out += len;
                first = 0;
            }
            i = stop + 1;
        }
        /* then the empty line and the body as they were */
        memmove(text + out, text + head_end, n - head_end);
        out += n - head_end;
    } else {
        out = n;
    }
    while (out > start && text[out - 1] == '\n')
        out--;
    text[out++] = '\n';
    PyObject *result = PyBytes_FromStringAndSize(text + start, out - start);
    PyMem_Free(text);
    return result;
}

/* ---- host names and IPv4 addresses in header values (speedups.find_hostnames, ...) -- */

/* What \b sees as a word character, in ASCII text. */
static inline int
ascii_word(Py_UCS1 c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || c == '_';
}

static inline int
lower_alnum(Py_UCS1 c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* The end of the host name that tokenize._HOSTNAME matches at `i` of lower-cased ASCII
 * text `s` (`n` bytes), or -1. Its labels each end at a '.', so the regex's backtracking
 * can only give up whole labels: take every label there is, then try the top-level
 * name (a run of 2+ letters with no word character after it) after the last label,
 * then after one label fewer, and so on. */
static Py_ssize_t
hostname_end(const Py_UCS1 *s, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t starts[128];  /* where each label after the first starts */
    Py_ssize_t k = 0, at = i;
    for (;;) {
        Py_ssize_t j = at;
        while (j < n && (lower_alnum(s[j]) || s[j] == '-'))
            j++;
        if (j == at || j >= n || s[j] != '.' || j - at > 63 || !lower_alnum(s[at])
                || !lower_alnum(s[j - 1]))
            break;
        at = j + 1;
        if (k < 128)
            starts[k] = at;
        k++;
    }
    if (k > 128)  /* more labels than kept: the regex's search, in Python */
        return -2;
    for (; k > 0; k--) {
        Py_ssize_t t = starts[k - 1], j = t;
        while (j < n && s[j] >= 'a' && s[j] <= 'z')
            j++;
        if (j - t >= 2 && (j == n || !ascii_word(s[j])))
            return j;
    }
    return -1;
}

/* What find_hostnames and find_ipv4 start with: `text`'s characters (*s, *n) and a new
 * empty list for what they find, or NULL: with an error set when `text` is not a str,
 * without one when it is not ASCII (the caller returns None: its pattern takes over). */
static PyObject *
ascii_scan_start(PyObject *text, const char *who, const Py_UCS1 **s, Py_ssize_t *n)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "%s: text must be a str", who);
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text))
        return NULL;
    *s = PyUnicode_1BYTE_DATA(text);
    *n = PyUnicode_GET_LENGTH(text);
    return PyList_New(0);
}

PyDoc_STRVAR(find_hostnames_doc,
"find_hostnames(text) -> list[str] | None: tokenize._HOSTNAME_LOWER.findall(text) for "
"ASCII text; None for any other.");

static PyObject *
find_hostnames(PyObject *module, PyObject *text)
{
    const Py_UCS1 *s;
    Py_ssize_t n;
    PyObject *found = ascii_scan_start(text, "find_hostnames", &s, &n);
    if (found == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    for (Py_ssize_t i = 0; i < n;) {
        if (!lower_alnum(s[i]) || (i > 0 && ascii_word(s[i - 1]))) {
            i++;
            continue;
        }
        Py_ssize_t end = hostname_end(s, n, i);
        if (end == -2) {
            Py_DECREF(found);
            Py_RETURN_NONE;
        }
        if (end < 0) {
            i++;
            continue;
        }
        PyObject *host = PyUnicode_Substring(text, i, end);
        if (host == NULL || PyList_Append(found, host) < 0) {
            Py_XDECREF(host);
            Py_DECREF(found);
            return NULL;
        }
        Py_DECREF(host);
        i = end;
    }
    return found;
}

/* The end of a run of 1 to 3 ASCII digits at `i` followed by `after` (or, when `after`
 * is 0, by no word character), or -1. */
static inline Py_ssize_t
octet_end(const Py_UCS1 *s, Py_ssize_t n, Py_ssize_t i, Py_UCS1 after)
{
    Py_ssize_t j = i;
    while (j < n && j - i < 4 && s[j] >= '0' && s[j] <= '9')
        j++;
    if (j == i || j - i > 3)
        return -1;
    if (after ? (j < n && s[j] == after) : (j == n || !ascii_word(s[j])))
        return j;
    return -1;
}

PyDoc_STRVAR(find_ipv4_doc,
"find_ipv4(text) -> list[tuple[str, str, str, str]] | None: tokenize._IPV4.findall(text) "
"for ASCII text; None for any other.");

static PyObject *
find_ipv4(PyObject *module, PyObject *text)
{
    const Py_UCS1 *s;
    Py_ssize_t n;
    PyObject *found = ascii_scan_start(text, "find_ipv4", &s, &n);
    if (found == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t bounds[5] = {i, -1, -1, -1, -1};
        if (s[i] >= '0' && s[i] <= '9' && !(i > 0 && ascii_word(s[i - 1]))) {
            int q = 0;
            for (; q < 4; q++) {
                Py_ssize_t end = octet_end(s, n, bounds[q], q < 3 ? '.' : 0);
                if (end < 0)
                    break;
                bounds[q + 1] = q < 3 ? end + 1 : end;
            }
            if (q == 4) {
                PyObject *quad = PyTuple_New(4);
                if (quad == NULL)
                    goto error;
                for (int g = 0; g < 4; g++) {
                    Py_ssize_t stop = g < 3 ? bounds[g + 1] - 1 : bounds[4];
                    PyObject *octet = PyUnicode_Substring(text, bounds[g], stop);
                    if (octet == NULL) {
                        Py_DECREF(quad);
                        goto error;
                    }
                    PyTuple_SET_ITEM(quad, g, octet);
                }
                int failed = PyList_Append(found, quad) < 0;
                Py_DECREF(quad);
                if (failed)
                    goto error;
                i = bounds[4];
                continue;
            }
        }
        i++;
    }
    return found;
error:
    Py_DECREF(found);
    return NULL;
}

static PyMethodDef methods[] = {
    {"read_json_items", read_json_items, METH_VARARGS, read_json_items_doc},
    {"pack_tokens", pack_tokens, METH_VARARGS, pack_tokens_doc},
    {"json_items", json_items, METH_VARARGS, json_items_doc},
    {"strongest_positions", strongest_positions, METH_VARARGS, strongest_positions_doc},
    {"hash_tokens", hash_tokens, METH_VARARGS, hash_tokens_doc},
    {"equal_tokens", equal_tokens, METH_VARARGS, equal_tokens_doc},
    {"gather_tokens", gather_tokens, METH_VARARGS, gather_tokens_doc},
    {"index_insert", index_insert, METH_VARARGS, index_insert_doc},
    {"index_find", index_find, METH_VARARGS, index_find_doc},
    {"count_words", count_words, METH_O, count_words_doc},
    {"count_messages", count_messages, METH_VARARGS, count_messages_doc},
    {"join_chunks", join_chunks, METH_O, join_chunks_doc},
    {"map_chunks", map_chunks, METH_VARARGS, map_chunks_doc},
    {"number_tokens", number_tokens, METH_VARARGS, number_tokens_doc},
    {"normalise_message", normalise_message, METH_VARARGS, normalise_message_doc},
    {"plain_fields", plain_fields, METH_O, plain_fields_doc},
    {"find_hostnames", find_hostnames, METH_O, find_hostnames_doc},
    {"find_ipv4", find_ipv4, METH_O, find_ipv4_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "textnb._c._speedups",
    "The per-token loops of textnb._c.speedups, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&ChunkCacheType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    Py_INCREF(&ChunkCacheType);
    if (PyModule_AddObject(module, "ChunkCache", (PyObject *)&ChunkCacheType) < 0) {
        Py_DECREF(&ChunkCacheType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
