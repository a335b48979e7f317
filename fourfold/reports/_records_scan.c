/* The fast path of fourfold.reports.recordlines: the lines of a records.jsonl block -> columns.
 *
 * scan(block, start, columns, extra_keys, max_schema)
 *
 * ``block`` holds whole lines of a records.jsonl (each with its "\n", except perhaps the file's
 * last one), ``start`` is its position in the file. ``columns`` are (name bytes, kind) pairs:
 * kind 0 a number, 1 a flag, 2 a text, 3 the chunk offsets, 4 the schema, 5 the object whose
 * ``extra_keys`` are read as numbers; a number, flag or text kind plus OPTIONAL (8) may be missing from
 * a line (NaN; a flag 0; a text None), as a field newer than the file is. Each line is walked once, as a JSON parser would, in any
 * key order. A line is *read* here when it is one JSON object whose every value is valid JSON
 * (strings: valid escapes, no control character, strict UTF-8; numbers: JSON's grammar; nesting
 * at most MAX_DEPTH deep) and where
 *   - every number, flag and text column is present (an optional one may be missing); a number is a JSON number, true/false (1/0)
 *     or null (NaN); a flag the same, read as 0/1 (null: 0); a text a string without an escape
 *     or null (None);
 *   - the offsets, when present, are null or a list of JSON numbers;
 *   - the schema, when present, is an integer literal of at most 18 digits, <= max_schema;
 *   - an object of extra keys holds each of them as a JSON number, true/false or anything else
 *     (NaN), the way reports.recordlines reads a decoded record's ``extra``.
 * A key holding an escape, a number that overflows a double, anything else: the line is *handed
 * back* (not blank by Python's ``bytes.strip()``) and the exact fallback decodes it whole. When a
 * key repeats, its last value counts, as in json.loads. So a line read here gives the row the
 * fallback would give (tests/unit/test_records_native.py, also on randomly damaged files).
 *
 * Returns (nums, texts, extras, read_lines, handed_back, line_starts, lens, flat):
 *   nums         float64: a row of the number and flag columns per line read
 *   texts        a tuple with, per text column, a list of str/None (one per line read)
 *   extras       float64: a row of the extra keys per line read (NaN where absent)
 *   read_lines   int64: the index in the block of each line read
 *   handed_back  int64: the index of each line handed back
 *   line_starts  int64: the file position of every line, and of the block's end (n + 1 values)
 *   lens         int64: the number of chunk offsets of each line read
 *   flat         float64: all chunk offsets of the lines read, in order
 * (the arrays as bytes in native byte order, for numpy.frombuffer).
 *
 * A number is read exactly as float(json.loads(number)) reads it: when it has no exponent and its
 * digits, read as an integer m, are at most 19 and m <= 2^53, it is m / 10^k, one correctly
 * rounded division of two exact doubles (the Clinger fast path); any other JSON number goes
 * through PyOS_string_to_double, as float() does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned char uchar;

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = PyMem_Realloc(b->data, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (n <= 0)
        return 0;
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, sizeof v); }

static PyObject *buf_bytes(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", b->len); }

static int is_space(uchar c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c'; }

/* JSON's whitespace only */
static Py_ssize_t skip_ws(const uchar *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* ---- numbers --------------------------------------------------------------------------------- */

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_digit(uchar c) { return (unsigned)(c - '0') < 10; }

#define HAND_BACK (-1)
#define FAILED (-2) /* a Python exception is set */

/* The JSON number at s[i] -> *out, as json.loads reads it, as a float (an integer -0 is 0.0):
 * the index after it, HAND_BACK (not a JSON number, or it overflows a double) or FAILED. What
 * follows the number is the caller's to check ("01" reads as 0, then "1" is out of place). */
static Py_ssize_t read_json_number(const uchar *s, Py_ssize_t i, Py_ssize_t n, double *out) {
    Py_ssize_t start = i, digits = 0, decimals = 0;
    int neg = 0, fraction = 0, exponent = 0;
    uint64_t m = 0;
    if (i < n && s[i] == '-') {
        neg = 1;
        i++;
    }
    if (i >= n || !is_digit(s[i]))
        return HAND_BACK;
    if (s[i] == '0') {
        i++;
        digits = 1;
    } else {
        for (; i < n && is_digit(s[i]); i++, digits++)
            m = m * 10 + (uint64_t)(s[i] - '0');
    }
    if (i < n && s[i] == '.') {
        Py_ssize_t first = ++i;
        for (; i < n && is_digit(s[i]); i++)
            m = m * 10 + (uint64_t)(s[i] - '0');
        decimals = i - first;
        fraction = 1;
        if (decimals == 0)
            return HAND_BACK;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        Py_ssize_t first = i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == first)
            return HAND_BACK;
        exponent = 1;
    }
    /* at most 19 digits cannot overflow m; m <= 2^53 and 10^decimals are exact doubles */
    if (!exponent && digits + decimals <= 19 && m <= (1ULL << 53)) {
        double v = (double)m / POW10[decimals];
        *out = neg && (fraction || m != 0) ? -v : v; /* json.loads("-0") is the integer 0 */
        return i;
    }
    char small[64];
    char *text = small;
    Py_ssize_t len = i - start;
    if (len >= (Py_ssize_t)sizeof small && (text = PyMem_Malloc((size_t)len + 1)) == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    memcpy(text, s + start, (size_t)len);
    text[len] = '\0';
    char *end = NULL;
    double v = PyOS_string_to_double(text, &end, NULL);
    int bad = (v == -1.0 && PyErr_Occurred()) || end != text + len;
    if (text != small)
        PyMem_Free(text);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return FAILED;
        PyErr_Clear();
    }
    if (bad || !(v == v) || (v == v * 2.0 && v != 0.0)) /* overflowed to infinity: json reads inf, hand back */
        return HAND_BACK;
    *out = v;
    return i;
}

