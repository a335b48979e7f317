/* The per-token steps of fourfold.measure that run once per received body, in C.
 *
 * Optional: setup.py builds it where a C compiler is found; without it the pure-Python code these
 * functions mirror runs (same results, slower). tests/unit/test_hotpath.py holds each function
 * against that Python code.
 *
 * scan_events(body, chunks, prefix, suffix, limit)
 *     The loop of JsonEventParser.feed_chunks (fourfold.client.dialects.jsonevents) over a whole
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
 *     for any body. ``chunks`` are the reads that make up ``body`` (only their lengths count).
 *
 * recv_stamped(fd, offset_ns)
 *     drain's read alone: one recvmsg with the kernel's receive stamp, without the ancillary-data
 *     tuples Python's socket.recvmsg builds (the tests hold it against Reader._read).
 *
 * drain(...), take_chunks(...)
 *     Reactor.drain and the whole-chunk step of RawStream._read_chunked (see each below).
 *
 * offsets_ms(times, counts, t0)
 *     [round((t - t0) / 1e6, 3) for t, n in zip(times, counts) if n]: each chunk's offset in ms
 *     from the request's start, rounded as Python's round(x, 3) rounds (the shortest correctly
 *     rounded decimal with 3 digits, read back as a double: PyOS_double_to_string's 'f' format
 *     and PyOS_string_to_double are the two halves of float.__round__).
 */
