// The snapshot's answers, when `qgate dashboard --out` wrote this folder; served by qgated, there are none.
window.QGATE_SNAPSHOT = null;
