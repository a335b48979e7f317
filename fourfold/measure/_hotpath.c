/* The per-token steps of fourfold.measure that run once per received body, in C.
 *
 * Optional: setup.py builds it where a C compiler is found; without it the pure-Python code these
 * functions mirror runs (same results, slower). tests/unit/test_hotpath.py holds each function
 * against that Python code.
 *
 * scan_events(body, chunk_lengths, prefix, suffix, limit)
 *     The loop of JsonEventParser.feed_chunks (fourfold.measure.dialects.jsonevents) over a whole
 *     SSE body that ends with "\n\n" and holds no "\r" and no byte-order mark (the caller checks).
 *     The body is split at every "\n\n" (as bytes.split does; the part after the last one is
 *     dropped). A part that starts with ``prefix``, ends with ``suffix`` and holds a plain JSON
 *     string between them ("..." without '"', '\\' or a control character; the part at most
 *     ``limit`` bytes) is a plain content delta: its text, strictly UTF-8 decoded, is appended to
 *     ``texts`` when not empty and credited to the chunk holding the part's closing blank line.
 *     Any other part must be one "data:" line (no "\n", at most ``limit`` bytes): its payload
 *     (after "data:" and one optional space) becomes an entry of ``others``:
 *     (texts before it, chunk index, payload bytes, payload starts with "{").
 *     Returns (texts, per_chunk, others, plain_parts), or None when the body does not fit the fast
 *     path (a part of another shape, invalid UTF-8 in a plain delta); nothing else is raised
 *     for any body.
 *
 * recv_stamped(fd, offset_ns)
 *     Reader.on_ready's read (fourfold.measure.reactor): one recvmsg with the kernel's receive
 *     stamp, without the ancillary-data tuples Python's socket.recvmsg builds (see below).
 *
 * offsets_ms(times, counts, t0)
 *     [round((t - t0) / 1e6, 3) for t, n in zip(times, counts) if n]: each chunk's offset in ms
 *     from the request's start, rounded as Python's round(x, 3) rounds (the shortest correctly
 *     rounded decimal with 3 digits, read back as a double: PyOS_double_to_string's 'f' format
 *     and PyOS_string_to_double are the two halves of float.__round__).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef unsigned char uchar;

static int
plain_literal(const uchar *s, Py_ssize_t n)
{
    if (n < 2 || s[0] != '"' || s[n - 1] != '"')
        return 0;
    for (Py_ssize_t i = 1; i < n - 1; i++) {
        uchar c = s[i];
        if (c == '"' || c == '\\' || c < 0x20)
            return 0;
    }
    return 1;
}

static PyObject *
scan_events(PyObject *self, PyObject *args)
{
    Py_buffer body, prefix, suffix;
    PyObject *lengths;
    Py_ssize_t limit;
    PyObject *texts = NULL, *per_chunk = NULL, *others = NULL, *result = NULL;
    Py_ssize_t *chunk_ends = NULL;
    if (!PyArg_ParseTuple(args, "y*O!y*y*n", &body, &PyList_Type, &lengths, &prefix, &suffix, &limit))
        return NULL;
    const uchar *b = body.buf, *pre = prefix.buf, *suf = suffix.buf;
    Py_ssize_t blen = body.len, plen = prefix.len, slen = suffix.len;
    Py_ssize_t nchunks = PyList_GET_SIZE(lengths);
    Py_ssize_t plain_parts = 0, chunk = 0, pos = 0;

    chunk_ends = PyMem_Malloc(sizeof(Py_ssize_t) * (nchunks > 0 ? nchunks : 1));
    texts = PyList_New(0);
    per_chunk = PyList_New(nchunks);
    others = PyList_New(0);
    if (chunk_ends == NULL || texts == NULL || per_chunk == NULL || others == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    Py_ssize_t total = 0;
    long *counts = PyMem_Calloc(nchunks > 0 ? nchunks : 1, sizeof(long));
    if (counts == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < nchunks; i++) {
        Py_ssize_t n = PyLong_AsSsize_t(PyList_GET_ITEM(lengths, i));
        if (n < 0 && PyErr_Occurred()) {
            PyMem_Free(counts);
            goto error;
        }
        total += n;
        chunk_ends[i] = total;
    }
    while (pos < blen) {
        const uchar *found = NULL;
        for (const uchar *p = b + pos; p + 1 < b + blen; p++) {
            p = memchr(p, '\n', (size_t)(b + blen - p - 1));
            if (p == NULL)
                break;
            if (p[1] == '\n') {
                found = p;
                break;
            }
        }
        if (found == NULL)
            break;                                   /* the rest is the dropped last part */
        const uchar *part = b + pos;
        Py_ssize_t n = found - part;
        Py_ssize_t end = (found - b) + 2;            /* just past the part's closing blank line */
        pos = end;
        while (chunk < nchunks - 1 && chunk_ends[chunk] < end)
            chunk++;
        if (n >= plen && memcmp(part, pre, (size_t)plen) == 0 && n >= slen
                && memcmp(part + n - slen, suf, (size_t)slen) == 0) {
            Py_ssize_t start = plen, stop = n - slen;
            if (stop >= start && plain_literal(part + start, stop - start) && n <= limit) {
                plain_parts++;
                if (stop - start > 2) {
                    PyObject *text = PyUnicode_DecodeUTF8((const char *)part + start + 1, stop - start - 2, NULL);
                    if (text == NULL) {
                        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                            PyMem_Free(counts);
                            goto error;
                        }
                        PyErr_Clear();
                        PyMem_Free(counts);
                        goto none;
                    }
                    int failed = PyList_Append(texts, text);
                    Py_DECREF(text);
                    if (failed) {
                        PyMem_Free(counts);
                        goto error;
                    }
                    counts[chunk]++;
                }
                continue;
            }
        }
        if (n < 5 || memcmp(part, "data:", 5) != 0 || memchr(part, '\n', (size_t)n) != NULL || n > limit) {
            PyMem_Free(counts);
            goto none;
        }
        Py_ssize_t skip = (n > 5 && part[5] == ' ') ? 6 : 5;
        PyObject *entry = Py_BuildValue("(nny#O)", PyList_GET_SIZE(texts), chunk, (const char *)part + skip,
                                        n - skip, (n > skip && part[skip] == '{') ? Py_True : Py_False);
        if (entry == NULL || PyList_Append(others, entry)) {
            Py_XDECREF(entry);
            PyMem_Free(counts);
            goto error;
        }
        Py_DECREF(entry);
    }
    for (Py_ssize_t i = 0; i < nchunks; i++) {
        PyObject *count = PyLong_FromLong(counts[i]);
        if (count == NULL) {
            PyMem_Free(counts);
            goto error;
        }
        PyList_SET_ITEM(per_chunk, i, count);
    }
    PyMem_Free(counts);
    result = Py_BuildValue("(OOOn)", texts, per_chunk, others, plain_parts);
    goto error;   /* the common cleanup */
