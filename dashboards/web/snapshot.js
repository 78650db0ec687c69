// The snapshot's answers, when `qgate dashboard --out` wrote this folder: each request's answer as the
// API writes it, in its envelope ({schema_version, context, <key>: data}). Served by qgated, there are none.
window.QGATE_SNAPSHOT = null;
