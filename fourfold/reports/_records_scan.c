/* The per-line part of reports.records' fast path, compiled (see reports/records.py).
 *
 * scan(block, start, columns, tail, no_extra_tail, cut_key, offsets_key, text_key, text_end, mark1, mark2)
 *
 * ``block`` holds whole lines of a records.jsonl (each with its "\n", except perhaps the file's
 * last one), ``start`` is its position in the file. Every line is classified exactly as the
 * pure-Python ``_process_lines`` does:
 *
 *   fast  it ends with ``tail``; ``cut_key`` is found (searching from the end) at cut > 0; the
 *         line ends with ``no_extra_tail`` or neither mark occurs after ``cut``; the offsets key,
 *         the closing "]", the text key and the text end are found in that order before ``cut``;
 *         and every chunk offset between the brackets is a JSON number;
 *   slow  any other line that is not blank (Python's ``bytes.strip()``).
 *
 * Of a fast line's cut-down form (line[:a] + line[b+1:t] + line[e+1:cut] + "}": the top-level
 * scalars) the ``columns`` ((name bytes, kind) pairs; kind 0 number, 1 flag, 2 text) are read
 * straight into a row: a number as float() reads it (null: NaN; true/false: 1/0), a flag as 0/1
 * (null: 0), a text as str (null: None). When a line's scalars cannot be read that plainly (an
 * escape in a text it keeps, a value of another type, a key missing, anything not JSON), its row
 * is left NaN/None and its cut-down line is handed back for a real JSON decoder ("undecided").
 *
 * Returns (nums, texts, undecided, joined, part_ends, fast_lines, slow_lines, line_starts, lens, flat):
 *   nums         float64: a row of the number and flag columns per fast line
 *   texts        a tuple with, per text column, a list of str/None (one per fast line)
 *   undecided    int64: the fast lines (counted among the fast lines) handed back
 *   joined       "[" + their cut-down lines, "," between them + "]" (one JSON array)
 *   part_ends    int64: where each cut-down line ends in ``joined`` (its "}" included)
 *   fast_lines   int64: the index of each fast line in the block
 *   slow_lines   int64: the index of each slow line
 *   line_starts  int64: the file position of every line, and of the block's end (n + 1 values)
 *   lens         int64: the number of chunk offsets of each fast line
 *   flat         float64: all chunk offsets of the fast lines, in order
 * (the arrays as bytes in native byte order, for numpy.frombuffer).
 *
 * A number is parsed exactly as float() would: when its digits, read as an integer m, are at most
 * 2^53 and it has at most 22 decimals, it is m / 10^k, one correctly rounded division of two
 * exact doubles (the Clinger fast path); any other JSON number goes through
 * PyOS_string_to_double; what is not a JSON number (or overflows) makes its line slow/undecided.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

/* Clip [*start, *end) to s[0:n] as bytes.find does; 0 when a needle of m bytes cannot fit. */
static int clip(Py_ssize_t n, Py_ssize_t m, Py_ssize_t *start, Py_ssize_t *end) {
    if (*end > n)
        *end = n;
    if (*start < 0)
        *start = 0;
    return *end - *start >= m;
}

/* bytes.find(sub, start, end) on s[0:n]: the first position p with start <= p and p + m <= end */
static Py_ssize_t find(const char *s, Py_ssize_t n, const char *sub, Py_ssize_t m, Py_ssize_t start,
                       Py_ssize_t end) {
    if (!clip(n, m, &start, &end))
        return -1;
    if (m == 0)
        return start;
    const char *hit = memmem(s + start, (size_t)(end - start), sub, (size_t)m);
    return hit ? (Py_ssize_t)(hit - s) : -1;
}

/* bytes.rfind(sub, start, end): the last such position */
static Py_ssize_t rfind(const char *s, Py_ssize_t n, const char *sub, Py_ssize_t m, Py_ssize_t start,
                        Py_ssize_t end) {
    if (!clip(n, m, &start, &end))
        return -1;
    if (m == 0)
        return end;
    for (Py_ssize_t p = end - m; p >= start; p--) {
        if (s[p] == sub[0] && memcmp(s + p, sub, (size_t)m) == 0)
            return p;
    }
    return -1;
}

static int ends_with(const char *s, Py_ssize_t n, const char *t, Py_ssize_t m) {
    return n >= m && memcmp(s + n - m, t, (size_t)m) == 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c'; }

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* s[0:n] follows JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n)
        return 0;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && (unsigned)(s[i] - '0') < 10)
            i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        Py_ssize_t first = ++i;
        while (i < n && (unsigned)(s[i] - '0') < 10)
            i++;
        if (i == first)
            return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        Py_ssize_t first = i;
        while (i < n && (unsigned)(s[i] - '0') < 10)
            i++;
        if (i == first)
            return 0;
    }
    return i == n;
}