none:
    result = Py_NewRef(Py_None);
error:
    PyMem_Free(chunk_ends);
    Py_XDECREF(texts);
    Py_XDECREF(per_chunk);
    Py_XDECREF(others);
    PyBuffer_Release(&body);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&suffix);
    return result;
}

static PyObject *
offsets_ms(PyObject *self, PyObject *args)
{
    PyObject *times, *counts, *t0_obj;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyList_Type, &times, &PyList_Type, &counts, &t0_obj))
        return NULL;
    long long t0 = PyLong_AsLongLong(t0_obj);
    if (t0 == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(times);
    if (PyList_GET_SIZE(counts) < n)
        n = PyList_GET_SIZE(counts);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int nonzero = PyObject_IsTrue(PyList_GET_ITEM(counts, i));
        if (nonzero < 0)
            goto error;
        if (!nonzero)
            continue;
        long long t = PyLong_AsLongLong(PyList_GET_ITEM(times, i));
        if (t == -1 && PyErr_Occurred())
            goto error;
        long long d = t - t0;
        double x;
        if (d > (1LL << 53) || d < -(1LL << 53)) {   /* int / float as Python divides a large int */
            PyObject *big = PyLong_FromLongLong(d);
            if (big == NULL)
                goto error;
            x = PyLong_AsDouble(big) / 1e6;
            Py_DECREF(big);
        }
        else {
            x = (double)d / 1e6;
        }
        PyObject *value;
        if (Py_IS_FINITE(x)) {
            char *text = PyOS_double_to_string(x, 'f', 3, 0, NULL);
            if (text == NULL)
                goto error;
            double rounded = PyOS_string_to_double(text, NULL, NULL);
            PyMem_Free(text);
            if (rounded == -1.0 && PyErr_Occurred())
                goto error;
            value = PyFloat_FromDouble(rounded);
        }
        else {
            value = PyFloat_FromDouble(x);
        }
        if (value == NULL || PyList_Append(out, value)) {
            Py_XDECREF(value);
            goto error;
        }
        Py_DECREF(value);
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

/* recv_stamped(fd, offset_ns) -> (t, data, now) | None
 *
 * Reader.on_ready's read (fourfold.measure.reactor): one non-blocking recvmsg of up to 64 KiB on
 * ``fd`` with the kernel's SO_TIMESTAMPNS stamp. ``now`` is perf_counter_ns() after the read
 * (CLOCK_MONOTONIC, as Python's perf_counter on Linux); ``t`` is the stamp (CLOCK_REALTIME) +
 * ``offset_ns`` when that lies in (0, now), else ``now``. ``data`` is the bytes (b"" at EOF) or,
 * when the read failed, the OSError instance Python's recvmsg would have raised. None when
 * nothing was there (EAGAIN) or a signal interrupted the call: the caller reads again later. */
#if defined(__linux__) && defined(SCM_TIMESTAMPNS)
static PyObject *
recv_stamped(PyObject *self, PyObject *args)
{
    int fd;
    long long offset;
    static char data[65536];
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    if (!PyArg_ParseTuple(args, "iL", &fd, &offset))
        return NULL;
    struct iovec iov = {data, sizeof(data)};
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);    /* never blocks: the GIL is kept (one buffer) */
    int error = n < 0 ? errno : 0;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    long long now = (long long)mono.tv_sec * 1000000000LL + mono.tv_nsec;
    if (n < 0) {
        if (error == EAGAIN || error == EWOULDBLOCK || error == EINTR)
            Py_RETURN_NONE;
        PyObject *exc = PyObject_CallFunction(PyExc_OSError, "is", error, strerror(error));
        if (exc == NULL)
            return NULL;
        PyObject *out = Py_BuildValue("(LNL)", now, exc, now);
        return out;
    }
    long long t = now;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS
                && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec stamp;
            memcpy(&stamp, CMSG_DATA(c), sizeof(stamp));
            long long kernel = (long long)stamp.tv_sec * 1000000000LL + stamp.tv_nsec + offset;
            if (0 < kernel && kernel < t)
                t = kernel;
        }
    }
    return Py_BuildValue("(Ly#L)", t, data, (Py_ssize_t)n, now);
}
#define HAVE_RECV_STAMPED 1
#endif

static PyMethodDef methods[] = {
#ifdef HAVE_RECV_STAMPED
    {"recv_stamped", recv_stamped, METH_VARARGS, "One non-blocking kernel-stamped read (see the comment above)."},
#endif
    {"scan_events", scan_events, METH_VARARGS, "The plain-delta scan of a whole SSE body (see the module comment)."},
    {"offsets_ms", offsets_ms, METH_VARARGS, "[round((t - t0) / 1e6, 3) for t, n in zip(times, counts) if n]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hotpath", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__hotpath(void)
{
    return PyModule_Create(&module);
}
