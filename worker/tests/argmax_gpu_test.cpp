// Greedy decoding's last step on the GPU: argmax over a 32000-row q6_K output head must pick the
// same token on the MMQ and the f16 path for a fixed seed.
#include <gtest/gtest.h>

#include "qgate/worker/worker_cli.h"
#include "worker_process.h"

using namespace qgate::worker::testing;

TEST(GreedyArgmax, MmqAndF16PickTheSameTokens) {
  auto r = run_worker(std::string("argmax --backend cuda --type q6_K --od 32000 --k 4096 --nt 128 --json --build ") +
                      ref_library());
  std::cerr << r.out << r.err;
  EXPECT_EQ(r.exit_code, qgate::worker::kExitOk);
  EXPECT_NE(r.out.find("\"identical\":128"), std::string::npos) << r.out;
}