/* One JSON number s[0:n] -> *out as float() gives it; 0 on success, 1 when it is not a JSON
 * number (or overflows to infinity), -1 with an exception set (memory). */
static int parse_number(const char *s, Py_ssize_t n, double *out) {
    Py_ssize_t i = 0;
    int neg = 0;
    if (n <= 0)
        return 1;
    if (s[0] == '-') {
        neg = 1;
        i = 1;
    }
    uint64_t m = 0;
    Py_ssize_t int_start = i, frac_start, int_digits, decimals = 0;
    while (i < n && (unsigned)(s[i] - '0') < 10)
        m = m * 10 + (uint64_t)(s[i++] - '0');
    int_digits = i - int_start;
    if (i < n && s[i] == '.') {
        frac_start = ++i;
        while (i < n && (unsigned)(s[i] - '0') < 10)
            m = m * 10 + (uint64_t)(s[i++] - '0');
        decimals = i - frac_start;
        if (decimals == 0)
            int_digits = 0; /* "1." is not JSON: let the slow parser decide */
    }
    /* at most 19 digits cannot overflow m; m <= 2^53 and 10^decimals are exact doubles */
    if (i == n && int_digits > 0 && int_digits + decimals <= 19 && decimals <= 22 && m <= (1ULL << 53) &&
        (s[neg] != '0' || int_digits == 1)) {
        double v = (double)m / POW10[decimals];
        *out = neg ? -v : v;
        return 0;
    }
    /* exponent, too many digits, or not a number at all */
    if (!is_json_number(s, n))
        return 1;
    char small[64];
    char *text = small;
    if (n >= (Py_ssize_t)sizeof small) {
        text = PyMem_Malloc((size_t)n + 1);
        if (text == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    memcpy(text, s, (size_t)n);
    text[n] = '\0';
    char *end = NULL;
    double v = PyOS_string_to_double(text, &end, NULL);
    int bad = (v == -1.0 && PyErr_Occurred()) || end != text + n;
    if (text != small)
        PyMem_Free(text);
    if (bad) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                return -1;
            PyErr_Clear();
        }
        return 1;
    }
    /* JSON has no inf/nan literals spelled the way strtod takes them */
    if (!(v == v) || (v == v * 2.0 && v != 0.0))
        return 1;
    *out = v;
    return 0;
}

/* The offsets s[0:n] (the text between the brackets) appended to flat; their number or -1 when
 * one is not a number, -2 with an exception set. */
static Py_ssize_t parse_offsets(const char *s, Py_ssize_t n, Buf *flat) {
    if (n == 0)
        return 0;
    Py_ssize_t count = 0, start = 0;
    for (;;) {
        const char *comma = memchr(s + start, ',', (size_t)(n - start));
        Py_ssize_t stop = comma ? (Py_ssize_t)(comma - s) : n;
        double v;
        int rc = parse_number(s + start, stop - start, &v);
        if (rc < 0)
            return -2;
        if (rc > 0)
            return -1;
        if (buf_put(flat, &v, sizeof v) < 0)
            return -2;
        count++;
        if (!comma)
            return count;
        start = stop + 1;
    }
}


/* ---- the scalars of a cut-down line ---------------------------------------------------------- */

enum { KIND_NUMBER = 0, KIND_FLAG = 1, KIND_TEXT = 2 };
#define MAX_COLUMNS 32
#define CACHE_BYTES 128

typedef struct {
    const char *name;
    Py_ssize_t len;
    int kind, column;  /* column: its index among the numbers (numbers and flags) or the texts */
} Column;

typedef struct {
    Column cols[MAX_COLUMNS];
    int n, n_numbers, n_texts;
    /* per text column: the last raw value seen (when short) and its str: most lines repeat it */
    char last_raw[MAX_COLUMNS][CACHE_BYTES];
    Py_ssize_t last_len[MAX_COLUMNS];
    PyObject *last_obj[MAX_COLUMNS];
} Schema;