/* ---- validating JSON without building it ------------------------------------------------------ */

#define MAX_DEPTH 64

/* The length of the strict UTF-8 sequence at s[0:n] (no overlong form, no surrogate, at most
 * U+10FFFF), or -1. json.loads also takes encoded surrogates: such a line is handed back. */
static Py_ssize_t utf8_length(const uchar *s, Py_ssize_t n) {
    uchar c = s[0], low = 0x80, high = 0xBF;
    Py_ssize_t len;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        low = c == 0xE0 ? 0xA0 : 0x80;
        high = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        low = c == 0xF0 ? 0x90 : 0x80;
        high = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return -1;
    }
    if (len > n || s[1] < low || s[1] > high)
        return -1;
    for (Py_ssize_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return -1;
    return len;
}

static int is_hex(uchar c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Whether none of the 8 bytes at p is '"', '\\', below 0x20 or above 0x7f (a byte after one
 * that is may be misjudged as one too: then the byte loop looks at them). */
static int plain8(const uchar *p) {
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t x, quote, slash;
    memcpy(&x, p, sizeof x);
    quote = x ^ (ones * '"');
    slash = x ^ (ones * '\\');
    return ((((quote - ones) & ~quote) | ((slash - ones) & ~slash) | (x - ones * 0x20) | x) & high) == 0;
}

/* The JSON string starting at s[i] == '"': the index after its closing quote, or HAND_BACK when
 * it is not valid JSON. *escaped: whether it holds an escape. */
static Py_ssize_t string_end(const uchar *s, Py_ssize_t i, Py_ssize_t n, int *escaped) {
    *escaped = 0;
    for (i++; i < n;) {
        while (i + 8 <= n && plain8(s + i))
            i += 8;
        if (i >= n)
            break;
        uchar c = s[i];
        if (c == '"')
            return i + 1;
        if (c >= 0x20 && c < 0x80 && c != '\\') {
            i++;
        } else if (c == '\\') {
            *escaped = 1;
            uchar e = i + 1 < n ? s[i + 1] : 0;
            if (e == 'u') {
                if (i + 6 > n || !is_hex(s[i + 2]) || !is_hex(s[i + 3]) || !is_hex(s[i + 4]) || !is_hex(s[i + 5]))
                    return HAND_BACK;
                i += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                       e == 't') {
                i += 2;
            } else {
                return HAND_BACK;
            }
        } else if (c < 0x20) {
            return HAND_BACK;
        } else {
            Py_ssize_t len = utf8_length(s + i, n - i);
            if (len < 0)
                return HAND_BACK;
            i += len;
        }
    }
    return HAND_BACK;
}

static Py_ssize_t literal(const uchar *s, Py_ssize_t i, Py_ssize_t n, const char *word) {
    Py_ssize_t len = (Py_ssize_t)strlen(word);
    return n - i >= len && memcmp(s + i, word, (size_t)len) == 0 ? i + len : HAND_BACK;
}

/* Any JSON value at s[i]: the index after it, or HAND_BACK. */
static Py_ssize_t skip_value(const uchar *s, Py_ssize_t i, Py_ssize_t n, int depth) {
    int escaped;
    if (i >= n)
        return HAND_BACK;
    uchar c = s[i];
    if (c == '"')
        return string_end(s, i, n, &escaped);
    if (c == 't')
        return literal(s, i, n, "true");
    if (c == 'f')
        return literal(s, i, n, "false");
    if (c == 'n')
        return literal(s, i, n, "null");
    if (c == '-' || is_digit(c)) {
        double v;
        return read_json_number(s, i, n, &v);
    }
    if ((c != '{' && c != '[') || depth >= MAX_DEPTH)
        return HAND_BACK;
    uchar close = c == '{' ? '}' : ']';
    i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == close)
        return i + 1;
    for (;;) {
        if (c == '{') {
            if (i >= n || s[i] != '"' || (i = string_end(s, i, n, &escaped)) < 0)
                return HAND_BACK;
            i = skip_ws(s, i, n);
            if (i >= n || s[i] != ':')
                return HAND_BACK;
            i = skip_ws(s, i + 1, n);
        }
        if ((i = skip_value(s, i, n, depth + 1)) < 0)
            return HAND_BACK;
        i = skip_ws(s, i, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
        } else {
            return i < n && s[i] == close ? i + 1 : HAND_BACK;
        }
    }
}

