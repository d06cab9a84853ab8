/* The SimHash of a text, compiled: `webtrawl.parse.simhash.simhash` after the text is cut to its first
`MAX_CHARS` characters.

Python's fastest version (lower-casing, splitting, joining 3-word shingles, hashing each, counting bits over
one big integer) costs ~420 µs a page of the benchmark site, and the hashing stage was a fifth of a crawl's
CPU; this costs an eighth of that. The result is the same hash, bit for bit: the same words (runs of characters
that Python's `\w` matches, judged by Python's own Unicode database, after `str.lower`), the same shingles
(words joined by one space), the same xxh3 of each (the xxHash library's code, inlined from its header), the
same majority. The Python version stays as the fallback where this is not built, and as the reference the
tests compare it to.

It works in two passes: the text's words are written out joined by single spaces, so that every shingle is
one run of those bytes; then each shingle is hashed and its bits counted at once, keeping no list.

One difference, on purpose: "fewer than 8 distinct shingles" is judged by their hashes where Python compares
the shingles themselves; they differ only if two of a page's shingles collide in 64 bits.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define MIN_FEATURES 8
#define HASHES_PER_FLUSH 255 /* a byte lane overflows after 255 additions */

/* Byte value -> 8 bytes, byte k being bit k of the value: adding these counts 8 bits at once. */
static uint64_t spread[256];
/* Whether an ASCII character is a word character: letters, digits and '_'. */
static unsigned char ascii_word[128];
/* Latin-1 character -> its lower case's UTF-8 (1 or 2 bytes, the count in [0]), or [0] == 0 when the lower
   case is not a word character. Within Latin-1 every character's lower case is one Latin-1 character
   (checked when the module loads) and depends on no context (`str.lower`'s only rule with context, the
   final sigma, is outside Latin-1). */
static unsigned char latin1_word[256][3];

/* The text's words, lower-cased, as UTF-8, joined by single spaces (with one after the last). */
typedef struct {
    unsigned char *data;
    Py_ssize_t size, count;
} Words;

/* Most pages are Latin-1 (one byte a character in memory): their words are read here in one pass, a fifth of
   the cost of `str.lower` and an encoding. */
static void
latin1_words(const Py_UCS1 *text, Py_ssize_t length, Py_ssize_t max_words, Words *words)
{
    unsigned char *out = words->data;
    int in_word = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        const unsigned char *lower = latin1_word[text[i]];
        if (lower[0]) {
            if (!in_word && words->count == max_words)
                break;
            out[0] = lower[1];
            out[1] = lower[2];
            out += lower[0];
            words->count += !in_word;
            in_word = 1;
        } else if (in_word) {
            *out++ = ' ';
            in_word = 0;
        }
    }
    if (in_word)
        *out++ = ' ';
    words->size = out - words->data;
}

/* Bytes in the UTF-8 sequence that starts with `lead`: whole sequences, as Python wrote them (lone surrogates,
   written by "surrogatepass", are 3-byte sequences like any other). */