static Py_ssize_t skip_ws(const char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* A JSON string starting at s[i] == '"': the index after its closing quote, or -1 when it is not
 * a plain string (no closing quote, a control character). *special: 1 when it holds a backslash,
 * 2 when a byte above 0x7f (either one needs a real decoder to be checked), else 0. */
static Py_ssize_t end_of_string(const char *s, Py_ssize_t i, Py_ssize_t n, int *special) {
    *special = 0;
    for (i++; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"')
            return i + 1;
        if (c == '\\') {
            *special |= 1;
            i++;
        } else if (c < 0x20) {
            return -1;
        } else if (c > 0x7f) {
            *special |= 2;
        }
    }
    return -1;
}

/* Walk the JSON object s[0:n] (top-level scalars only). Fills nums (NaN for null; a flag is 0 or
 * 1: null and 0 are 0) and texts (new references, or NULL for null).
 * Returns 0 when every value was read, 1 when the line must be decoded by a real JSON parser
 * (an escape in a text we keep, a nested value, anything unexpected), -1 on a Python error. */
static int walk(Schema *sc, const char *s, Py_ssize_t n, double *nums, PyObject **texts) {
    unsigned char seen[MAX_COLUMNS] = {0};
    Py_ssize_t i = skip_ws(s, 0, n);
    if (i >= n || s[i] != '{')
        return 1;
    i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == '}') {
        i++;
        goto end;
    }
    for (;;) {
        int special;
        if (i >= n || s[i] != '"')
            return 1;
        Py_ssize_t key_end = end_of_string(s, i, n, &special);
        if (key_end < 0 || special)  /* an escape or non-ASCII in a key: the real decoder checks it */
            return 1;
        const char *key = s + i + 1;
        Py_ssize_t key_len = key_end - i - 2;
        i = skip_ws(s, key_end, n);
        if (i >= n || s[i] != ':')
            return 1;
        i = skip_ws(s, i + 1, n);
        if (i >= n)
            return 1;
        const Column *col = NULL;
        for (int k = 0; k < sc->n; k++) {
            if (sc->cols[k].len == key_len && memcmp(sc->cols[k].name, key, (size_t)key_len) == 0) {
                col = &sc->cols[k];
                seen[k] = 1;
                break;
            }
        }
        char c = s[i];
        Py_ssize_t stop;
        if (c == '"') {
            stop = end_of_string(s, i, n, &special);
            if (stop < 0)
                return 1;
            if (col == NULL && special)  /* a text not kept: its escapes / UTF-8 are checked by the real decoder */
                return 1;
            if (col != NULL) {
                if (col->kind != KIND_TEXT || (special & 1))  /* non-ASCII alone: the strict decode below checks it */
                    return 1;
                int t = col->column;
                const char *raw = s + i + 1;
                Py_ssize_t raw_len = stop - i - 2;
                PyObject *text;
                if (sc->last_obj[t] != NULL && sc->last_len[t] == raw_len &&
                    memcmp(sc->last_raw[t], raw, (size_t)raw_len) == 0) {
                    text = sc->last_obj[t];
                    Py_INCREF(text);
                } else {
                    text = PyUnicode_DecodeUTF8(raw, raw_len, "strict");
                    if (text == NULL) {
                        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                            return -1;
                        PyErr_Clear();
                        return 1;
                    }
                    if (raw_len <= CACHE_BYTES) {
                        Py_XSETREF(sc->last_obj[t], Py_NewRef(text));
                        memcpy(sc->last_raw[t], raw, (size_t)raw_len);
                        sc->last_len[t] = raw_len;
                    }
                }
                Py_XSETREF(texts[t], text);
            }
        } else if (c == 't' || c == 'f' || c == 'n') {
            const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
            Py_ssize_t len = (Py_ssize_t)strlen(word);
            if (n - i < len || memcmp(s + i, word, (size_t)len) != 0)
                return 1;
            stop = i + len;
            if (col != NULL) {
                if (col->kind == KIND_TEXT) {
                    if (c != 'n')
                        return 1;
                    Py_CLEAR(texts[col->column]);
                } else if (c == 'n') {
                    nums[col->column] = col->kind == KIND_FLAG ? 0.0 : Py_NAN;
                } else {
                    nums[col->column] = c == 't' ? 1.0 : 0.0;
                }
            }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            stop = i;
            while (stop < n && ((s[stop] >= '0' && s[stop] <= '9') || s[stop] == '.' || s[stop] == '-' ||
                                s[stop] == '+' || s[stop] == 'e' || s[stop] == 'E'))
                stop++;
            double v;
            int rc = parse_number(s + i, stop - i, &v);
            if (rc != 0)
                return rc < 0 ? -1 : 1;
            if (col != NULL) {
                if (col->kind == KIND_TEXT)
                    return 1;
                nums[col->column] = col->kind == KIND_FLAG ? (double)(v != 0.0) : v;
            }
        } else {
            return 1; /* a nested object or array: the slow way */
        }
        i = skip_ws(s, stop, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
            continue;
        }
        if (i < n && s[i] == '}') {
            i++;
            break;
        }
        return 1;
    }
end:
    i = skip_ws(s, i, n);
    if (i != n)
        return 1;
    for (int k = 0; k < sc->n; k++)
        if (!seen[k])
            return 1; /* a key missing: the real decoder and the record checks decide */
    return 0;
}