/* ---- the columns of one line ------------------------------------------------------------------ */

enum { KIND_NUMBER, KIND_FLAG, KIND_TEXT, KIND_OFFSETS, KIND_SCHEMA, KIND_EXTRA };
#define OPTIONAL 8
#define MAX_COLUMNS 32
#define MAX_KEY 64
#define CACHE_BYTES 128

typedef struct {
    const char *name;
    Py_ssize_t len;
    int kind, column; /* column: its index among the numbers (numbers and flags), the texts or the extras */
    int optional;     /* a number, flag or text a line may leave out */
} Column;

typedef struct {
    Column cols[MAX_COLUMNS]; /* sorted by name length: cols[first[len]:first[len + 1]] are len bytes long */
    int n;
    uchar first[MAX_KEY + 2];
} Names;

typedef struct {
    Names cols, extra;
    int n_numbers, n_texts;
    long long max_schema;
    /* per text column: the last raw value seen (when short) and its str: most lines repeat it */
    char last_raw[MAX_COLUMNS][CACHE_BYTES];
    Py_ssize_t last_len[MAX_COLUMNS];
    PyObject *last_obj[MAX_COLUMNS];
} Schema;

typedef struct {
    double nums[MAX_COLUMNS], extras[MAX_COLUMNS];
    PyObject *texts[MAX_COLUMNS]; /* new references, or NULL for None */
    uchar seen[MAX_COLUMNS];
    Py_ssize_t count, flat_start;
} Row;

static int lookup(const Names *names, const uchar *key, Py_ssize_t len) {
    if (len > MAX_KEY)
        return -1;
    for (int k = names->first[len]; k < names->first[len + 1]; k++)
        if (memcmp(names->cols[k].name, key, (size_t)len) == 0)
            return k;
    return -1;
}

/* A number, true/false (1/0) or null (*null = 1) at s[i]: the index after it, HAND_BACK, or FAILED. */
static Py_ssize_t read_number(const uchar *s, Py_ssize_t i, Py_ssize_t n, double *v, int *null) {
    *null = 0;
    if (i < n && (s[i] == 't' || s[i] == 'f' || s[i] == 'n')) {
        *v = s[i] == 't' ? 1.0 : 0.0;
        *null = s[i] == 'n';
        return literal(s, i, n, s[i] == 't' ? "true" : s[i] == 'f' ? "false" : "null");
    }
    return read_json_number(s, i, n, v);
}

/* null or a list of JSON numbers at s[i], appended to flat (row->count of them). */
static Py_ssize_t read_offsets(const uchar *s, Py_ssize_t i, Py_ssize_t n, Buf *flat, Row *row) {
    flat->len = row->flat_start; /* a repeated key: its last value counts */
    row->count = 0;
    if (i < n && s[i] == 'n')
        return literal(s, i, n, "null");
    if (i >= n || s[i] != '[')
        return HAND_BACK;
    i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == ']')
        return i + 1;
    for (;;) {
        double v;
        if ((i = read_json_number(s, i, n, &v)) < 0)
            return i;
        if (buf_put(flat, &v, sizeof v) < 0)
            return FAILED;
        row->count++;
        i = skip_ws(s, i, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
        } else {
            return i < n && s[i] == ']' ? i + 1 : HAND_BACK;
        }
    }
}