static inline int
character_width(unsigned char lead)
{
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

static inline int
is_word(const unsigned char *character, int width)
{
    if (width == 1)
        return ascii_word[character[0]];
    Py_UCS4 code = character[0] & (0x7F >> width);
    for (int k = 1; k < width; k++)
        code = code << 6 | (character[k] & 0x3F);
    return Py_UNICODE_ISALNUM(code);
}

/* The words of a lower-cased text's UTF-8 (lone surrogates written as by "surrogatepass"). */
static void
utf8_words(const unsigned char *text, Py_ssize_t size, Py_ssize_t max_words, Words *words)
{
    unsigned char *out = words->data;
    int in_word = 0;
    for (Py_ssize_t i = 0; i < size;) {
        int width = character_width(text[i]);
        if (is_word(text + i, width)) {
            if (!in_word && words->count == max_words)
                break;
            memcpy(out, text + i, (size_t)width);
            out += width;
            words->count += !in_word;
            in_word = 1;
        } else if (in_word) {
            *out++ = ' ';
            in_word = 0;
        }
        i += width;
    }
    if (in_word)
        *out++ = ' ';
    words->size = out - words->data;
}

/* Fills `words` from `text`; -1 with an exception set on failure. */
static int
read_words(PyObject *text, Py_ssize_t max_words, Words *words)
{
    words->count = 0;
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND) {
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        if (length > (PY_SSIZE_T_MAX - 1) / 2 || (words->data = PyMem_Malloc((size_t)(2 * length + 1))) == NULL)
            return PyErr_NoMemory(), -1;
        latin1_words(PyUnicode_1BYTE_DATA(text), length, max_words, words);
        return 0;
    }
    /* Other texts need `str.lower`'s full rules: İ becomes two characters, a final Σ a ς. */
    PyObject *lowered = PyObject_CallMethod(text, "lower", NULL);
    PyObject *utf8 = lowered == NULL ? NULL : PyUnicode_AsEncodedString(lowered, "utf-8", "surrogatepass");
    Py_XDECREF(lowered);
    if (utf8 == NULL)
        return -1;
    Py_ssize_t size = PyBytes_GET_SIZE(utf8);
    if ((words->data = PyMem_Malloc((size_t)size + 1)) == NULL) {
        Py_DECREF(utf8);
        return PyErr_NoMemory(), -1;
    }
    utf8_words((const unsigned char *)PyBytes_AS_STRING(utf8), size, max_words, words);
    Py_DECREF(utf8);
    return 0;
}

/* The bit counts of the hashes seen so far, 8 bits at a time in byte lanes, flushed before they overflow. */
typedef struct {
    uint64_t lanes[8];
    uint64_t bits[64];
    Py_ssize_t count;
    uint64_t first[MIN_FEATURES];
} Tally;

static void
flush(Tally *tally)
{
    for (int byte = 0; byte < 8; byte++) {
        for (int bit = 0; bit < 8; bit++)
            tally->bits[8 * byte + bit] += (tally->lanes[byte] >> (8 * bit)) & 0xFF;
        tally->lanes[byte] = 0;
    }
}

static inline void
add(Tally *tally, uint64_t hash)
{
    if (tally->count < MIN_FEATURES)
        tally->first[tally->count] = hash;
    for (int byte = 0; byte < 8; byte++)
        tally->lanes[byte] += spread[(hash >> (8 * byte)) & 0xFF];
    if (++tally->count % HASHES_PER_FLUSH == 0)
        flush(tally);
}

/* The hash of each 3-word shingle into `tally` when given, and into `all` when given (room for the
   `words->count - 2` shingles). */
static void
hash_shingles(const Words *words, Tally *tally, uint64_t *all)
{
    const unsigned char *data = words->data, *end = data + words->size;
    const unsigned char *starts[3] = {data, NULL, NULL};
    for (Py_ssize_t word = 1; word <= words->count; word++) {
        /* starts[k % 3] is where word k (from 0) starts; word - 1 ends at the next space. */
        const unsigned char *from = starts[(word - 1) % 3];
        const unsigned char *space = memchr(from, ' ', (size_t)(end - from));
        if (word >= 3) {
            const unsigned char *first = starts[word % 3];
            uint64_t hash = XXH3_64bits(first, (size_t)(space - first));
            if (all != NULL)
                all[word - 3] = hash;
            if (tally != NULL)
                add(tally, hash);
        }
        starts[word % 3] = space + 1;
    }
}

