// The names of the signals a process of qgate's can die of, in one place: the worker's fatal-signal
// handler (async-signal-safe) and qgated's classification of a worker's end both read them here.
#pragma once

#include <csignal>

namespace qgate::common {

/// "SIGSEGV" for SIGSEGV and so on; nullptr for a signal without a name here. A literal, no
/// allocation: safe in a signal handler.
constexpr const char* known_signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    default: return nullptr;
  }
}

}  // namespace qgate::common