/* A string without escapes, or null, at s[i] -> row->texts[t]. */
static Py_ssize_t read_text(Schema *sc, int t, const uchar *s, Py_ssize_t i, Py_ssize_t n, Row *row) {
    int escaped;
    if (i < n && s[i] == 'n') {
        Py_CLEAR(row->texts[t]);
        return literal(s, i, n, "null");
    }
    if (i >= n || s[i] != '"')
        return HAND_BACK;
    Py_ssize_t stop = string_end(s, i, n, &escaped);
    if (stop < 0 || escaped)
        return HAND_BACK;
    const char *raw = (const char *)s + i + 1;
    Py_ssize_t raw_len = stop - i - 2;
    PyObject *text;
    if (sc->last_obj[t] != NULL && sc->last_len[t] == raw_len && memcmp(sc->last_raw[t], raw, (size_t)raw_len) == 0) {
        text = Py_NewRef(sc->last_obj[t]);
    } else {
        text = PyUnicode_DecodeUTF8(raw, raw_len, "strict"); /* valid: string_end checked it */
        if (text == NULL)
            return FAILED;
        if (raw_len <= CACHE_BYTES) {
            Py_XSETREF(sc->last_obj[t], Py_NewRef(text));
            memcpy(sc->last_raw[t], raw, (size_t)raw_len);
            sc->last_len[t] = raw_len;
        }
    }
    Py_XSETREF(row->texts[t], text);
    return stop;
}

/* An integer literal (no fraction, no exponent) <= max_schema at s[i]. */
static Py_ssize_t read_schema(const Schema *sc, const uchar *s, Py_ssize_t i, Py_ssize_t n) {
    double v;
    Py_ssize_t stop = read_json_number(s, i, n, &v);
    for (Py_ssize_t k = i; k < stop; k++)
        if (s[k] == '.' || s[k] == 'e' || s[k] == 'E')
            return HAND_BACK;
    return stop < 0 || v <= (double)sc->max_schema ? stop : HAND_BACK;
}

/* The object of extra keys (or any other value: no extra keys) at s[i] -> row->extras. */
static Py_ssize_t read_extra(const Schema *sc, const uchar *s, Py_ssize_t i, Py_ssize_t n, Row *row) {
    int escaped, null;
    for (int k = 0; k < sc->extra.n; k++)
        row->extras[k] = Py_NAN;
    if (i >= n || s[i] != '{')
        return skip_value(s, i, n, 1);
    i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == '}')
        return i + 1;
    for (;;) {
        if (i >= n || s[i] != '"')
            return HAND_BACK;
        Py_ssize_t key_end = string_end(s, i, n, &escaped);
        if (key_end < 0 || escaped)
            return HAND_BACK;
        int k = lookup(&sc->extra, s + i + 1, key_end - i - 2);
        double *fact = k >= 0 ? &row->extras[sc->extra.cols[k].column] : NULL;
        i = skip_ws(s, key_end, n);
        if (i >= n || s[i] != ':')
            return HAND_BACK;
        i = skip_ws(s, i + 1, n);
        if (fact && i < n && (s[i] == '-' || is_digit(s[i]) || s[i] == 't' || s[i] == 'f' || s[i] == 'n')) {
            i = read_number(s, i, n, fact, &null);
            if (null)
                *fact = Py_NAN;
        } else {
            if (fact)
                *fact = Py_NAN; /* a text, a list, an object: not a number */
            i = skip_value(s, i, n, 2);
        }
        if (i < 0)
            return i;
        i = skip_ws(s, i, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
        } else {
            return i < n && s[i] == '}' ? i + 1 : HAND_BACK;
        }
    }
}