#define _GNU_SOURCE               /* memmem */
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
    PyObject *chunks;
    Py_ssize_t limit;
    PyObject *texts = NULL, *per_chunk = NULL, *others = NULL, *result = NULL;
    Py_ssize_t *chunk_ends = NULL;
    if (!PyArg_ParseTuple(args, "y*O!y*y*n", &body, &PyList_Type, &chunks, &prefix, &suffix, &limit))
        return NULL;
    const uchar *b = body.buf, *pre = prefix.buf, *suf = suffix.buf;
    Py_ssize_t blen = body.len, plen = prefix.len, slen = suffix.len;
    Py_ssize_t nchunks = PyList_GET_SIZE(chunks);
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
        if (i >= PyList_GET_SIZE(chunks)) {          /* an item's __len__ emptied the list */
            PyErr_SetString(PyExc_RuntimeError, "scan_events: chunks changed size during the scan");
            PyMem_Free(counts);
            goto error;
        }
        PyObject *item = PyList_GET_ITEM(chunks, i);
        Py_INCREF(item);                              /* held while its __len__ runs */
        Py_ssize_t n = PyObject_Length(item);
        Py_DECREF(item);
        if (n < 0) {
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

/* take_chunks(queue, stamps, times, payloads, nbytes, max_bytes, deadline_ns, watched)
 *     -> (nbytes, content_ns, status)
 *
 * The common step of RawStream._read_chunked (fourfold.client.h1body) over the reactor's queue
 * of (t, data) pairs, while the chunked decoder is between chunks: every queued read that is
 * whole chunks only ("<hex digits>\r\n<payload>\r\n", size > 0, up to 256 of them) is taken:
 * popped, its t appended to ``stamps`` and ``times``, its payloads joined (as ChunkedDecoder
 * joins them) to ``payloads``. With ``watched`` (the body
 * has a read-timeout watchdog) only a payload that is content for it is taken (it starts with
 * "d" and holds no '"ping"'), and ``content_ns`` is the last such t (0: none). Anything else (an
 * error, EOF, a partial chunk, more than 256 chunks in one read, the last chunk, a chunk-size line Python's int()
 * reads but plain hex is not, an idle piece) is left at the head of the queue for the Python
 * loop. status: 0, or 1 when ``nbytes`` passed ``max_bytes``, 2 when a piece came after
 * ``deadline_ns`` (>= 0), checked after each piece as read_pieces checks them. */
#define MAX_CHUNKS 256

static PyObject *
take_chunks(PyObject *self, PyObject *args)
{
    PyObject *queue, *stamps, *times, *payloads;
    long long nbytes, max_bytes, deadline, content = 0;
    int watched, status = 0;
    if (!PyArg_ParseTuple(args, "OO!O!O!LLLp", &queue, &PyList_Type, &stamps, &PyList_Type, &times, &PyList_Type,
                          &payloads, &nbytes, &max_bytes, &deadline, &watched))
        return NULL;
    while (PyObject_Length(queue) > 0) {
        PyObject *item = PySequence_GetItem(queue, 0);
        if (item == NULL)
            return NULL;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1))
                || !PyLong_Check(PyTuple_GET_ITEM(item, 0))) {
            Py_DECREF(item);
            break;
        }
        PyObject *t = PyTuple_GET_ITEM(item, 0), *data = PyTuple_GET_ITEM(item, 1);
        const char *bytes = PyBytes_AS_STRING(data);
        Py_ssize_t n = PyBytes_GET_SIZE(data), pos = 0, size = 0, count = 0;
        Py_ssize_t starts[MAX_CHUNKS], sizes[MAX_CHUNKS];
        while (pos < n) {                              /* "<hex>\r\n<payload>\r\n", again and again */
            Py_ssize_t end = pos;
            long long length = 0;
            while (end < n && end - pos < 15) {
                char c = bytes[end];
                int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                            : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
                if (digit < 0)
                    break;
                length = length * 16 + digit;
                end++;
            }
            if (end == pos || end + 1 >= n || bytes[end] != '\r' || bytes[end + 1] != '\n' || length <= 0
                    || length > n - (end + 2) - 2 || bytes[end + 2 + length] != '\r'
                    || bytes[end + 3 + length] != '\n' || count == MAX_CHUNKS) {
                count = 0;                             /* not whole chunks only: Python decides */
                break;
            }
            starts[count] = end + 2;
            sizes[count++] = (Py_ssize_t)length;
            size += (Py_ssize_t)length;
            pos = end + 4 + (Py_ssize_t)length;
        }
        if (count == 0) {
            Py_DECREF(item);
            break;
        }
        PyObject *piece = count == 1 ? PyBytes_FromStringAndSize(bytes + starts[0], sizes[0])
                                     : PyBytes_FromStringAndSize(NULL, size);
        if (piece == NULL) {
            Py_DECREF(item);
            return NULL;
        }
        if (count > 1) {                               /* the read's payloads joined, as the decoder joins them */
            char *into = PyBytes_AS_STRING(piece);
            for (Py_ssize_t i = 0; i < count; i++) {
                memcpy(into, bytes + starts[i], (size_t)sizes[i]);
                into += sizes[i];
            }
        }
        const char *payload = PyBytes_AS_STRING(piece);
        if (watched && (payload[0] != 'd' || memmem(payload, (size_t)size, "\"ping\"", 6) != NULL)) {
            Py_DECREF(piece);
            Py_DECREF(item);
            break;                                     /* maybe an idle piece: the watchdog's note decides */
        }
        long long stamp = PyLong_AsLongLong(t);
        PyObject *popped = (stamp == -1 && PyErr_Occurred()) || piece == NULL ? NULL
                           : PyObject_CallMethod(queue, "popleft", NULL);
        if (popped == NULL || PyList_Append(stamps, t) || PyList_Append(times, t) || PyList_Append(payloads, piece)) {
            Py_XDECREF(popped);
            Py_XDECREF(piece);
            Py_DECREF(item);
            return NULL;
        }
        Py_DECREF(popped);
        Py_DECREF(piece);
        Py_DECREF(item);
        if (watched)
            content = stamp;
        nbytes += size;
        if (nbytes > max_bytes) {
            status = 1;
            break;
        }
        if (deadline >= 0 && stamp > deadline) {
            status = 2;
            break;
        }
    }
    if (PyErr_Occurred())
        return NULL;
    return Py_BuildValue("(LLi)", nbytes, content, status);
}

/* round((t - t0) / 1e6, 3) as Python computes it, for what int64 cannot hold (or a t that is no int) */
static PyObject *
offset_as_python(PyObject *t, PyObject *t0)
{
    PyObject *d = PyNumber_Subtract(t, t0);
    if (d == NULL)
        return NULL;
    PyObject *million = PyFloat_FromDouble(1e6);
    PyObject *q = million == NULL ? NULL : PyNumber_TrueDivide(d, million);
    Py_DECREF(d);
    Py_XDECREF(million);
    if (q == NULL)
        return NULL;
    PyObject *rounded = PyObject_CallMethod(q, "__round__", "i", 3);
    Py_DECREF(q);
    return rounded;
}