typedef struct {
    const char *data;
    Py_ssize_t len;
} Key;

static int schema_from(PyObject *columns, Schema *sc) {
    memset(sc, 0, sizeof *sc);
    if (!PyTuple_Check(columns) || PyTuple_GET_SIZE(columns) > MAX_COLUMNS) {
        PyErr_SetString(PyExc_TypeError, "columns: a tuple of (name bytes, kind) pairs, at most 32");
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(columns); k++) {
        const char *name;
        Py_ssize_t len;
        int kind;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(columns, k), "y#i", &name, &len, &kind))
            return -1;
        if (kind < KIND_NUMBER || kind > KIND_TEXT) {
            PyErr_SetString(PyExc_ValueError, "a column's kind is 0 (number), 1 (flag) or 2 (text)");
            return -1;
        }
        Column *col = &sc->cols[sc->n++];
        col->name = name;
        col->len = len;
        col->kind = kind;
        col->column = kind == KIND_TEXT ? sc->n_texts++ : sc->n_numbers++;
    }
    return 0;
}

static void schema_clear(Schema *sc) {
    for (int k = 0; k < MAX_COLUMNS; k++)
        Py_CLEAR(sc->last_obj[k]);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer block;
    long long position;
    PyObject *columns;
    Key tail, no_extra, cut_key, off_key, text_key, text_end, mark1, mark2;
    if (!PyArg_ParseTuple(args, "y*LOy#y#y#y#y#y#y#y#:scan", &block, &position, &columns, &tail.data,
                          &tail.len, &no_extra.data, &no_extra.len, &cut_key.data, &cut_key.len, &off_key.data,
                          &off_key.len, &text_key.data, &text_key.len, &text_end.data, &text_end.len,
                          &mark1.data, &mark1.len, &mark2.data, &mark2.len))
        return NULL;
    Schema *sc = PyMem_Malloc(sizeof *sc);
    if (sc == NULL) {
        PyBuffer_Release(&block);
        return PyErr_NoMemory();
    }
    Buf joined = {0}, part_ends = {0}, fast = {0}, slow = {0}, starts = {0}, lens = {0}, flat = {0};
    Buf nums = {0}, undecided = {0}, line_buf = {0};
    PyObject *texts = NULL, *result = NULL;
    PyObject *row_texts[MAX_COLUMNS] = {NULL};
    double row_nums[MAX_COLUMNS];
    if (schema_from(columns, sc) < 0) {
        PyMem_Free(sc);
        PyBuffer_Release(&block);
        return NULL;
    }
    texts = PyTuple_New(sc->n_texts);
    if (texts == NULL)
        goto done;
    for (int k = 0; k < sc->n_texts; k++) {
        PyObject *list = PyList_New(0);
        if (list == NULL)
            goto done;
        PyTuple_SET_ITEM(texts, k, list);
    }
    const char *base = block.buf;
    Py_ssize_t total = block.len, pos = 0, index = 0, n_fast = 0;
    if (buf_put(&joined, "[", 1) < 0)
        goto done;
    while (pos < total) {
        const char *nl = memchr(base + pos, '\n', (size_t)(total - pos));
        Py_ssize_t n = nl ? (Py_ssize_t)(nl - base) - pos + 1 : total - pos;
        const char *line = base + pos;
        if (buf_i64(&starts, position + pos) < 0)
            goto done;
        int is_fast = 0;
        if (ends_with(line, n, tail.data, tail.len)) {
            Py_ssize_t cut = rfind(line, n, cut_key.data, cut_key.len, 0, n);
            if (cut > 0 && (ends_with(line, n, no_extra.data, no_extra.len) ||
                            (find(line, n, mark1.data, mark1.len, cut, n) < 0 &&
                             find(line, n, mark2.data, mark2.len, cut, n) < 0))) {
                Py_ssize_t a = find(line, n, off_key.data, off_key.len, 0, cut);
                Py_ssize_t b = a > 0 ? find(line, n, "]", 1, a + off_key.len, n) : -1;
                Py_ssize_t t = b > 0 ? find(line, n, text_key.data, text_key.len, b, cut) : -1;
                Py_ssize_t e = t > 0 ? rfind(line, n, text_end.data, text_end.len, t + text_key.len, cut) : -1;
                if (e > 0) {
                    Py_ssize_t flat_len = flat.len;
                    Py_ssize_t count = parse_offsets(line + a + off_key.len, b - a - off_key.len, &flat);
                    if (count == -2)
                        goto done;
                    if (count >= 0) {
                        /* the cut-down line: line[:a] + line[b+1:t] + line[e+1:cut] + "}" */
                        line_buf.len = 0;
                        if (buf_put(&line_buf, line, a) < 0 || buf_put(&line_buf, line + b + 1, t - b - 1) < 0 ||
                            buf_put(&line_buf, line + e + 1, cut - e - 1) < 0 || buf_put(&line_buf, "}", 1) < 0)
                            goto done;
                        for (int k = 0; k < sc->n_numbers; k++)
                            row_nums[k] = Py_NAN;
                        int rc = walk(sc, line_buf.data, line_buf.len, row_nums, row_texts);
                        if (rc < 0)
                            goto done;
                        if (rc > 0) { /* decoded in Python: its cut-down line goes into joined */
                            for (int k = 0; k < sc->n_numbers; k++)
                                row_nums[k] = Py_NAN;
                            for (int k = 0; k < sc->n_texts; k++)
                                Py_CLEAR(row_texts[k]);
                            if ((joined.len > 1 && buf_put(&joined, ",", 1) < 0) ||
                                buf_put(&joined, line_buf.data, line_buf.len) < 0 ||
                                buf_i64(&part_ends, joined.len) < 0 || buf_i64(&undecided, n_fast) < 0)
                                goto done;
                        }
                        if (buf_put(&nums, row_nums, (Py_ssize_t)sizeof(double) * sc->n_numbers) < 0)
                            goto done;
                        for (int k = 0; k < sc->n_texts; k++) {
                            PyObject *value = row_texts[k] ? row_texts[k] : Py_None;
                            if (PyList_Append(PyTuple_GET_ITEM(texts, k), value) < 0)
                                goto done;
                            Py_CLEAR(row_texts[k]);
                        }
                        if (buf_i64(&fast, index) < 0 || buf_i64(&lens, count) < 0)
                            goto done;
                        n_fast++;
                        is_fast = 1;
                    } else {
                        flat.len = flat_len; /* drop what was parsed of this line */
                    }
                }
            }
        }
        if (!is_fast) {
            Py_ssize_t k = 0;
            while (k < n && is_space(line[k]))
                k++;
            if (k < n && buf_i64(&slow, index) < 0)
                goto done;
        }
        pos += n;
        index++;
    }
    if (buf_i64(&starts, position + pos) < 0 || buf_put(&joined, "]", 1) < 0)
        goto done;
    result = Py_BuildValue("(NONNNNNNNN)", buf_bytes(&nums), texts, buf_bytes(&undecided), buf_bytes(&joined),
                           buf_bytes(&part_ends), buf_bytes(&fast), buf_bytes(&slow), buf_bytes(&starts),
                           buf_bytes(&lens), buf_bytes(&flat));
done:
    for (int k = 0; k < MAX_COLUMNS; k++)
        Py_CLEAR(row_texts[k]);
    Py_XDECREF(texts);
    schema_clear(sc);
    PyMem_Free(sc);
    PyBuffer_Release(&block);
    Buf *bufs[] = {&joined, &part_ends, &fast, &slow, &starts, &lens, &flat, &nums, &undecided, &line_buf};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        PyMem_Free(bufs[k]->data);
    return result;
}

static PyObject *parse_numbers(PyObject *self, PyObject *args) {
    Py_buffer text;
    if (!PyArg_ParseTuple(args, "y*:parse_numbers", &text))
        return NULL;
    Buf flat = {0};
    PyObject *result = NULL;
    Py_ssize_t count = parse_offsets(text.buf, text.len, &flat);
    if (count == -1)
        PyErr_SetString(PyExc_ValueError, "not a comma-separated list of JSON numbers");
    else if (count >= 0)
        result = buf_bytes(&flat);
    PyBuffer_Release(&text);
    PyMem_Free(flat.data);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Classify and cut the lines of a records.jsonl block (see the module source)."},
    {"parse_numbers", parse_numbers, METH_VARARGS,
     "Comma-separated JSON numbers -> float64 bytes, each as float() parses it (ValueError otherwise)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records_scan",
                                    "The compiled per-line part of reports.records' fast path.", -1, methods};

PyMODINIT_FUNC PyInit__records_scan(void) { return PyModule_Create(&module); }
