// The qgate command line: parses argv, runs one command against qgated and returns the exit code
// (exit_codes.h). main() is just this call.
#pragma once

namespace qgate::client {

/// Never throws: every error becomes one "qgate: <message>" line on stderr and exit code 3.
int run_cli(int argc, char** argv);

}  // namespace qgate::client