static PyObject *
offsets_ms(PyObject *self, PyObject *args)
{
    PyObject *times, *counts, *t0_obj;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyList_Type, &times, &PyList_Type, &counts, &t0_obj))
        return NULL;
    /* the fast path for exact ints (reading them runs no Python code) that int64 holds; anything
     * else as Python computes it, raising what Python raises */
    long long t0 = PyLong_CheckExact(t0_obj) ? PyLong_AsLongLong(t0_obj) : -1;
    int t0_fits = PyLong_CheckExact(t0_obj) && !(t0 == -1 && PyErr_Occurred());
    if (PyErr_Occurred())
        PyErr_Clear();                                /* an OverflowError: every offset the slow way */
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    /* The lists are read as zip() reads them: both items taken (and held) before any Python code
     * runs on them, the sizes read again before each pair, since a __bool__ may change the lists. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(times) && i < PyList_GET_SIZE(counts); i++) {
        PyObject *t_obj = PyList_GET_ITEM(times, i), *count = PyList_GET_ITEM(counts, i);
        Py_INCREF(t_obj);
        Py_INCREF(count);
        int nonzero = PyObject_IsTrue(count);
        Py_DECREF(count);
        if (nonzero <= 0) {
            Py_DECREF(t_obj);
            if (nonzero < 0)
                goto error;
            continue;
        }
        long long t = t0_fits && PyLong_CheckExact(t_obj) ? PyLong_AsLongLong(t_obj) : -1;
        long long d = 0;
        if (!t0_fits || !PyLong_CheckExact(t_obj) || (t == -1 && PyErr_Occurred())
                || __builtin_sub_overflow(t, t0, &d)) {
            PyErr_Clear();                            /* (an OverflowError reading t, if any) */
            PyObject *slow = offset_as_python(t_obj, t0_obj);
            Py_DECREF(t_obj);
            if (slow == NULL || PyList_Append(out, slow)) {
                Py_XDECREF(slow);
                goto error;
            }
            Py_DECREF(slow);
            continue;
        }
        Py_DECREF(t_obj);
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
        if (d >= 0 && d < (1LL << 50) && d % 1000 != 500) {
            /* d ns is at least 1 ns from a rounding boundary (...500 ns) and the double x within
             * half an ulp (< 2^-23 ms here) of d / 10^6: x rounds where d / 1000 rounds, and the
             * double nearest m / 1000 is what round() reads back */
            value = PyFloat_FromDouble((double)((d + 500) / 1000) / 1000.0);
        }
        else if (Py_IS_FINITE(x)) {
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
 * Reader._read's read (fourfold.client.reactor), as drain does it: one non-blocking recvmsg
 * of up to 64 KiB on ``fd`` with the kernel's SO_TIMESTAMPNS stamp. ``now`` is perf_counter_ns() after the read
 * (CLOCK_MONOTONIC, as Python's perf_counter on Linux); ``t`` is the stamp (CLOCK_REALTIME) +
 * ``offset_ns`` when that lies in (0, now), else ``now``. ``data`` is the bytes (b"" at EOF) or,
 * when the read failed, the OSError instance Python's recvmsg would have raised. None when
 * nothing was there (EAGAIN) or a signal interrupted the call: the caller reads again later. */
#if defined(__linux__) && defined(SCM_TIMESTAMPNS)
#include <sys/epoll.h>

static char read_buffer[65536];   /* one read at a time: the GIL is held (the reads never block) */

/* One non-blocking kernel-stamped read of ``fd``: 1 with *data (new reference: bytes, or the
 * OSError instance Python's recvmsg would have raised) and *t, *now set; 0 when nothing was there
 * (EAGAIN) or a signal interrupted it; -1 with an exception set. */
static int
read_stamped(int fd, long long offset, long long *t, PyObject **data, long long *now)
{
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {read_buffer, sizeof(read_buffer)};
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
    int error = n < 0 ? errno : 0;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    *now = *t = (long long)mono.tv_sec * 1000000000LL + mono.tv_nsec;
    if (n < 0) {
        if (error == EAGAIN || error == EWOULDBLOCK || error == EINTR)
            return 0;
        *data = PyObject_CallFunction(PyExc_OSError, "is", error, strerror(error));
        return *data == NULL ? -1 : 1;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS
                && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec stamp;
            memcpy(&stamp, CMSG_DATA(c), sizeof(stamp));
            long long kernel = (long long)stamp.tv_sec * 1000000000LL + stamp.tv_nsec + offset;
            if (0 < kernel && kernel < *t)
                *t = kernel;
        }
    }
    *data = PyBytes_FromStringAndSize(read_buffer, n);
    return *data == NULL ? -1 : 1;
}

static PyObject *
recv_stamped(PyObject *self, PyObject *args)
{
    int fd;
    long long offset, t, now;
    PyObject *data;
    if (!PyArg_ParseTuple(args, "iL", &fd, &offset))
        return NULL;
    int got = read_stamped(fd, offset, &t, &data, &now);
    if (got < 0)
        return NULL;
    if (got == 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LNL)", t, data, now);
}

static PyObject *s_queue, *s_last_ns, *s_queued, *s_lazy, *s_chunked, *s_remaining, *s_woken_ns, *s_wake,
                *s_ended, *s_append;

static int
get_ll(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int
set_ll(PyObject *obj, PyObject *name, long long value)
{
    PyObject *number = PyLong_FromLongLong(value);
    if (number == NULL)
        return -1;
    int failed = PyObject_SetAttr(obj, name, number);
    Py_DECREF(number);
    return failed;
}

static int
call_with_now(PyObject *reader, PyObject *name, long long now)
{
    PyObject *number = PyLong_FromLongLong(now);
    if (number == NULL)
        return -1;
    PyObject *result = PyObject_CallMethodOneArg(reader, name, number);
    Py_DECREF(number);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* Reader.on_ready (fourfold.client.reactor) for one reader: 1 when it read, 0 when nothing was
 * there, -1 with an exception set. */
static int
on_ready(PyObject *reader, int fd, long long offset, long long dense_gap, long long wake_bytes,
         long long wake_every, long *short_gaps)
{
    long long t, now, last, queued, remaining, woken;
    PyObject *data;
    int got = read_stamped(fd, offset, &t, &data, &now);
    if (got <= 0)
        return got;
    if (get_ll(reader, s_last_ns, &last))
        goto error;
    if (t < last)              /* a stamp before the previous read's: the clocks disagreed */
        t = last;
    PyObject *queue = PyObject_GetAttr(reader, s_queue);
    PyObject *pair = queue == NULL ? NULL : Py_BuildValue("(LO)", t, data);
    PyObject *appended = pair == NULL ? NULL : PyObject_CallMethodOneArg(queue, s_append, pair);
    Py_XDECREF(queue);
    Py_XDECREF(pair);
    if (appended == NULL)
        goto error;
    Py_DECREF(appended);
    if (set_ll(reader, s_last_ns, t))
        goto error;
    if (last && t - last < dense_gap)
        (*short_gaps)++;
    if (!PyBytes_Check(data) || PyBytes_GET_SIZE(data) == 0) {      /* EOF or an error: the end */
        Py_DECREF(data);
        return call_with_now(reader, s_ended, now) ? -1 : 1;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (get_ll(reader, s_queued, &queued) || set_ll(reader, s_queued, queued + n))
        goto error;
    queued += n;
    int end;
    int lazy = 0, chunked = 0;
    PyObject *flag = PyObject_GetAttr(reader, s_lazy);
    if (flag == NULL || (lazy = PyObject_IsTrue(flag)) < 0) {
        Py_XDECREF(flag);
        goto error;
    }
    Py_DECREF(flag);
    if (!lazy) {
        end = 1;
    }
    else {
        flag = PyObject_GetAttr(reader, s_chunked);
        if (flag == NULL || (chunked = PyObject_IsTrue(flag)) < 0) {
            Py_XDECREF(flag);
            goto error;
        }
        Py_DECREF(flag);
        if (chunked) {
            const char *bytes = PyBytes_AS_STRING(data);
            end = n < 5 || memcmp(bytes + n - 4, "\r\n\r\n", 4) == 0;   /* a torn last chunk: a tiny read */
        }
        else {
            if (get_ll(reader, s_remaining, &remaining))
                goto error;
            if (remaining >= 0) {
                remaining -= n;
                if (set_ll(reader, s_remaining, remaining))
                    goto error;
                end = remaining <= 0;
            }
            else {
                end = 0;
            }
        }
    }
    Py_DECREF(data);
    if (!end && queued < wake_bytes) {
        if (get_ll(reader, s_woken_ns, &woken))
            return -1;
        if (now - woken < wake_every)
            return 1;
    }
    return call_with_now(reader, s_wake, now) ? -1 : 1;
error:
    Py_DECREF(data);
    return -1;
}

/* drain(epfd, readers, offset_ns, dense_gap_ns, wake_bytes, wake_every_ns) -> (ready, short_gaps)
 *
 * Reactor.drain (fourfold.client.reactor): one epoll_wait(0) of up to 1023 events (as Python's
 * epoll.poll(0)), and for each ready descriptor with a Reader in ``readers`` the steps of
 * Reader.on_ready: the stamped read, the (t, data) pair queued, the reader's last_ns, _queued and
 * _remaining kept, and its _wake(now) (or at EOF / an error its _ended(now)) called when the body
 * can have ended, WAKE_BYTES are queued or it has not been woken for WAKE_EVERY_NS. Returns how
 * many descriptors were ready and how many reads came less than ``dense_gap_ns`` after their
 * reader's previous one. */
static PyObject *
drain(PyObject *self, PyObject *args)
{
    int epfd;
    PyObject *readers;
    long long offset, dense_gap, wake_bytes, wake_every;
    static struct epoll_event events[1023];
    if (!PyArg_ParseTuple(args, "iO!LLLL", &epfd, &PyDict_Type, &readers, &offset, &dense_gap, &wake_bytes,
                          &wake_every))
        return NULL;
    int ready = epoll_wait(epfd, events, 1023, 0);
    if (ready < 0) {
        if (errno != EINTR)
            return PyErr_SetFromErrno(PyExc_OSError);
        ready = 0;
    }
    long short_gaps = 0;
    for (int i = 0; i < ready; i++) {
        int fd = events[i].data.fd;
        PyObject *key = PyLong_FromLong(fd);
        if (key == NULL)
            return NULL;
        PyObject *reader = PyDict_GetItemWithError(readers, key);
        Py_DECREF(key);
        if (reader == NULL) {
            if (PyErr_Occurred())
                return NULL;
            continue;
        }
        Py_INCREF(reader);     /* its _ended may take it out of the dict */
        int failed = on_ready(reader, fd, offset, dense_gap, wake_bytes, wake_every, &short_gaps) < 0;
        Py_DECREF(reader);
        if (failed)
            return NULL;
    }
    return Py_BuildValue("(il)", ready, short_gaps);
}
#define HAVE_RECV_STAMPED 1
#endif

static PyMethodDef methods[] = {
#ifdef HAVE_RECV_STAMPED
    {"recv_stamped", recv_stamped, METH_VARARGS, "One non-blocking kernel-stamped read (see the comment above)."},
    {"drain", drain, METH_VARARGS, "Reactor.drain's poll and reads (see the comment above)."},
#endif
    {"scan_events", scan_events, METH_VARARGS, "The plain-delta scan of a whole SSE body (see the module comment)."},
    {"take_chunks", take_chunks, METH_VARARGS, "RawStream._read_chunked's whole-chunk step (see the comment above)."},
    {"offsets_ms", offsets_ms, METH_VARARGS, "[round((t - t0) / 1e6, 3) for t, n in zip(times, counts) if n]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hotpath", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__hotpath(void)
{
#ifdef HAVE_RECV_STAMPED
    if (!(s_queue = PyUnicode_InternFromString("queue")) || !(s_last_ns = PyUnicode_InternFromString("last_ns"))
            || !(s_queued = PyUnicode_InternFromString("_queued")) || !(s_lazy = PyUnicode_InternFromString("_lazy"))
            || !(s_chunked = PyUnicode_InternFromString("_chunked"))
            || !(s_remaining = PyUnicode_InternFromString("_remaining"))
            || !(s_woken_ns = PyUnicode_InternFromString("_woken_ns")) || !(s_wake = PyUnicode_InternFromString("_wake"))
            || !(s_ended = PyUnicode_InternFromString("_ended")) || !(s_append = PyUnicode_InternFromString("append")))
        return NULL;
#endif
    return PyModule_Create(&module);
}
