window.QGATE_SNAPSHOT = null;
