"""The HTTP client fourfold sends LLM requests with: its HTTP/1.1 transport (``transport``,
``h1wire``, ``h1body``), the reactor that stamps every read (``reactor``, with the optional C steps of
``_hotpath.c`` behind ``native``), HTTP/2 through httpx (``h2client``), content encodings (``encoding``),
the incremental SSE decoder (``sse``), the wire formats as parsers without sockets (``dialects``), the
streamed request that turns a response into a :class:`fourfold.measure.record.RequestRecord` (``stream``)
and the httpx clients per user (``factory``). Imports ``measure``, ``workloads`` and ``rundir``, never
``levels`` or ``reports``."""
