// qgate-worker: loads one kernel build and runs its parity cases or timings (see worker_cli.h).
#include "qgate/worker/worker_cli.h"

int main(int argc, char** argv) { return qgate::worker::run_worker_cli(argc, argv); }
