// qgate-worker: loads one kernel build and runs its parity cases or timings (see worker_cli.h).
#include "qgate/worker/kernel_build.h"
#include "qgate/worker/worker_cli.h"

int main(int argc, char** argv) {
  qgate::worker::install_fatal_signal_report();
  return qgate::worker::run_worker_cli(argc, argv);
}