static Py_ssize_t read_column(Schema *sc, int k, const uchar *s, Py_ssize_t i, Py_ssize_t n, Buf *flat, Row *row) {
    const Column *col = &sc->cols.cols[k];
    double v;
    int null;
    row->seen[k] = 1;
    switch (col->kind) {
    case KIND_NUMBER:
    case KIND_FLAG:
        i = read_number(s, i, n, &v, &null);
        if (i >= 0 && col->kind == KIND_FLAG)
            row->nums[col->column] = null ? 0.0 : (double)(v != 0.0);
        else if (i >= 0)
            row->nums[col->column] = null ? Py_NAN : v;
        return i;
    case KIND_TEXT:
        return read_text(sc, col->column, s, i, n, row);
    case KIND_OFFSETS:
        return read_offsets(s, i, n, flat, row);
    case KIND_SCHEMA:
        return read_schema(sc, s, i, n);
    default:
        return read_extra(sc, s, i, n, row);
    }
}

/* Read the line s[0:n] into row (and its offsets into flat): 0 read, 1 handed back, -1 on a Python
 * error. On 1 the row's texts are cleared and its offsets dropped. */
static int read_line(Schema *sc, const uchar *s, Py_ssize_t n, Buf *flat, Row *row) {
    int escaped;
    memset(row->seen, 0, sizeof row->seen);
    row->count = 0;
    row->flat_start = flat->len;
    for (int k = 0; k < sc->extra.n; k++)
        row->extras[k] = Py_NAN;
    Py_ssize_t i = skip_ws(s, 0, n);
    if (i >= n || s[i] != '{')
        goto hand_back;
    i = skip_ws(s, i + 1, n);
    for (;;) {
        if (i >= n || s[i] != '"')
            goto hand_back;
        Py_ssize_t key_end = string_end(s, i, n, &escaped);
        if (key_end < 0 || escaped) /* an escaped key might spell a column's name */
            goto hand_back;
        int k = lookup(&sc->cols, s + i + 1, key_end - i - 2);
        i = skip_ws(s, key_end, n);
        if (i >= n || s[i] != ':')
            goto hand_back;
        i = skip_ws(s, i + 1, n);
        i = k >= 0 ? read_column(sc, k, s, i, n, flat, row) : skip_value(s, i, n, 1);
        if (i == FAILED)
            return -1;
        if (i < 0)
            goto hand_back;
        i = skip_ws(s, i, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
            continue;
        }
        if (i < n && s[i] == '}')
            break;
        goto hand_back;
    }
    if (skip_ws(s, i + 1, n) != n)
        goto hand_back;
    for (int k = 0; k < sc->cols.n; k++) {
        const Column *col = &sc->cols.cols[k];
        if (col->kind > KIND_TEXT || row->seen[k])
            continue;
        if (!col->optional)
            goto hand_back; /* a column missing: the fallback and the record checks decide */
        if (col->kind != KIND_TEXT) /* (a missing text stays NULL: None) */
            row->nums[col->column] = col->kind == KIND_FLAG ? 0.0 : Py_NAN; /* as the fallback reads null */
    }
    return 0;
hand_back:
    flat->len = row->flat_start;
    for (int t = 0; t < sc->n_texts; t++)
        Py_CLEAR(row->texts[t]);
    return 1;
}

/* (name bytes, kind) pairs (or plain names: kind 0) -> names, each column numbered among its kind */
static int names_from(PyObject *pairs, Names *names, int with_kind, int counts[KIND_EXTRA + 1]) {
    if (!PyTuple_Check(pairs) || PyTuple_GET_SIZE(pairs) > MAX_COLUMNS) {
        PyErr_SetString(PyExc_TypeError, "columns: a tuple of at most 32 (name bytes, kind) pairs / names");
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(pairs); k++) {
        Column col = {NULL, 0, KIND_NUMBER, 0, 0};
        PyObject *item = PyTuple_GET_ITEM(pairs, k);
        if (with_kind ? !PyArg_ParseTuple(item, "y#i", &col.name, &col.len, &col.kind)
                      : !PyArg_Parse(item, "y#", &col.name, &col.len))
            return -1;
        if (col.kind == (KIND_NUMBER | OPTIONAL) || col.kind == (KIND_FLAG | OPTIONAL)
            || col.kind == (KIND_TEXT | OPTIONAL)) {
            col.kind &= ~OPTIONAL;
            col.optional = 1;
        }
        if (col.kind < KIND_NUMBER || col.kind > KIND_EXTRA || col.len > MAX_KEY) {
            PyErr_SetString(PyExc_ValueError, "a column's kind is 0 (number) to 5 (extra), a number, flag or "
                                              "text + 8 when optional; its name at most 64 bytes");
            return -1;
        }
        col.column = counts[col.kind == KIND_FLAG ? KIND_NUMBER : col.kind]++;
        int j = names->n++;
        for (; j > 0 && names->cols[j - 1].len > col.len; j--) /* insertion sort by length */
            names->cols[j] = names->cols[j - 1];
        names->cols[j] = col;
    }
    for (int len = 0, k = 0; len <= MAX_KEY + 1; len++) {
        while (k < names->n && names->cols[k].len < len)
            k++;
        names->first[len] = (uchar)k;
    }
    return 0;
}

