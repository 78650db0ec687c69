// qgate-prefill: a small llama-style prefill engine over a qgate kernel build (see prefill_cli.h).
#include "qgate/prefill/prefill_cli.h"
#include "qgate/worker/kernel_build.h"

int main(int argc, char** argv) {
  qgate::worker::install_fatal_signal_report();
  return qgate::prefill::run_prefill_cli(argc, argv);
}