static int
compare(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether the text has at least MIN_FEATURES distinct shingles: settled by the first ones in real text, else
   by sorting all their hashes. 0, 1, or -1 with an exception set. */
static int
enough_features(const Words *words, const Tally *tally)
{
    if (tally->count < MIN_FEATURES)
        return 0;
    int repeated = 0;
    for (int i = 0; i < MIN_FEATURES; i++)
        for (int j = 0; j < i; j++)
            repeated |= tally->first[i] == tally->first[j];
    if (!repeated)
        return 1;
    uint64_t *all = PyMem_Malloc(sizeof(uint64_t) * (size_t)tally->count);
    if (all == NULL)
        return PyErr_NoMemory(), -1;
    hash_shingles(words, NULL, all);
    qsort(all, (size_t)tally->count, sizeof *all, compare);
    Py_ssize_t distinct = 1;
    for (Py_ssize_t i = 1; i < tally->count && distinct < MIN_FEATURES; i++)
        distinct += all[i] != all[i - 1];
    PyMem_Free(all);
    return distinct >= MIN_FEATURES;
}

static PyObject *
simhash(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    /* An exact str: a subclass's own `lower` would be called for some texts and not for others. */
    if (nargs != 2 || !PyUnicode_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "simhash(text: str, max_words: int)");
        return NULL;
    }
    Py_ssize_t max_words = PyNumber_AsSsize_t(args[1], NULL); /* a huge count: as many as there can be */
    if (max_words == -1 && PyErr_Occurred())
        return NULL;
    if (max_words < 0) {
        PyErr_SetString(PyExc_ValueError, "max_words must be >= 0");
        return NULL;
    }
    Words words;
    if (read_words(args[0], max_words, &words) < 0)
        return NULL;
    Tally tally = {0};
    hash_shingles(&words, &tally, NULL);
    flush(&tally);
    int enough = enough_features(&words, &tally);
    PyMem_Free(words.data);
    if (enough < 0)
        return NULL;
    if (!enough)
        Py_RETURN_NONE;
    uint64_t majority = 0;
    for (int bit = 0; bit < 64; bit++)
        if (2 * (uint64_t)tally.bits[bit] > (uint64_t)tally.count)
            majority |= (uint64_t)1 << bit;
    /* As a signed 64-bit value (two's complement, without relying on an out-of-range conversion). */
    return PyLong_FromLongLong(majority >> 63 ? -(long long)(~majority) - 1 : (long long)majority);
}

static PyMethodDef methods[] = {
    {"simhash", (PyCFunction)(void (*)(void))simhash, METH_FASTCALL,
     "simhash(text, max_words) -> int | None: the signed 64-bit SimHash of the 3-word shingles of the first "
     "max_words (>= 0) words of text, or None for fewer than 8 distinct shingles."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_simhash",
    .m_size = 0,
    .m_methods = methods,
};

/* Fills `latin1_word[value]` from Python's own `str.lower` and `\w`. */
static int
learn_latin1(int value)
{
    PyObject *character = PyUnicode_FromOrdinal(value);
    PyObject *lower = character == NULL ? NULL : PyObject_CallMethod(character, "lower", NULL);
    Py_XDECREF(character);
    if (lower == NULL)
        return -1;
    Py_UCS4 code = PyUnicode_GET_LENGTH(lower) == 1 ? PyUnicode_READ_CHAR(lower, 0) : 0x100;
    Py_DECREF(lower);
    if (code > 0xFF) {
        PyErr_Format(PyExc_ImportError, "the lower case of character %d is not one Latin-1 character", value);
        return -1;
    }
    unsigned char *entry = latin1_word[value];
    if (!(code < 0x80 ? ascii_word[code] : Py_UNICODE_ISALNUM(code)))
        entry[0] = 0;
    else if (code < 0x80)
        entry[0] = 1, entry[1] = (unsigned char)code;
    else
        entry[0] = 2, entry[1] = (unsigned char)(0xC0 | code >> 6), entry[2] = (unsigned char)(0x80 | (code & 0x3F));
    return 0;
}

PyMODINIT_FUNC
PyInit__simhash(void)
{
    for (int value = 0; value < 256; value++) {
        uint64_t lanes = 0;
        for (int bit = 0; bit < 8; bit++)
            lanes |= (uint64_t)((value >> bit) & 1) << (8 * bit);
        spread[value] = lanes;
    }
    for (int value = 0; value < 128; value++)
        ascii_word[value] = (value >= '0' && value <= '9') || (value >= 'a' && value <= 'z') ||
                            (value >= 'A' && value <= 'Z') || value == '_';
    for (int value = 0; value < 256; value++)
        if (learn_latin1(value) < 0)
            return NULL;
    return PyModule_Create(&module);
}