static int schema_from(PyObject *columns, PyObject *extra_keys, long long max_schema, Schema *sc) {
    int counts[KIND_EXTRA + 1] = {0}, extra_counts[KIND_EXTRA + 1] = {0};
    sc->max_schema = max_schema;
    if (names_from(columns, &sc->cols, 1, counts) < 0 || names_from(extra_keys, &sc->extra, 0, extra_counts) < 0)
        return -1;
    sc->n_numbers = counts[KIND_NUMBER];
    sc->n_texts = counts[KIND_TEXT];
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer block;
    long long position, max_schema;
    PyObject *columns, *extra_keys;
    if (!PyArg_ParseTuple(args, "y*LOOL:scan", &block, &position, &columns, &extra_keys, &max_schema))
        return NULL;
    Schema *sc = PyMem_Calloc(1, sizeof *sc);
    Row *row = PyMem_Calloc(1, sizeof *row);
    Buf read = {0}, back = {0}, starts = {0}, lens = {0}, flat = {0}, nums = {0}, extras = {0};
    PyObject *texts = NULL, *result = NULL;
    if (sc == NULL || row == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (schema_from(columns, extra_keys, max_schema, sc) < 0 || (texts = PyTuple_New(sc->n_texts)) == NULL)
        goto done;
    for (int t = 0; t < sc->n_texts; t++) {
        PyObject *list = PyList_New(0);
        if (list == NULL)
            goto done;
        PyTuple_SET_ITEM(texts, t, list);
    }
    const uchar *base = block.buf;
    Py_ssize_t total = block.len, pos = 0, index = 0;
    while (pos < total) {
        const uchar *nl = memchr(base + pos, '\n', (size_t)(total - pos));
        Py_ssize_t n = nl ? (Py_ssize_t)(nl - base) - pos + 1 : total - pos;
        const uchar *line = base + pos;
        if (buf_i64(&starts, position + pos) < 0)
            goto done;
        int rc = read_line(sc, line, n, &flat, row);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            if (buf_put(&nums, row->nums, (Py_ssize_t)sizeof(double) * sc->n_numbers) < 0 ||
                buf_put(&extras, row->extras, (Py_ssize_t)sizeof(double) * sc->extra.n) < 0 ||
                buf_i64(&read, index) < 0 || buf_i64(&lens, row->count) < 0)
                goto done;
            for (int t = 0; t < sc->n_texts; t++) {
                int failed = PyList_Append(PyTuple_GET_ITEM(texts, t), row->texts[t] ? row->texts[t] : Py_None);
                Py_CLEAR(row->texts[t]);
                if (failed < 0)
                    goto done;
            }
        } else {
            Py_ssize_t k = 0;
            while (k < n && is_space(line[k]))
                k++;
            if (k < n && buf_i64(&back, index) < 0)
                goto done;
        }
        pos += n;
        index++;
    }
    if (buf_i64(&starts, position + pos) < 0)
        goto done;
    result = Py_BuildValue("(NONNNNNN)", buf_bytes(&nums), texts, buf_bytes(&extras), buf_bytes(&read),
                           buf_bytes(&back), buf_bytes(&starts), buf_bytes(&lens), buf_bytes(&flat));
done:
    if (row != NULL)
        for (int t = 0; t < MAX_COLUMNS; t++)
            Py_CLEAR(row->texts[t]);
    if (sc != NULL)
        for (int t = 0; t < MAX_COLUMNS; t++)
            Py_CLEAR(sc->last_obj[t]);
    Py_XDECREF(texts);
    PyMem_Free(sc);
    PyMem_Free(row);
    PyBuffer_Release(&block);
    Buf *bufs[] = {&read, &back, &starts, &lens, &flat, &nums, &extras};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        PyMem_Free(bufs[k]->data);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Read the lines of a records.jsonl block into columns (see the source)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records_scan",
                                    "The fast path of fourfold.reports.recordlines, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__records_scan(void) { return PyModule_Create(&module); }
