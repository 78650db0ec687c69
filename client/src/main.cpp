// qgate: the command-line client of qgated. All the work is in the qgate_client library.
#include "qgate/client/cli.h"

int main(int argc, char** argv) { return qgate::client::run_cli(argc, argv); }
